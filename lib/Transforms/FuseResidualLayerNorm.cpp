//===- FuseResidualLayerNorm.cpp - the residual add in the LayerNorm ------===//
//
// Issue 37, item 4 (Passes.td, FuseResidualLayerNormPass). A transformer's
// residual add feeds the next LayerNorm and is read again (the next
// residual, the LayerNorm's adjoint): an elementwise kernel reads both
// summands and writes the sum, and the LayerNorm reads it back. Here the
// LayerNorm takes both summands (ampc.add_layer_norm): one kernel adds, as
// the add did (in its compute type, stored in the sum's type), writes the
// sum for the other readers and normalises the stored values, so the bits
// are those of the add and the LayerNorm.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_FUSERESIDUALLAYERNORMPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

RankedTensorType typeOf(Value v) { return cast<RankedTensorType>(v.getType()); }

/// A 16-bit value that `v` widens exactly (a cast from FP16/BF16 to `v`'s
/// FP32, read by nothing else), or null.
Value widenedFrom(Value v) {
  auto cast = v.getDefiningOp<ampc::CastOp>();
  if (!cast || !cast->hasOneUse() || !typeOf(v).getElementType().isF32())
    return {};
  Type from = typeOf(cast.getInput()).getElementType();
  return from.isF16() || from.isBF16() ? cast.getInput() : Value();
}

void fuse(ampc::LayerNormalizationOp norm) {
  auto add = norm.getInput().getDefiningOp<ampc::AddOp>();
  if (!add || add->getBlock() != norm->getBlock())
    return;
  RankedTensorType x = typeOf(add.getResult());
  Value input = add->getOperand(0), addend = add->getOperand(1);
  if (typeOf(input) != x || typeOf(addend).getShape() != x.getShape())
    return;
  // A summand a cast widened is read as it is (widened on load).
  if (Value narrow = widenedFrom(addend)) {
    addend = narrow;
  } else if (Value narrow = widenedFrom(input)) {
    input = addend;
    addend = narrow;
  }
  if (typeOf(input) != x)
    return;
  // The sum is written where the LayerNorm runs: its other readers must
  // come after it.
  for (Operation *user : add->getUsers())
    if (user != norm.getOperation() &&
        (user->getBlock() != norm->getBlock() ||
         !norm->isBeforeInBlock(user)))
      return;
  OpBuilder b(norm);
  SmallVector<Value> operands = {input, addend, norm.getScale()};
  if (norm.getBias())
    operands.push_back(norm.getBias());
  SmallVector<Type> types = {x};
  llvm::append_range(types, norm->getResultTypes());
  OperationState state(norm.getLoc(), ampc::AddLayerNormOp::getOperationName());
  state.addOperands(operands);
  state.addTypes(types);
  state.addAttributes(norm->getAttrs());
  Operation *fused = b.create(state);
  add.getResult().replaceUsesWithIf(fused->getResult(0), [&](OpOperand &use) {
    return use.getOwner() != norm.getOperation();
  });
  norm->replaceAllUsesWith(fused->getResults().drop_front());
  Operation *summands[] = {add->getOperand(0).getDefiningOp(),
                           add->getOperand(1).getDefiningOp()};
  norm->erase();
  add->erase();
  // A cast folded into the addend's load.
  for (Operation *op : summands)
    if (isa_and_nonnull<ampc::CastOp>(op) && op->use_empty())
      op->erase();
}

struct FuseResidualLayerNorm
    : ampc::impl::FuseResidualLayerNormPassBase<FuseResidualLayerNorm> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<ampc::LayerNormalizationOp> norms;
    for (Operation &op : func.getBody().front())
      if (auto norm = dyn_cast<ampc::LayerNormalizationOp>(op))
        norms.push_back(norm);
    for (ampc::LayerNormalizationOp norm : norms)
      fuse(norm);
  }
};

} // namespace
