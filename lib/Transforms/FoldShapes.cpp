//===- FoldShapes.cpp - fold shape subgraphs to constants -----------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace ampc {
#define GEN_PASS_DEF_FOLDSHAPESPASS
#include "ampc/Transforms/Passes.h.inc"
} // namespace ampc

using namespace mlir;

namespace {
struct FoldShapesPass : ampc::impl::FoldShapesPassBase<FoldShapesPass> {
  using Base::Base;

  void runOnOperation() override {
    // The op folders (lib/Dialect/ConstantFolding.cpp) hold the rules; the
    // greedy driver applies them to a fixed point and erases dead pure ops.
    RewritePatternSet patterns(&getContext());
    GreedyRewriteConfig config;
    config.enableConstantCSE(true);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns),
                                     config)))
      signalPassFailure();
  }
};
} // namespace
