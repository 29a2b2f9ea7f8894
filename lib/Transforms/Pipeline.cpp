//===- Pipeline.cpp - the ampc compilation pipeline, in one place ---------===//
//
// Every pass ampc runs, in order: the graph part (shapes, loss, precision,
// autodiff, loss scaling, the optimizer), then the
// kernel-level form the target emitters consume (docs/design.md,
// Pipeline). The training passes run only when the pipeline builds a
// training step.
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/MemoryPlan.h"
#include "ampc/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
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
    // First: the compositions the importer imports 1:1 (ampc.einsum) become
    // the ops the rest of the pipeline sees (docs/design.md, "Compositions
    // imported 1:1").
    {"ampc-decompose-einsum", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createDecomposeEinsumPass({o.maxTensorBytes});
     }},
    // ampc.resize (Resize, Upsample): gathers and weighted sums per axis.
    {"ampc-decompose-resize", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createDecomposeResizePass({o.maxTensorBytes});
     }},
    {"ampc-decompose-quantization", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createDecomposeQuantizationPass({o.maxTensorBytes});
     }},
    // The indexing ops imported 1:1 (ampc.gather_elements, ...).
    {"ampc-decompose-indexing", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createDecomposeIndexingPass({o.maxTensorBytes});
     }},
    {"ampc-fold-shapes", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.foldShapes)
         return nullptr;
       return ampc::createFoldShapesPass();
     }},
    {"ampc-attach-loss", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       // The pipeline decides whether a partial last batch trains.
       ampc::AttachLossPassOptions loss = o.loss;
       loss.partialBatches = true;
       return ampc::createAttachLossPass(loss);
     }},
    {"ampc-widen-to-f64", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.widenToF64)
         return nullptr;
       return ampc::createWidenToF64Pass();
     }},
    // Before the attention fusion, which fuses a frozen mask (a registered
    // buffer) as the causal flag but no mask that trains.
    {"ampc-freeze-parameters", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.freeze.freeze.empty() && o.freeze.trainable.empty())
         return nullptr;
       return ampc::createFreezeParametersPass(o.freeze);
     }},
    {"ampc-fuse-attention", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.fuseAttention)
         return nullptr;
       return ampc::createFuseAttentionPass(
           {o.attentionAsCuda ? ampc::KernelTarget::Cuda : o.kernelTarget,
            o.training,
            /*lowPrecision=*/o.precision.dtype != ampc::LowPrecisionType::F32 &&
                !o.widenToF64});
     }},
    {"ampc-assign-precision", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       return ampc::createAssignPrecisionPass(o.precision);
     }},
    // Reads the BF16 decisions; before ampc-pad-gemms, so that the
    // dimensions it judges are the model's (docs/precision.md, FP8).
    {"ampc-assign-fp8", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.fp8)
         return nullptr;
       return ampc::createAssignFp8Pass(o.fp8Options);
     }},
    // Reads the casts precision assignment inserted; before autodiff, so
    // that @train_step, a copy of @forward, takes the same inputs.
    {"ampc-input-precision", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.narrowInputs)
         return nullptr;
       return ampc::createInputPrecisionPass();
     }},
    // After precision assignment (the padding is for FP16/BF16 GEMMs) and
    // before autodiff, so that the backward GEMMs are derived from the
    // padded forward (docs/design.md, Tensor Core shapes).
    {"ampc-pad-gemms", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.padGemms)
         return nullptr;
       return ampc::createPadGemmsPass({o.padGemmsMinN});
     }},
    // After precision assignment (the transposes move 16-bit images) and
    // before autodiff, which derives the channels-last backward.
    {"ampc-channels-last", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.channelsLast)
         return nullptr;
       return ampc::createChannelsLastPass();
     }},
    // After ampc-channels-last (it pads the channels-last tensors' last
    // axis) and before autodiff, which derives the padded backward.
    {"ampc-pad-channels", PipelinePart::Graph, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.channelsLast || !o.padChannels)
         return nullptr;
       return ampc::createPadChannelsPass();
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
    {"ampc-accumulate-gradients", PipelinePart::Graph, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.accumulation.microBatches == 1)
         return nullptr;
       return ampc::createAccumulateGradientsPass(o.accumulation);
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
    // The kernel-level form both targets emit from. The dialect's folders
    // first (they compute as the targets round, docs/design.md): constants
    // the training passes repeat become one, what autodiff left dead goes.
    // Not CSE: it would merge Dropouts whose masks differ only by their
    // location's seed.
    {"canonicalize", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return mlir::createCanonicalizerPass();
     }},
    {"ampc-fuse-layer-norm-grad", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (o.kernelTarget != ampc::KernelTarget::Cuda)
         return nullptr;
       return ampc::createFuseLayerNormGradPass();
     }},
    {"ampc-fuse-epilogues", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) {
       // FP32 weight and bias gradients on every target: they change the
       // numbers (GradScaler's overflow skips), so the CPU reference takes
       // them too (Passes.td).
       return ampc::createFuseEpiloguesPass(
           {/*backward=*/o.kernelTarget == ampc::KernelTarget::Cuda,
            /*fp32WeightGradients=*/true});
     }},
    {"ampc-fold-transposes", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createFoldTransposesPass();
     }},
    {"ampc-pack-qkv", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       // It packs the GEMMs ampc-fuse-epilogues gave bias-gradient
       // epilogues (the CUDA target's); the CPU reference keeps the
       // separate ops, as it keeps the bias-gradient sums.
       if (o.kernelTarget != ampc::KernelTarget::Cuda)
         return nullptr;
       return ampc::createPackQkvPass();
     }},
    {"ampc-fold-casts", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createFoldCastsPass();
     }},
    {"ampc-fuse-residual-layer-norm", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createFuseResidualLayerNormPass();
     }},
    {"ampc-fuse-batch-norm-epilogue", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) {
       // The adjoint's prologue on the CUDA target only (Passes.td).
       return ampc::createFuseBatchNormEpiloguePass(
           {/*backward=*/o.kernelTarget == ampc::KernelTarget::Cuda});
     }},
    {"ampc-fuse", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) { return ampc::createFusePass(); }},
    {"ampc-fuse-horizontal", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createFuseHorizontalPass();
     }},
    {"ampc-assign-accumulation", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createAssignAccumulationPass();
     }},
    // MatMul's batches and 1-D operands as a batched_gemm's layout, so the
    // emitters print GEMMs only.
    {"ampc-lower-matmul", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createLowerMatMulPass();
     }},
    // Every GEMM as the kernels run it, forward and backward.
    // Data parallel (issue 41): after the fusions, so each bucket's start
    // follows the kernel that computes its last gradient.
    {"ampc-insert-all-reduce", PipelinePart::Kernel, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.dataParallel)
         return nullptr;
       return ampc::createInsertAllReducePass(o.allReduce);
     }},
    // --sync-batchnorm: after the buckets, whose request numbers its
    // all-reduces follow.
    {"ampc-sync-batch-norm", PipelinePart::Kernel, true,
     [](const ampc::PipelineOptions &o) -> std::unique_ptr<Pass> {
       if (!o.dataParallel || !o.syncBatchNorm)
         return nullptr;
       return ampc::createSyncBatchNormPass();
     }},
    {"ampc-gemm-alignment", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createGemmAlignmentPass();
     }},
    // After the accumulation types (cuDNN's choice reads them), before the
    // plan, which sizes scratch from the decisions.
    {"ampc-assign-launch-geometry", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) {
       return ampc::createAssignLaunchGeometryPass({o.kernelTarget});
     }},
    {"ampc-plan-memory", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &o) {
       bool cuda = o.kernelTarget == ampc::KernelTarget::Cuda;
       return ampc::createPlanMemoryPass(
           {o.maxTensorBytes, o.kernelTarget, /*stageInputs=*/cuda,
            /*guardBytes=*/cuda ? ampc::kCudaGuardBytes : 0});
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

llvm::ArrayRef<llvm::StringRef> ampc::pipelineSkippable() {
  static const llvm::StringRef names[] = {
      "ampc-pack-qkv", "ampc-fold-casts", "ampc-fuse-residual-layer-norm",
      "ampc-fuse-batch-norm-epilogue", "ampc-fuse", "ampc-fuse-horizontal"};
  return names;
}

bool ampc::buildPipeline(OpPassManager &pm, const PipelineOptions &options,
                         PipelinePart part, std::string &error) {
  for (const std::string &skip : options.skipPasses)
    if (!llvm::is_contained(pipelineSkippable(), skip)) {
      error = "--skip-pass: '" + skip + "' is not a pass that can be left " +
              "out (" + llvm::join(pipelineSkippable(), ", ") + ")";
      return false;
    }
  if (!options.stopAfter.empty() &&
      !llvm::is_contained(pipelinePassNames(), options.stopAfter)) {
    error = "--emit-after: '" + options.stopAfter +
            "' is not a pass of the pipeline (" +
            llvm::join(pipelinePassNames(), ", ") + ")";
    return false;
  }
  for (const PipelineStep &step : kPipeline) {
    if (step.trainingOnly && !options.training) {
      if (step.name == options.stopAfter) {
        error = "--emit-after: '" + options.stopAfter +
                "' runs only when training (--mode=train)";
        return false;
      }
      continue;
    }
    bool skipped = llvm::is_contained(options.skipPasses, step.name);
    if ((part == PipelinePart::All || step.part == part) && !skipped)
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
  return true;
}

void ampc::registerAllDialects(DialectRegistry &registry) {
  registry.insert<ampc::AMPCDialect, func::FuncDialect>();
}
