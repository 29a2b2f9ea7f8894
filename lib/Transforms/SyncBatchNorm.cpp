//===- SyncBatchNorm.cpp - BatchNorm statistics over the ranks ------------===//
//
// ampc-sync-batch-norm (issue 41, `--sync-batchnorm`; docs/distributed.md
// "Synchronised BatchNorm"): in a data-parallel step, every training-mode
// BatchNorm and BatchNorm adjoint gets `ampc.sync_request`, the number of
// the communicator request its all-reduce uses. The numbers follow the
// buckets' (ampc-insert-all-reduce numbers them from 0), one per op in
// the step's order, so every rank starts the same requests in the same
// order. What the all-reduces carry, and how every rank gets the same
// bits from them, is the targets' (the CPU target: CpuWindow.cpp).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/Training.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace ampc {
#define GEN_PASS_DEF_SYNCBATCHNORMPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

bool ampc::synchronisesBatchNorm(Operation *op) {
  if (auto bn = dyn_cast<BatchNormalizationOp>(op))
    return bn.getTrainingMode() != 0;
  if (auto grad = dyn_cast<BatchNormGradOp>(op))
    return grad.getTrainingMode() != 0;
  return false;
}

std::vector<std::string> ampc::synchronisedBatchNorms(ModuleOp module) {
  std::vector<std::string> lines;
  auto step = module.lookupSymbol<func::FuncOp>(kTrainStep);
  if (!step)
    return lines;
  step.walk([&](BatchNormalizationOp op) {
    if (synchronisesBatchNorm(op))
      lines.push_back(nodeDescription(op) +
                      ": batch statistics and backward sums over all ranks' "
                      "rows (--sync-batchnorm)");
  });
  return lines;
}

namespace {

struct SyncBatchNormPass
    : ampc::impl::SyncBatchNormPassBase<SyncBatchNormPass> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp func = getOperation();
    // Only a data-parallel step communicates; its buckets come first.
    int64_t next = -1;
    func.walk([&](ampc::AllReduceStartOp start) {
      next = std::max<int64_t>(next, start.getBucket());
    });
    if (next < 0)
      return;
    ++next;
    Builder b(func.getContext());
    func.walk([&](Operation *op) {
      if (ampc::synchronisesBatchNorm(op))
        op->setAttr(ampc::kSyncRequestAttr, b.getI64IntegerAttr(next++));
    });
  }
};

} // namespace
