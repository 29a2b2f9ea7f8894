//===- AssignLaunchGeometry.cpp - launch decisions recorded in the IR -----===//
//
// Records the target's launch decisions on every op that takes some
// (Passes.td, AssignLaunchGeometryPass) as `ampc.launch`, so the memory
// plan and the emitters read one decision instead of each making it
// (issue 40: emitters that only print).
//
//===----------------------------------------------------------------------===//

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Transforms/EnumOption.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace ampc {
#define GEN_PASS_DEF_ASSIGNLAUNCHGEOMETRYPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;
using namespace ampc::emit;

namespace {

/// The decision `key` of launchKeys(op, target) says `op` takes.
Attribute decide(Operation *op, StringRef key, Builder &b) {
  if (key == "images_per_gemm")
    return b.getI64IntegerAttr(cpuConvImagesPerGemm(op));
  if (key == "cudnn")
    return b.getBoolAttr(cudnnConvolves(op));
  if (key == "workspace")
    return b.getI64IntegerAttr(cudnnConvolves(op) ? cudnnWorkspaceBudget(op)
                                                  : 0);
  if (key == "log_prob")
    return b.getBoolAttr(cudaLossReadsLogProb(op));
  if (key == "parallelism")
    return b.getStringAttr(parallelismName(cudaParallelism(op).kind));
  if (key == "partials")
    return b.getI64IntegerAttr(
        cudaClipPartials(cast<ampc::ClipGradNormOp>(op).getGrads()));
  if (key == "groups") {
    LayerNormGeometry g = layerNormGeometry(op);
    return b.getI64IntegerAttr(cudaLayerNormGradGroups(g.outer, g.size));
  }
  bool batchNorm = isa<ampc::BatchNormalizationOp, ampc::BatchNormGradOp>(op);
  if (key == "threads" && batchNorm)
    return b.getI64IntegerAttr(cudaBatchNormThreads(batchNormGeometry(op)));
  if (key == "splits" && batchNorm)
    return b.getI64IntegerAttr(cudaBatchNormSplits(batchNormGeometry(op)));
  if (key == "splits")
    return b.getI64IntegerAttr(
        cudaReduceSplits(tensorOf(op->getResult(0)).getNumElements(),
                         reduceGeometry(op).reducedCount()));
  llvm_unreachable("a launch key without its decision");
}

struct AssignLaunchGeometry
    : ampc::impl::AssignLaunchGeometryPassBase<AssignLaunchGeometry> {
  using Base::Base;
  void runOnOperation() override {
    func::FuncOp func = getOperation();
    if (failed(ampc::checkEnumOption(target, func.getLoc(), getArgument())))
      return signalPassFailure();
    Builder b(&getContext());
    func.walk([&](Operation *op) {
      SmallVector<NamedAttribute> decisions;
      for (StringRef key : launchKeys(op, target))
        decisions.push_back(b.getNamedAttr(key, decide(op, key, b)));
      if (decisions.empty())
        op->removeAttr(ampc::kLaunchAttr);
      else
        op->setAttr(ampc::kLaunchAttr, b.getDictionaryAttr(decisions));
    });
  }
};

} // namespace
