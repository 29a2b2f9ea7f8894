//===- ImporterTest.cpp - unit tests of the ONNX importer API -------------===//

#include "ampc/Import/Diagnostics.h"
#include "ampc/Import/OnnxImporter.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/MLIRContext.h"

#include <gtest/gtest.h>

using namespace mlir;

namespace {

/// Imports `text` (ONNX textual syntax) and collects the one-line messages.
struct ImportResult {
  OwningOpRef<ModuleOp> module;
  std::vector<std::string> messages;
};

class ImporterTest : public ::testing::Test {
protected:
  ImportResult import(llvm::StringRef text, const ampc::ImportOptions &options = {},
                      llvm::StringRef name = "model.onnxtext") {
    ImportResult result;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
      result.messages.push_back(ampc::formatDiagnostic(diag));
      return success();
    });
    result.module = ampc::importOnnxBuffer(context, text, name, ".", options);
    return result;
  }

  MLIRContext context;
};

constexpr const char *kMlp = R"(
<ir_version: 8, opset_import: ["" : 17]>
mlp (float[N, 4] x, float[3, 4] w = {1.,2.,3.,4.,5.,6.,7.,8.,9.,10.,11.,12.}) => (float[N, 3] y)
{
  h = Gemm <transB = 1> (x, w)
  y = Relu (h)
}
)";

TEST_F(ImporterTest, BuildsForwardWithParameters) {
  ampc::ImportOptions options;
  options.batch = 5;
  ImportResult r = import(kMlp, options);
  ASSERT_TRUE(r.module) << (r.messages.empty() ? "" : r.messages.front());
  auto forward = r.module->lookupSymbol<func::FuncOp>("forward");
  ASSERT_TRUE(forward);
  EXPECT_EQ(forward.getFunctionType().getNumInputs(), 1u);
  auto in = cast<RankedTensorType>(forward.getFunctionType().getInput(0));
  EXPECT_EQ(in.getShape(), (llvm::ArrayRef<int64_t>{5, 4}));
  auto out = cast<RankedTensorType>(forward.getFunctionType().getResult(0));
  EXPECT_EQ(out.getShape(), (llvm::ArrayRef<int64_t>{5, 3}));
  auto param = r.module->lookupSymbol<ampc::ParameterOp>("w");
  ASSERT_TRUE(param);
  auto values = cast<DenseElementsAttr>(param.getInitialValue());
  EXPECT_EQ(values.getValues<float>()[11], 12.0f);
  int gemms = 0;
  forward.walk([&](ampc::GemmOp op) {
    ++gemms;
    EXPECT_EQ(op.getTransB(), 1u);
  });
  EXPECT_EQ(gemms, 1);
}

TEST_F(ImporterTest, UnboundSymbolicDimNamesInputAndDim) {
  ImportResult r = import(kMlp);
  EXPECT_FALSE(r.module);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0],
            "error: model.onnxtext: input 'x' dim 0 ('N') is symbolic; bind "
            "it with --shape x=DxD... or --batch N");
}

TEST_F(ImporterTest, ShapeBindingOverridesBatch) {
  ampc::ImportOptions options;
  std::string error;
  ASSERT_TRUE(ampc::parseShapeBinding("x=7x4", options, error)) << error;
  options.batch = 5;
  ImportResult r = import(kMlp, options);
  ASSERT_TRUE(r.module);
  auto forward = r.module->lookupSymbol<func::FuncOp>("forward");
  auto in = cast<RankedTensorType>(forward.getFunctionType().getInput(0));
  EXPECT_EQ(in.getDimSize(0), 7);
}

TEST_F(ImporterTest, NodeErrorsNameFileNodeAndOp) {
  ImportResult r = import(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] a, float[4, 3] b) => (float[2, 3] y)
{
  y = Add (a, b)
}
)");
  EXPECT_FALSE(r.module);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0], "error: model.onnxtext: node 'Add_0' (Add): "
                           "ampc.add: shapes [2, 3] and [4, 3] do not "
                           "broadcast");
}

TEST_F(ImporterTest, GarbageBytesAreNotAModel) {
  // 0x0a is field 1 with a length prefix that runs past the end.
  std::string bytes = "\x0a\x7f\x01\x02";
  ImportResult r = import(bytes, {}, "junk.onnx");
  EXPECT_FALSE(r.module);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_NE(r.messages[0].find("error: junk.onnx: not an ONNX model"),
            std::string::npos)
      << r.messages[0];
}

TEST_F(ImporterTest, EmptyBufferHasNoGraph) {
  ImportResult r = import("", {}, "empty.onnx");
  EXPECT_FALSE(r.module);
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0], "error: empty.onnx: not an ONNX model: it has no graph");
}

TEST(SupportedOps, CoversTheFoundationSet) {
  llvm::SmallVector<llvm::StringRef> ops = ampc::supportedOnnxOps();
  EXPECT_TRUE(llvm::is_sorted(ops));
  for (llvm::StringRef op :
       {"MatMul", "Gemm", "Conv", "Add", "Sub", "Mul", "Div", "Neg", "Pow",
        "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Relu", "LeakyRelu",
        "Sigmoid", "Tanh", "Gelu", "Softmax", "LogSoftmax",
        "LayerNormalization", "BatchNormalization", "Dropout", "Reshape",
        "Transpose", "Flatten", "Squeeze", "Unsqueeze", "Concat", "Slice",
        "Gather", "Where", "Expand", "ReduceMean", "ReduceSum", "ReduceMax",
        "MaxPool", "AveragePool", "GlobalAveragePool", "Identity", "Cast",
        "SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss"})
    EXPECT_TRUE(llvm::is_contained(ops, op)) << op.str();
}

TEST(Diagnostics, FormatsNodeLocationsOnOneLine) {
  MLIRContext context;
  Location file = FileLineColLoc::get(&context, "m.onnx", 0, 0);
  Location node = NameLoc::get(
      StringAttr::get(&context, "/encoder/MatMul_3"),
      FusedLoc::get(&context, {file}, StringAttr::get(&context, "MatMul")));
  std::string text;
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &diag) {
    text = ampc::formatDiagnostic(diag);
    return success();
  });
  emitError(node) << "first line\nsecond line";
  EXPECT_EQ(text, "error: m.onnx: node '/encoder/MatMul_3' (MatMul): first "
                  "line second line");
  emitWarning(file) << "rule names no node";
  EXPECT_EQ(text, "warning: m.onnx: rule names no node");
}

} // namespace
