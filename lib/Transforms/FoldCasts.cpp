//===- FoldCasts.cpp - no kernel that only casts -------------------------===//
//
// Issue 37, item 6. ampc-fuse folds a cast into its elementwise neighbours
// only when the cast has one elementwise user group and its elementwise
// producer has no other user; otherwise the cast stays a kernel of its own
// that only converts. This pass, run right before ampc-fuse, gives each
// such cast a place in a fused kernel (Passes.td, FoldCastsPass):
//
// - a cast whose users are all elementwise ops of its shape becomes one
//   cast per user, so each user converts in registers;
// - a cast whose producer is an elementwise chain that other ops read too
//   takes its own copy of that chain, so the chain and the cast are one
//   kernel and the original chain is left to its other users.
//
// Both only duplicate elementwise work; every copy computes the original
// ops on the original operands, so every target computes the same bits.
//
// Five casts sit where no elementwise neighbour exists: the FP32 Y of a
// LayerNorm rounded to 16 bits for the next GEMM, the FP32 gradient of the
// scores that nll_loss_grad with log_prob (SoftmaxCrossEntropyLoss's
// adjoint) writes, rounded likewise, a GEMM's 16-bit dY widened for
// layer_norm_grad, a 16-bit weight gradient (a convolution's, which cuDNN
// writes in its operands' type) widened for the loss scaler's unscale, and
// 16-bit logits widened for the cross-entropy. These fold into the ops
// (their types allow it, ampc::isSixteenBitOfF32): Y and the gradient are
// written in the cast's type (rounded once from the FP32 value the kernel
// computes, as the cast rounded it); dY, the weight gradient and the
// logits are read in their producer's type and widened exactly on load.
//
//===----------------------------------------------------------------------===//

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Fusible.h"
#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"
#include "ampc/Transforms/Precision.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace ampc {
#define GEN_PASS_DEF_FOLDCASTSPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {

using ampc::isFusible;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

/// One cast per elementwise user. Returns true when it split the cast.
bool splitPerUser(ampc::CastOp cast) {
  if (cast->hasOneUse() || cast.use_empty())
    return false;
  if (!llvm::all_of(cast->getUsers(), [&](Operation *user) {
        return isFusible(user) && user->getBlock() == cast->getBlock() &&
               shapeOf(user->getResult(0)) == shapeOf(cast.getOutput());
      }))
    return false;
  for (OpOperand &use : llvm::make_early_inc_range(cast->getUses())) {
    OpBuilder b(use.getOwner());
    use.set(b.clone(*cast)->getResult(0));
  }
  cast.erase();
  return true;
}

/// The elementwise chain of the cast's shape that produces `cast`'s input,
/// in program order; empty when the producer is not elementwise, has no
/// other user (ampc-fuse takes it then), or the chain is too large.
SmallVector<Operation *> producerChain(ampc::CastOp cast) {
  Operation *producer = cast.getInput().getDefiningOp();
  if (!isFusible(producer) || producer->getBlock() != cast->getBlock() ||
      producer->getResult(0).hasOneUse() ||
      shapeOf(producer->getResult(0)) != shapeOf(cast.getOutput()))
    return {};
  llvm::SetVector<Operation *> chain;
  chain.insert(producer);
  for (size_t i = 0; i < chain.size(); ++i) {
    if (chain.size() > ampc::kMaxCopiedOps || ampc::storedBetween(chain[i], cast))
      return {};
    for (Value operand : chain[i]->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (isFusible(def) && def->getBlock() == cast->getBlock() &&
          shapeOf(operand) == shapeOf(cast.getOutput()))
        chain.insert(def);
    }
  }
  return ampc::inProgramOrder(chain.getArrayRef());
}

/// Gives the cast its own copy of its producer's elementwise chain.
bool copyProducer(ampc::CastOp cast) {
  SmallVector<Operation *> chain = producerChain(cast);
  if (chain.empty())
    return false;
  OpBuilder b(cast);
  IRMapping mapping;
  for (Operation *op : chain)
    b.clone(*op, mapping);
  cast.getInputMutable().assign(mapping.lookup(cast.getInput()));
  return true;
}

/// A LayerNorm whose FP32 Y only `cast` reads (to 16 bits) writes Y in the
/// cast's type; likewise nll_loss_grad with log_prob and its result. Only
/// where they compute in FP32: rounding an FP64 value to 16 bits directly
/// would skip the FP32 rounding the cast saw. Returns true when it erased
/// the cast.
bool foldIntoWriter(ampc::CastOp cast) {
  Value written = cast.getInput();
  Operation *writer = written.getDefiningOp();
  auto norm = dyn_cast_or_null<ampc::LayerNormalizationOp>(writer);
  auto lossGrad = dyn_cast_or_null<ampc::NllLossGradOp>(writer);
  if (!(norm && written == norm.getOutput()) &&
      !(lossGrad && lossGrad.getLogProb()))
    return false;
  if (!written.hasOneUse() || ampc::accumulatesInF64(writer) ||
      !ampc::isSixteenBitOfF32(written.getType(), cast.getOutput().getType()))
    return false;
  written.setType(cast.getOutput().getType());
  cast.getOutput().replaceAllUsesWith(written);
  cast.erase();
  return true;
}

/// Each layer_norm_grad reading `cast`'s widened 16-bit values as dY, each
/// unscale reading them as a gradient and each SoftmaxCrossEntropyLoss
/// reading them as scores (its results stay FP32), reads them unwidened.
/// Returns true when it erased the cast (no user left).
bool foldIntoWideningReaders(ampc::CastOp cast) {
  if (!ampc::isSixteenBitOfF32(cast.getOutput().getType(),
                               cast.getInput().getType()))
    return false;
  for (OpOperand &use : llvm::make_early_inc_range(cast->getUses()))
    if (auto grad = dyn_cast<ampc::LayerNormGradOp>(use.getOwner());
        (grad && &use == &grad.getGradMutable()) ||
        (isa<ampc::UnscaleOp>(use.getOwner()) && use.getOperandNumber() > 0) ||
        (isa<ampc::SoftmaxCrossEntropyLossOp>(use.getOwner()) &&
         use.getOperandNumber() == 0))
      use.set(cast.getInput());
  if (!cast.use_empty())
    return false;
  cast.erase();
  return true;
}

struct FoldCasts : ampc::impl::FoldCastsPassBase<FoldCasts> {
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (func.isExternal())
      return;
    SmallVector<ampc::CastOp> casts;
    func.walk([&](ampc::CastOp cast) {
      if (isa<func::FuncOp>(cast->getParentOp()))
        casts.push_back(cast);
    });
    for (ampc::CastOp cast : casts)
      if (!foldIntoWriter(cast) && !foldIntoWideningReaders(cast) &&
          !splitPerUser(cast))
        copyProducer(cast);
  }
};

} // namespace
