//===- Pipeline.cpp - the ampc compilation pipeline, in one place ---------===//
//
// Every pass ampc runs, in order: the graph part (shapes, loss, precision,
// autodiff, loss scaling, the optimizer), then the
// kernel-level form the target emitters consume (docs/design.md,
// Pipeline). The training passes run only when the pipeline builds a
// training step.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;

namespace {
struct PipelineStep {
  llvm::StringRef name;
  ampc::PipelinePart part;
  /// Runs only when the pipeline builds a training step.
  bool trainingOnly;
  /// The pass, or null when the options leave this step out.
  std::unique_ptr<Pass> (*create)(const ampc::PipelineOptions &);
};

using ampc::PipelinePart;

const PipelineStep kPipeline[] = {
    {"ampc-fold-shapes", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.foldShapes)
         return nullptr;
       return ampc::createFoldShapesPass();
     }},
    {"ampc-attach-loss", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createAttachLossPass(o.loss);
     }},
    {"ampc-widen-to-f64", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.widenToF64)
         return nullptr;
       return ampc::createWidenToF64Pass();
     }},
    {"ampc-assign-precision", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createAssignPrecisionPass(o.precision);
     }},
    {"ampc-autodiff", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &) -> std::unique_ptr<Pass> {
       return ampc::createAutodiffPass();
     }},
    {"ampc-eval-forward", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.evalForward)
         return nullptr;
       return ampc::createEvalForwardPass();
     }},
    {"ampc-insert-loss-scaling", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.lossScaling.mode == ampc::LossScalingMode::None)
         return nullptr;
       return ampc::createInsertLossScalingPass(o.lossScaling);
     }},
    {"ampc-attach-optimizer", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.optimizer.kind == ampc::OptimizerKind::None)
         return nullptr;
       return ampc::createAttachOptimizerPass(o.optimizer);
     }},
    {"ampc-running-statistics", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.optimizer.kind == ampc::OptimizerKind::None)
         return nullptr;
       return ampc::createRunningStatisticsPass();
     }},
    {"ampc-optimize-casts", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createOptimizeCastsPass();
     }},
    // The kernel-level form both targets emit from.
    {"ampc-fuse", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) { return ampc::createFusePass(); }},
    {"ampc-plan-memory", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) {
       return ampc::createPlanMemoryPass({o.maxTensorBytes});
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

bool ampc::pipelineStopsBefore(PipelinePart part,
                               const PipelineOptions &options) {
  if (options.stopAfter.empty())
    return false;
  for (const PipelineStep &step : kPipeline) {
    if (step.part == part)
      return false;
    if (step.name == options.stopAfter)
      return true;
  }
  return false;
}

LogicalResult ampc::buildPipeline(OpPassManager &pm,
                                  const PipelineOptions &options,
                                  PipelinePart part, std::string &error) {
  if (!options.stopAfter.empty() &&
      !llvm::is_contained(pipelinePassNames(), options.stopAfter)) {
    error = "--emit-after: '" + options.stopAfter +
            "' is not a pass of the pipeline (" +
            llvm::join(pipelinePassNames(), ", ") + ")";
    return failure();
  }
  for (const PipelineStep &step : kPipeline) {
    if (step.trainingOnly && !options.training) {
      if (step.name == options.stopAfter) {
        error = "--emit-after: '" + options.stopAfter +
                "' runs only when training (--mode=train)";
        return failure();
      }
      continue;
    }
    if (part == PipelinePart::All || step.part == part)
      if (std::unique_ptr<Pass> pass = step.create(options)) {
        // A pass declared on functions runs on each function (in parallel
        // where the context allows); the others see the whole module.
        if (pass->getOpName() == func::FuncOp::getOperationName())
          pm.addNestedPass<func::FuncOp>(std::move(pass));
        else
          pm.addPass(std::move(pass));
      }
    if (step.name == options.stopAfter)
      break;
  }
  return success();
}

void ampc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<ampc::AMPCDialect, func::FuncDialect>();
}
