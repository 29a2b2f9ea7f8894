//===- DialectTest.cpp - unit tests of the ampc dialect's C++ API ---------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/Optimizers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

using namespace mlir;

namespace {

// The optimizer facts (include/ampc/Dialect/Optimizers.h): every kind but
// `none` has them, and what the pass, the verifiers and the messages read
// from them is torch.optim's.
TEST(Optimizers, FactsOfEveryKind) {
  for (uint32_t v = 0; v <= ampc::getMaxEnumValForOptimizerKind(); ++v) {
    std::optional<ampc::OptimizerKind> kind = ampc::symbolizeOptimizerKind(v);
    ASSERT_TRUE(kind);
    EXPECT_EQ(ampc::optimizerFacts(*kind) == nullptr,
              *kind == ampc::OptimizerKind::None)
        << ampc::stringifyOptimizerKind(*kind).str();
  }
  EXPECT_EQ(ampc::optimizerKindList(), "sgd, adam or adamw");
  EXPECT_EQ(ampc::foreignOptimizerSettings(ampc::OptimizerKind::Sgd),
            "beta1, beta2 or eps");
  EXPECT_EQ(ampc::foreignOptimizerSettings(ampc::OptimizerKind::Adamw),
            "momentum or dampening");
  EXPECT_EQ(ampc::momentCount(ampc::OptimizerKind::Sgd, 0), 0u);
  EXPECT_EQ(ampc::momentCount(ampc::OptimizerKind::Sgd, 0.9), 1u);
  EXPECT_EQ(ampc::momentCount(ampc::OptimizerKind::Adam, 0), 2u);
  EXPECT_EQ(ampc::momentCount(ampc::OptimizerKind::None, 0.9), 0u);
  const ampc::OptimizerFacts &adamw =
      *ampc::optimizerFacts(ampc::OptimizerKind::Adamw);
  ASSERT_EQ(adamw.moments.size(), 2u);
  EXPECT_EQ(adamw.moments[0], ".exp_avg");
  EXPECT_EQ(adamw.moments[1], ".exp_avg_sq");
  EXPECT_EQ(adamw.defaultWeightDecay, 0.01);
  EXPECT_EQ(ampc::optimizerFacts(ampc::OptimizerKind::Adam)->defaultWeightDecay,
            0.0);
  EXPECT_EQ(ampc::optimizerFacts(ampc::OptimizerKind::Sgd)->moments[0],
            ".momentum_buffer");
}

TEST(Broadcast, NumpyRules) {
  using V = llvm::SmallVector<int64_t>;
  EXPECT_EQ(*ampc::broadcastShapes({V{4, 1, 3}, V{5, 1}}), (V{4, 5, 3}));
  EXPECT_EQ(*ampc::broadcastShapes({V{}, V{2, 2}}), (V{2, 2}));
  EXPECT_EQ(*ampc::broadcastShapes({V{0, 3}, V{1, 3}}), (V{0, 3}));
  EXPECT_FALSE(ampc::broadcastShapes({V{2, 3}, V{3, 3}}));
  EXPECT_FALSE(ampc::broadcastShapes({V{0}, V{2}}));
}

TEST(Axis, Normalize) {
  EXPECT_EQ(ampc::normalizeAxis(-1, 3), 2);
  EXPECT_EQ(ampc::normalizeAxis(0, 3), 0);
  EXPECT_FALSE(ampc::normalizeAxis(3, 3));
  EXPECT_FALSE(ampc::normalizeAxis(-4, 3));
  EXPECT_FALSE(ampc::normalizeAxis(0, 0));
}

class DialectTest : public ::testing::Test {
protected:
  DialectTest() : builder(&context) {
    context.loadDialect<ampc::AMPCDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    builder.setInsertionPointToEnd(module->getBody());
  }
  RankedTensorType f32(llvm::ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, builder.getF32Type());
  }
  /// A function with arguments of `types`, the builder inside its body.
  func::FuncOp function(llvm::ArrayRef<Type> types) {
    auto f = func::FuncOp::create(builder, builder.getUnknownLoc(), "f",
                                  builder.getFunctionType(types, {}));
    builder.setInsertionPointToStart(f.addEntryBlock());
    return f;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
};

TEST_F(DialectTest, MatMulInfersBroadcastBatch) {
  func::FuncOp f = function({f32({8, 1, 16, 32}), f32({4, 32, 64})});
  auto mm = ampc::MatMulOp::create(builder, builder.getUnknownLoc(),
                                   f.getArgument(0), f.getArgument(1));
  EXPECT_EQ(mm.getType(), f32({8, 4, 16, 64}));
  EXPECT_TRUE(succeeded(verify(mm)));
}

TEST_F(DialectTest, ShapeFoldsToConstant) {
  func::FuncOp f = function({f32({2, 16, 64})});
  auto shape = ampc::ShapeOp::create(builder, builder.getUnknownLoc(),
                                     f.getArgument(0));
  SmallVector<OpFoldResult> results;
  SmallVector<Attribute> operands = {Attribute()};
  ASSERT_TRUE(succeeded(shape->fold(operands, results)));
  auto value = cast<DenseElementsAttr>(cast<Attribute>(results[0]));
  EXPECT_EQ(llvm::to_vector(value.getValues<int64_t>()),
            (llvm::SmallVector<int64_t>{2, 16, 64}));
}

TEST_F(DialectTest, VerifierRejectsWrongWrittenResultType) {
  func::FuncOp f = function({f32({2, 3}), f32({3})});
  OperationState state(builder.getUnknownLoc(), "ampc.add");
  state.addOperands({f.getArgument(0), f.getArgument(1)});
  state.addTypes(f32({3, 3}));
  Operation *op = builder.create(state);
  std::string messages;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    messages += diag.str() + "\n";
    return success();
  });
  EXPECT_TRUE(failed(verify(op)));
  EXPECT_NE(messages.find("inferred type(s) 'tensor<2x3xf32>' are "
                          "incompatible with return type(s) of operation "
                          "'tensor<3x3xf32>'"),
            std::string::npos)
      << messages;
}

TEST_F(DialectTest, ConcatFoldsIntegerConstants) {
  function({});
  auto i64 = [&](llvm::ArrayRef<int64_t> v) {
    return ampc::ConstantOp::create(
        builder, builder.getUnknownLoc(),
        DenseElementsAttr::get(
            RankedTensorType::get({int64_t(v.size())}, builder.getI64Type()),
            v));
  };
  auto a = i64({2, 16}), b = i64({4});
  auto concat = ampc::ConcatOp::create(builder, builder.getUnknownLoc(),
                                       ValueRange{a, b}, 0);
  SmallVector<OpFoldResult> results;
  ASSERT_TRUE(succeeded(
      concat->fold({a.getValue(), b.getValue()}, results)));
  auto value = cast<DenseElementsAttr>(cast<Attribute>(results[0]));
  EXPECT_EQ(llvm::to_vector(value.getValues<int64_t>()),
            (llvm::SmallVector<int64_t>{2, 16, 4}));
}

/// Every ampc op's precision category (REFERENCE.md 1; "-" for the ops
/// precision assignment leaves alone) against the committed table, which
/// test/Transforms/precision-categories.test also holds the --report
/// decisions to: moving an op between lists, or adding an op, fails here
/// until the table says so.
TEST(PrecisionCategories, EveryOpMatchesTheTable) {
  MLIRContext context;
  context.loadDialect<ampc::AMPCDialect>();
  std::vector<std::string> lines;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != "ampc")
      continue;
    std::optional<ampc::PrecisionCategory> category =
        ampc::getPrecisionCategory(name);
    lines.push_back(name.getStringRef().str() + " " +
                    (category ? ampc::stringifyPrecisionCategory(*category).str()
                              : std::string("-")));
  }
  llvm::sort(lines);
  std::string actual;
  for (const std::string &line : lines)
    actual += line + "\n";
  std::ifstream in(AMPC_SOURCE_DIR
                   "/test/Transforms/Inputs/precision-categories.txt");
  ASSERT_TRUE(in) << "cannot open the table";
  std::string expected, line;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#')
      expected += line + "\n";
  EXPECT_EQ(actual, expected);
}

} // namespace
