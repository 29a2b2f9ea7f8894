//===- Training.cpp - what the training passes share ----------------------===//

#include "ampc/Transforms/Training.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>
#include <string>

using namespace mlir;

ampc::Seed ampc::findLossSeed(func::FuncOp step) {
  Seed seed;
  step.walk([&](ampc::ConstantOp c) {
    if (c->hasAttr(ampc::kLossSeedAttr))
      seed.op = c;
  });
  return seed;
}

SmallVector<unsigned> ampc::gradientResults(func::FuncOp step) {
  SmallVector<unsigned> results;
  for (unsigned i = 0; i < step.getNumResults(); ++i)
    if (step.getResultAttr(i, ampc::kGradientOfAttr))
      results.push_back(i);
  return results;
}

Value ampc::declareState(ModuleOp module, func::FuncOp func, StringRef name,
                         ElementsAttr initial, FlatSymbolRefAttr derivedFrom) {
  SymbolTable symbols(module);
  return declareState(symbols, func, name, initial, derivedFrom);
}

Value ampc::declareState(SymbolTable &symbols, func::FuncOp func,
                         StringRef name, ElementsAttr initial,
                         FlatSymbolRefAttr derivedFrom) {
  auto module = cast<ModuleOp>(symbols.getOp());
  OpBuilder b(module.getContext());
  auto type = cast<RankedTensorType>(initial.getType());
  if (!symbols.lookup(name)) {
    // After the last parameter or state, so symbols stay grouped. Searched
    // from the end: only the functions follow the symbols.
    Operation *last = nullptr;
    for (Operation &op : llvm::reverse(module.getBody()->getOperations()))
      if (isa<ampc::ParameterOp, ampc::StateOp>(op)) {
        last = &op;
        break;
      }
    if (last)
      b.setInsertionPointAfter(last);
    else
      b.setInsertionPointToStart(module.getBody());
    auto state = ampc::StateOp::create(b, func.getLoc(), name, type, initial,
                                       derivedFrom);
    symbols.insert(state);
  }
  b.setInsertionPointToStart(&func.getBody().front());
  return ampc::LoadStateOp::create(b, func.getLoc(), type, name);
}

Value ampc::countIf(OpBuilder &b, Location loc, Value counter, Value flag,
                    bool when) {
  auto type = cast<RankedTensorType>(counter.getType());
  Value one = ampc::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getIntegerAttr(type.getElementType(), 1)));
  Value next = ampc::AddOp::create(b, loc, counter, one);
  return when ? ampc::WhereOp::create(b, loc, flag, next, counter).getResult()
              : ampc::WhereOp::create(b, loc, flag, counter, next).getResult();
}

Value ampc::findFoundInf(func::FuncOp step) {
  Value found;
  step.walk([&](ampc::UnscaleOp u) { found = u.getFoundInf(); });
  return found;
}

namespace {
/// The node name of `op` (its NameLoc), or its op name.
/// The ONNX op type (the importer's location, NAME(fused<"OpType">[...]))
/// and node name of `op`, or its op name.
std::string describeOp(Operation *op) {
  std::string kind = op->getName().stripDialect().str();
  auto named = dyn_cast<NameLoc>(op->getLoc());
  if (!named)
    return kind;
  if (auto fused = dyn_cast<FusedLoc>(named.getChildLoc()))
    if (auto type = dyn_cast_or_null<StringAttr>(fused.getMetadata()))
      kind = type.getValue().str();
  return kind + " '" + named.getName().str() + "'";
}

int64_t dim0(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && type.hasStaticShape() && type.getRank() > 0
             ? type.getDimSize(0)
             : -1;
}

int64_t rankOf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? type.getRank() : -1;
}

/// Whether `axis` of a rank-`rank` tensor is a valid axis other than 0.
bool notAxis0(int64_t axis, int64_t rank) {
  std::optional<int64_t> a = ampc::normalizeAxis(axis, rank);
  return a && *a != 0;
}

/// Whether `axes` (of a rank-`rank` tensor) leaves axis 0 alone; empty
/// axes are every axis.
bool keepsAxis0(ArrayRef<int64_t> axes, int64_t rank) {
  if (axes.empty())
    return false;
  for (int64_t a : axes)
    if (!notAxis0(a, rank))
      return false;
  return true;
}
} // namespace

std::string ampc::batchMixingReason(func::FuncOp forward, int64_t batch) {
  if (batch <= 0)
    return "the inputs have no batch dimension";
  // The values that depend on a batch input.
  llvm::DenseSet<Value> carried;
  for (BlockArgument arg : forward.getArguments()) {
    if (dim0(arg) != batch)
      return "input " + std::to_string(arg.getArgNumber()) +
             " does not have the batch (" + std::to_string(batch) +
             " rows) on axis 0";
    carried.insert(arg);
  }
  std::string reason;
  forward.walk([&](Operation *op) {
    if (isa<func::ReturnOp>(op))
      return WalkResult::advance();
    SmallVector<Value> rowed;
    for (Value v : op->getOperands())
      if (carried.contains(v))
        rowed.push_back(v);
    if (rowed.empty())
      return WalkResult::advance();
    auto mixed = [&](StringRef why) {
      reason = describeOp(op) + " " + why.str();
      return WalkResult::interrupt();
    };
    if (auto bn = dyn_cast<ampc::BatchNormalizationOp>(op);
        bn && bn.getTrainingMode())
      return mixed("computes statistics over the batch");
    if (op->getNumResults() == 0)
      return mixed("is not known to keep batch rows apart");
    Value out = op->getResult(0);
    int64_t rows = dim0(out), rank = rankOf(out);
    // Every result keeps the rows on axis 0: a multiple of the batch.
    for (Value r : op->getResults())
      if (dim0(r) <= 0 || dim0(r) % batch != 0)
        return mixed("does not keep the batch on axis 0");
    // Each batch operand's axis 0 is the result's, row for row.
    auto sameRows = [&](ArrayRef<Value> values) {
      for (Value v : values)
        if (rankOf(v) != rank || dim0(v) != rows)
          return false;
      return true;
    };
    bool ok = false;
    if (op->hasTrait<ampc::Elementwise>() || isa<ampc::CastOp>(op)) {
      ok = sameRows(rowed);
    } else if (auto mm = dyn_cast<ampc::MatMulOp>(op)) {
      // Rows of A times a batch-free B, or a batched product of two
      // batch operands that carry it on axis 0.
      if (!carried.contains(mm.getRhs()))
        ok = rankOf(mm.getLhs()) >= 2 && sameRows({mm.getLhs()});
      else
        ok = rankOf(mm.getLhs()) >= 3 && rankOf(mm.getRhs()) >= 3 &&
             sameRows(rowed);
    } else if (auto gemm = dyn_cast<ampc::GemmOp>(op)) {
      ok = carried.contains(gemm.getA()) && !carried.contains(gemm.getB()) &&
           !(gemm.getC() && carried.contains(gemm.getC())) &&
           gemm.getTransA() == 0 && sameRows({gemm.getA()});
    } else if (auto conv = dyn_cast<ampc::ConvOp>(op)) {
      ok = rowed.size() == 1 && rowed[0] == op->getOperand(0) &&
           sameRows(rowed);
    } else if (auto reduce = dyn_cast<ampc::ReduceMeanOp>(op)) {
      ok = keepsAxis0(reduce.getAxes(), rankOf(reduce.getInput())) &&
           dim0(reduce.getInput()) == rows;
    } else if (auto reduce = dyn_cast<ampc::ReduceSumOp>(op)) {
      ok = keepsAxis0(reduce.getAxes(), rankOf(reduce.getInput())) &&
           dim0(reduce.getInput()) == rows;
    } else if (auto reduce = dyn_cast<ampc::ReduceMaxOp>(op)) {
      ok = keepsAxis0(reduce.getAxes(), rankOf(reduce.getInput())) &&
           dim0(reduce.getInput()) == rows;
    } else if (auto softmax = dyn_cast<ampc::SoftmaxOp>(op)) {
      ok = notAxis0(softmax.getAxis(), rank) && sameRows(rowed);
    } else if (auto softmax = dyn_cast<ampc::LogSoftmaxOp>(op)) {
      ok = notAxis0(softmax.getAxis(), rank) && sameRows(rowed);
    } else if (auto norm = dyn_cast<ampc::LayerNormalizationOp>(op)) {
      ok = rowed.size() == 1 && rowed[0] == norm.getInput() &&
           notAxis0(norm.getAxis(), rank) && sameRows(rowed);
    } else if (auto att = dyn_cast<ampc::AttentionOp>(op)) {
      // Each (b, h) is its own attention: the rows stay apart when every
      // operand and O hold the logical batch dimension b on axis 0.
      ok = att.getQPerm()[0] == 0 && att.getKPerm()[0] == 0 &&
           att.getVPerm()[0] == 0 && att.getOPerm()[0] == 0 &&
           sameRows(rowed);
    } else if (isa<ampc::ExpandOp>(op)) {
      ok = sameRows(rowed);
    } else if (isa<ampc::MaxPoolOp, ampc::AveragePoolOp,
                   ampc::GlobalAveragePoolOp>(op)) {
      ok = rowed.size() == 1 && rowed[0] == op->getOperand(0) &&
           sameRows(rowed);
    } else if (isa<ampc::ReshapeOp, ampc::FlattenOp, ampc::SqueezeOp,
                   ampc::UnsqueezeOp>(op)) {
      // Row-major: row b's elements stay the b-th block of the result.
      ok = true;
    } else if (auto t = dyn_cast<ampc::TransposeOp>(op)) {
      ok = !t.getPerm().empty() && t.getPerm()[0] == 0 && sameRows(rowed);
    } else if (auto g = dyn_cast<ampc::GatherOp>(op)) {
      // A batch-free table looked up by batch indices (axis 0), or a batch
      // tensor gathered along another axis by batch-free indices.
      if (!carried.contains(g.getData()))
        ok = ampc::normalizeAxis(g.getAxis(), rankOf(g.getData())) == 0 &&
             rankOf(g.getIndices()) >= 1 && dim0(g.getIndices()) == rows;
      else
        ok = !carried.contains(g.getIndices()) &&
             notAxis0(g.getAxis(), rankOf(g.getData())) &&
             sameRows({g.getData()});
    } else if (auto concat = dyn_cast<ampc::ConcatOp>(op)) {
      ok = notAxis0(concat.getAxis(), rank) && sameRows(rowed);
    } else if (auto slice = dyn_cast<ampc::SliceOp>(op)) {
      ok = keepsAxis0(slice.getAxes(), rank) && sameRows(rowed);
    } else if (isa<ampc::BatchNormalizationOp>(op)) {
      ok = rowed.size() == 1 && rowed[0] == op->getOperand(0) &&
           sameRows(rowed);
    } else if (isa<ampc::DropoutOp>(op)) {
      ok = sameRows(rowed);
    } else {
      return mixed("is not known to keep batch rows apart");
    }
    if (!ok)
      return mixed("mixes the rows of the batch");
    for (Value r : op->getResults())
      carried.insert(r);
    return WalkResult::advance();
  });
  return reason;
}
