//===- FuseBatchNormEpilogue.cpp - ReLU and residual add in the BatchNorm ===//
//
// Issue 39, item 1 (Passes.td, FuseBatchNormEpiloguePass). A CNN's
// BatchNorm output is read once, by a ReLU or by a residual add (and the
// add's sum by a ReLU): each of those is an elementwise kernel that reads
// the normalised tensor back and writes another. Here the BatchNorm takes
// them as its epilogue (`residual`, `relu`): the kernel that normalises
// rounds the value to Y's type, adds the residual and rounds as the add
// did, applies ReLU and writes Y once, so every target computes the bits
// of the ops it replaces. Backward, batch_norm_grad takes the ReLU's
// gradient and the add of a residual block's two gradients as its
// prologue (`addend`, `relu_output`), and returns the masked gradient for
// the shortcut (`keep_grad`).
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_FUSEBATCHNORMEPILOGUEPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

/// The only user of `v`, in `block`, or null.
Operation *soleUserIn(Value v, Block *block) {
  if (!v.hasOneUse())
    return nullptr;
  Operation *user = *v.getUsers().begin();
  return user->getBlock() == block ? user : nullptr;
}

/// Whether `v` is available where `op` runs: a block argument of the
/// function, or the result of an op before `op` in its block.
bool definedBefore(Value v, Operation *op) {
  if (auto arg = dyn_cast<BlockArgument>(v))
    return arg.getOwner() == op->getBlock();
  Operation *def = v.getDefiningOp();
  return def->getBlock() == op->getBlock() && def->isBeforeInBlock(op);
}

void fuse(ampc::BatchNormalizationOp norm) {
  if (norm.getResidual() || norm.getRelu())
    return;
  Block *block = norm->getBlock();
  Value y = norm.getOutput();
  Operation *user = soleUserIn(y, block);
  if (!user)
    return;
  // BatchNorm -> ReLU.
  if (auto relu = dyn_cast<ampc::ReluOp>(user)) {
    if (relu.getType() != y.getType())
      return;
    norm.setRelu(true);
    relu.getResult().replaceAllUsesWith(y);
    relu->erase();
    return;
  }
  // BatchNorm -> add(Y, residual) [-> ReLU]: the residual must exist where
  // the BatchNorm runs, with Y's type (no broadcast), and not be stored
  // over between there and the add.
  auto add = dyn_cast<ampc::AddOp>(user);
  if (!add || add.getType() != y.getType())
    return;
  Value residual = add.getLhs() == y ? add.getRhs() : add.getLhs();
  if (residual.getType() != y.getType() || !definedBefore(residual, norm) ||
      ampc::storedBetween(norm, add, add))
    return;
  Value last = add.getResult();
  auto relu = dyn_cast_or_null<ampc::ReluOp>(soleUserIn(last, block));
  if (relu && relu.getType() == y.getType())
    last = relu.getResult();
  else
    relu = nullptr;
  // The op takes the residual in place: its results keep their readers.
  norm.getResidualMutable().assign(residual);
  if (relu)
    norm.setRelu(true);
  last.replaceAllUsesWith(y);
  if (relu)
    relu->erase();
  add->erase();
}

/// The backward half: batch_norm_grad reads a ReLU's gradient (of the
/// forward's fused ReLU) and, before it, the add of a residual block's
/// two gradient contributions; both become its prologue (`addend`,
/// `relu_output`), and the masked gradient a result (`keep_grad`) when the
/// shortcut reads it too.
void fuse(ampc::BatchNormGradOp grad) {
  if (grad.getAddend() || grad.getReluOutput())
    return;
  Block *block = grad->getBlock();
  auto reluGrad = grad.getGrad().getDefiningOp<ampc::ReluGradOp>();
  Type type = grad.getInput().getType();
  if (!reluGrad || reluGrad->getBlock() != block ||
      reluGrad.getType() != type || reluGrad->getOperand(1).getType() != type ||
      ampc::storedBetween(reluGrad, grad))
    return;
  // The masked gradient's other readers read the kept result: they must
  // come after the batch_norm_grad.
  bool keep = false;
  for (Operation *user : reluGrad->getUsers()) {
    if (user == grad.getOperation())
      continue;
    if (user->getBlock() != block || !grad->isBeforeInBlock(user))
      return;
    keep = true;
  }
  Value g = reluGrad->getOperand(0), addend;
  auto add = g.getDefiningOp<ampc::AddOp>();
  if (add && add->getBlock() == block && add->hasOneUse() &&
      add.getLhs().getType() == type && add.getRhs().getType() == type &&
      !ampc::storedBetween(add, grad)) {
    g = add.getLhs();
    addend = add.getRhs();
  } else {
    add = nullptr;
  }
  OpBuilder b(grad);
  SmallVector<Type> types(grad->getResultTypes());
  if (keep)
    types.push_back(type);
  auto fused = ampc::BatchNormGradOp::create(
      b, grad.getLoc(), types, g, grad.getInput(), grad.getScale(),
      grad.getMean(), grad.getInvStdDev(), addend, reluGrad->getOperand(1),
      grad.getTrainingModeAttr(), keep ? b.getUnitAttr() : UnitAttr(),
      grad.getChannelsLastAttr());
  fused->setDiscardableAttrs(grad->getDiscardableAttrDictionary());
  for (auto [from, to] : llvm::zip(grad->getResults(), fused->getResults()))
    from.replaceAllUsesWith(to);
  if (keep)
    reluGrad.getResult().replaceAllUsesWith(fused.getKeptGrad());
  grad->erase();
  reluGrad->erase();
  if (add)
    add->erase();
}

struct FuseBatchNormEpilogue
    : ampc::impl::FuseBatchNormEpiloguePassBase<FuseBatchNormEpilogue> {
  using FuseBatchNormEpiloguePassBase::FuseBatchNormEpiloguePassBase;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<ampc::BatchNormalizationOp> norms;
    SmallVector<ampc::BatchNormGradOp> grads;
    for (Operation &op : func.getBody().front()) {
      if (auto norm = dyn_cast<ampc::BatchNormalizationOp>(op))
        norms.push_back(norm);
      if (auto grad = dyn_cast<ampc::BatchNormGradOp>(op))
        grads.push_back(grad);
    }
    for (ampc::BatchNormalizationOp norm : norms)
      fuse(norm);
    if (backward)
      for (ampc::BatchNormGradOp grad : grads)
        fuse(grad);
  }
};

} // namespace
