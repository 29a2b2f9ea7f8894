//===- EvalForward.cpp - @forward becomes the eval-mode model -------------===//
//
// Inference and evaluation run @forward; PyTorch runs them in eval mode.
// Dropout becomes the identity (also a fused attention's) and
// BatchNormalization normalises with its running statistics. @train_step (a copy made by ampc-autodiff before this
// pass) keeps the training-mode ops.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace ampc {
#define GEN_PASS_DEF_EVALFORWARDPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {
struct EvalForwardPass : ampc::impl::EvalForwardPassBase<EvalForwardPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp forward = getOperation();
    if (forward.getSymName() != "forward")
      return;
    Builder b(&getContext());
    IntegerAttr eval = b.getI64IntegerAttr(0);
    forward.walk([&](Operation *op) {
      if (auto bn = dyn_cast<ampc::BatchNormalizationOp>(op))
        bn.setTrainingModeAttr(eval);
      else if (auto dropout = dyn_cast<ampc::DropoutOp>(op))
        dropout.setTrainingModeAttr(eval);
      else if (auto attention = dyn_cast<ampc::AttentionOp>(op))
        attention.setDropoutRatioAttr(b.getF32FloatAttr(0.0f));
    });
  }
};
} // namespace
