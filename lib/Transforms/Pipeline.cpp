//===- Pipeline.cpp - the ampc compilation pipeline, in one place ---------===//
//
// Every pass ampc runs, in order. Later issues add autodiff, loss scaling,
// the optimizer and lowering here (docs/design.md, Pipeline).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace {
struct PipelineStep {
  llvm::StringRef name;
  std::unique_ptr<Pass> (*create)(const ampc::PipelineOptions &);
};

const PipelineStep kPipeline[] = {
    {"ampc-fold-shapes",
     [](const ampc::PipelineOptions &) { return ampc::createFoldShapesPass(); }},
    {"ampc-assign-precision",
     [](const ampc::PipelineOptions &o) {
       return ampc::createAssignPrecisionPass(o.precision);
     }},
    {"ampc-optimize-casts",
     [](const ampc::PipelineOptions &) {
       return ampc::createOptimizeCastsPass();
     }},
};
} // namespace

llvm::ArrayRef<llvm::StringRef> ampc::pipelinePassNames() {
  static const llvm::SmallVector<llvm::StringRef> names = [] {
    llvm::SmallVector<llvm::StringRef> n;
    for (const PipelineStep &step : kPipeline)
      n.push_back(step.name);
    return n;
  }();
  return names;
}

LogicalResult ampc::buildPipeline(OpPassManager &pm,
                                  const PipelineOptions &options,
                                  std::string &error) {
  if (!options.stopAfter.empty() &&
      !llvm::is_contained(pipelinePassNames(), options.stopAfter)) {
    error = "--emit-after: '" + options.stopAfter +
            "' is not a pass of the pipeline (" +
            llvm::join(pipelinePassNames(), ", ") + ")";
    return failure();
  }
  for (const PipelineStep &step : kPipeline) {
    pm.addPass(step.create(options));
    if (step.name == options.stopAfter)
      break;
  }
  return success();
}

void ampc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<ampc::AMPCDialect, func::FuncDialect>();
}
