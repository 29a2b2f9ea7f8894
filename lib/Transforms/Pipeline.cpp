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
#include "ampc/Transforms/PipelineFlags.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

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
    {"ampc-gemm-alignment", PipelinePart::Kernel, false,
     [](const ampc::PipelineOptions &) {
       return ampc::createGemmAlignmentPass();
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

/// `v` as %g prints it (1e+39, not 1000000000000000000000000000000000000000).
static std::string shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

bool ampc::pipelineOptionsFromFlags(const PipelineFlags &flags,
                                    PipelineOptions &options,
                                    StringRef flagPrefix, std::string &error) {
  auto fail = [&](const Twine &flag, const Twine &message) {
    error = (flagPrefix + flag + " " + message).str();
    return false;
  };
  // Every float flag ends up an f32 in the library (an attribute, a
  // constant, a state scalar): a double beyond f32's range would be stored
  // as inf, a tiny nonzero one as 0. NaN and inf go on to the passes,
  // which refuse them by name.
  auto fitsF32 = [&](const char *flag, double value) {
    float stored = static_cast<float>(value);
    if (std::isfinite(value) && std::isinf(stored))
      return fail(flag, "value " + shortest(value) +
                            " is beyond f32, the type the library keeps it "
                            "in (largest 3.4028235e38)");
    if (value != 0 && stored == 0)
      return fail(flag, "value " + shortest(value) +
                            " rounds to 0 in f32, the type the library "
                            "keeps it in (smallest 1.4e-45)");
    return true;
  };
  for (auto [flag, value] : std::initializer_list<std::pair<const char *, double>>{
           {"lr", flags.lr},
           {"momentum", flags.momentum},
           {"dampening", flags.dampening},
           {"weight-decay", flags.weightDecay.value_or(0)},
           {"beta1", flags.beta1},
           {"beta2", flags.beta2},
           {"eps", flags.eps},
           {"clip-grad-norm", flags.clipGradNorm},
           {"init-scale", flags.initScale},
           {"growth-factor", flags.growthFactor},
           {"backoff-factor", flags.backoffFactor},
           {"min-scale", flags.minScale},
           {"max-scale", flags.maxScale},
           {"label-smoothing", flags.labelSmoothing.value_or(0)},
           {"huber-delta", flags.huberDelta.value_or(1)},
           {"smooth-l1-beta", flags.smoothL1Beta.value_or(1)}})
    if (!fitsF32(flag, value))
      return false;
  for (double w : flags.classWeights)
    if (!fitsF32("class-weights", w))
      return false;
  for (double w : flags.posWeight)
    if (!fitsF32("pos-weight", w))
      return false;
  options.stopAfter = flags.stopAfter;
  options.skipPasses = flags.skipPasses;
  // cuda-sim writes the CUDA kernels.
  std::optional<KernelTarget> kernels =
      llvm::StringSwitch<std::optional<KernelTarget>>(flags.target)
          .Case("cpu", KernelTarget::Cpu)
          .Cases({"cuda", "cuda-sim"}, KernelTarget::Cuda)
          .Default(std::nullopt);
  if (!kernels)
    return fail("target",
                "must be cpu, cuda or cuda-sim, got '" + flags.target + "'");
  options.kernelTarget = *kernels;
  if (flags.padGemms != "on" && flags.padGemms != "off" &&
      flags.padGemms != "auto")
    return fail("pad-gemms",
                "must be on, off or auto, got '" + flags.padGemms + "'");
  options.padGemms = flags.padGemms == "on" ||
                     (flags.padGemms == "auto" && *kernels == KernelTarget::Cuda);
  // auto leaves small heads alone: their pad and slice copies would cost
  // more launches than the unaligned GEMM costs (docs/design.md).
  options.padGemmsMinN = flags.padGemms == "auto" ? 128 : 0;
  if (flags.channelsLast != "on" && flags.channelsLast != "off" &&
      flags.channelsLast != "auto")
    return fail("channels-last",
                "must be on, off or auto, got '" + flags.channelsLast + "'");
  options.channelsLast =
      flags.channelsLast == "on" ||
      (flags.channelsLast == "auto" && *kernels == KernelTarget::Cuda);
  std::optional<LowPrecisionType> dtype =
      llvm::StringSwitch<std::optional<LowPrecisionType>>(flags.precision)
          .Case("fp16", LowPrecisionType::F16)
          .Case("bf16", LowPrecisionType::BF16)
          .Cases({"fp32", "fp64"}, LowPrecisionType::F32)
          .Default(std::nullopt);
  if (!dtype)
    return fail("precision", "must be fp16, bf16, fp32 or fp64, got '" +
                                 flags.precision + "'");
  options.precision.dtype = *dtype;
  if (flags.inputPrecision != "fp32" && flags.inputPrecision != "auto")
    return fail("input-precision", "must be fp32 or auto, got '" +
                                       flags.inputPrecision + "'");
  options.narrowInputs = flags.inputPrecision == "auto";
  options.widenToF64 = flags.precision == "fp64";
  std::optional<Propagation> propagation =
      symbolizeEnum<Propagation>(flags.propagation);
  if (!propagation)
    return fail("propagation", "must be " + enumChoices<Propagation>() +
                                   ", got '" + flags.propagation + "'");
  options.precision.propagation = *propagation;
  options.precision.keepFp32.assign(flags.keepFp32.begin(),
                                    flags.keepFp32.end());
  options.precision.forceLowp.assign(flags.forceLowp.begin(),
                                     flags.forceLowp.end());
  options.precision.rulesFile = flags.ampRules;
  if (!flags.training && (!flags.freeze.empty() || !flags.trainable.empty()))
    return fail(flags.freeze.empty() ? "trainable" : "freeze",
                "decides what trains: it needs --mode=train");
  options.freeze.freeze.assign(flags.freeze.begin(), flags.freeze.end());
  options.freeze.trainable.assign(flags.trainable.begin(),
                                  flags.trainable.end());
  options.training = flags.training;
  options.evalForward = !flags.inferTrainingMode;
  if (!llvm::is_contained({"on", "true", "off", "false", "cuda"},
                          flags.fuseAttention))
    return fail("fuse-attention", "must be on, off or cuda, got '" +
                                      flags.fuseAttention + "'");
  options.fuseAttention =
      flags.fuseAttention != "off" && flags.fuseAttention != "false";
  options.attentionAsCuda = flags.fuseAttention == "cuda";
  std::optional<LossFunction> loss = symbolizeEnum<LossFunction>(flags.loss);
  if (!loss)
    return fail("loss", "must be " + enumChoices<LossFunction>() + ", got '" +
                            flags.loss + "'");
  options.loss.loss = *loss;
  options.loss.label = flags.label;
  // The pass checks which options apply to which loss and their values
  // against the model; here only what a pass option cannot carry.
  if (flags.ignoreIndex) {
    if (*flags.ignoreIndex == INT64_MIN)
      return fail("ignore-index", "must be greater than " + Twine(INT64_MIN));
    options.loss.ignoreIndex = *flags.ignoreIndex;
  }
  options.loss.labelSmoothing = flags.labelSmoothing.value_or(0.0);
  options.loss.classWeights.assign(flags.classWeights.begin(),
                                   flags.classWeights.end());
  options.loss.softTargets = flags.softTargets;
  options.loss.posWeight.assign(flags.posWeight.begin(), flags.posWeight.end());
  options.loss.huberDelta = flags.huberDelta.value_or(1.0);
  options.loss.smoothL1Beta = flags.smoothL1Beta.value_or(1.0);
  std::optional<OptimizerKind> optimizer =
      symbolizeEnum<OptimizerKind>(flags.optimizer);
  if (!optimizer)
    return fail("optimizer", "must be " + enumChoices<OptimizerKind>() +
                                 ", got '" + flags.optimizer + "'");
  options.optimizer.kind = *optimizer;
  options.optimizer.lr = flags.lr;
  options.optimizer.momentum = flags.momentum;
  options.optimizer.dampening = flags.dampening;
  options.optimizer.nesterov = flags.nesterov;
  // Negative means "the optimizer's default" to the pass; a user's
  // negative or NaN value is a mistake.
  if (flags.weightDecay &&
      !(*flags.weightDecay >= 0 && std::isfinite(*flags.weightDecay)))
    return fail("weight-decay", "must be finite and >= 0, got " +
                                    std::to_string(*flags.weightDecay));
  options.optimizer.weightDecay = flags.weightDecay.value_or(-1.0);
  options.optimizer.beta1 = flags.beta1;
  options.optimizer.beta2 = flags.beta2;
  options.optimizer.eps = flags.eps;
  options.optimizer.clipGradNorm = flags.clipGradNorm;
  // The pass's list is comma separated: a group's settings go with ';'.
  options.optimizer.paramGroups.clear();
  for (const std::string &group : flags.paramGroups) {
    size_t colon = group.rfind(':');
    if (colon == std::string::npos || colon == 0 ||
        colon + 1 == group.size())
      return fail("param-group", "'" + group +
                                     "' must be GLOB:lr=X,weight_decay=Y");
    std::string settings = group.substr(colon + 1);
    std::replace(settings.begin(), settings.end(), ',', ';');
    options.optimizer.paramGroups.push_back(group.substr(0, colon + 1) +
                                            settings);
  }
  if (!flags.paramGroups.empty() && *optimizer == OptimizerKind::None)
    return fail("param-group", "needs an optimizer, got --optimizer=none");
  if (flags.accumulate < 1)
    return fail("accumulate",
                "must be at least 1, got " + Twine(flags.accumulate));
  if (flags.accumulate > 1 && *optimizer == OptimizerKind::None)
    return fail("accumulate", "needs an optimizer (the library accumulates "
                              "for its own optimizer step), got "
                              "--optimizer=none");
  options.accumulation.microBatches = flags.accumulate;
  // GradScaler's defaults; fp16 needs scaling, bf16 and wider do not.
  LossScalingMode scaling = flags.precision == "fp16" ? LossScalingMode::Dynamic
                                                      : LossScalingMode::None;
  options.lossScaling.initScale = flags.initScale;
  if (flags.lossScale == "dynamic") {
    scaling = LossScalingMode::Dynamic;
  } else if (flags.lossScale == "none") {
    scaling = LossScalingMode::None;
  } else if (!flags.lossScale.empty()) {
    double fixed = 0;
    if (StringRef(flags.lossScale).getAsDouble(fixed) || !(fixed > 0) ||
        !std::isfinite(fixed))
      return fail("loss-scale",
                  "must be dynamic, none or a positive number, got '" +
                      flags.lossScale + "'");
    if (!fitsF32("loss-scale", fixed))
      return false;
    options.lossScaling.initScale = fixed;
    scaling = LossScalingMode::Static;
  }
  options.lossScaling.mode = scaling;
  options.lossScaling.growthFactor = flags.growthFactor;
  options.lossScaling.backoffFactor = flags.backoffFactor;
  options.lossScaling.growthInterval = flags.growthInterval;
  options.lossScaling.minScale = flags.minScale;
  options.lossScaling.maxScale = flags.maxScale;
  if (flags.maxTensorBytes < 1 || flags.maxTensorBytes > kMaxTensorBytes)
    return fail("max-tensor-bytes", "must be between 1 and 2^48 (" +
                                        Twine(kMaxTensorBytes) + "), got " +
                                        Twine(flags.maxTensorBytes));
  options.maxTensorBytes = flags.maxTensorBytes;
  return true;
}

namespace {
/// The options of `--ampc-pipeline`: the fields of ampc::PipelineFlags,
/// named as the driver's flags.
struct PipelineRegistrationOptions
    : public PassPipelineOptions<PipelineRegistrationOptions> {
  Option<std::string> precision{*this, "precision",
                                llvm::cl::desc("fp16, bf16, fp32 or fp64"),
                                llvm::cl::init("fp16")};
  Option<std::string> mode{*this, "mode", llvm::cl::desc("train or infer"),
                           llvm::cl::init("train")};
  Option<std::string> propagation{*this, "propagation",
                                  llvm::cl::desc("autocast or paint"),
                                  llvm::cl::init("autocast")};
  ListOption<std::string> keepFp32{*this, "keep-fp32",
                                   llvm::cl::desc("op:TYPE or node:NAME")};
  ListOption<std::string> forceLowp{*this, "force-lowp",
                                    llvm::cl::desc("op:TYPE or node:NAME")};
  Option<std::string> ampRules{*this, "amp-rules",
                               llvm::cl::desc("a rules file (JSON)")};
  ListOption<std::string> freeze{
      *this, "freeze", llvm::cl::desc("initializer globs that do not train")};
  ListOption<std::string> trainable{
      *this, "trainable",
      llvm::cl::desc("initializer globs that train (the others do not)")};
  ListOption<std::string> paramGroups{
      *this, "param-group",
      llvm::cl::desc("parameter groups: GLOB:lr=X;weight_decay=Y (';' "
                     "between a group's settings)")};
  Option<std::string> fuseAttention{
      *this, "fuse-attention",
      llvm::cl::desc("recognise softmax attention as one fused op "
                     "(ampc-fuse-attention): on, off, or cuda (only what "
                     "the CUDA kernels take, on either target)"),
      llvm::cl::init("on")};
  ListOption<std::string> skipPass{
      *this, "skip-pass",
      llvm::cl::desc("kernel-level rewrites to leave out (ampc "
                     "--skip-pass)")};
  Option<bool> inferTrainingMode{
      *this, "infer-training-mode",
      llvm::cl::desc("@forward keeps Dropout and BatchNormalization as "
                     "exported"),
      llvm::cl::init(false)};
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("cross_entropy, bce_with_logits, mse, l1, smooth_l1, "
                     "huber or none"),
      llvm::cl::init("cross_entropy")};
  Option<std::string> label{*this, "label",
                            llvm::cl::desc("the label input's name"),
                            llvm::cl::init("label")};
  Option<int64_t> ignoreIndex{*this, "ignore-index",
                              llvm::cl::desc("cross_entropy: ignored class")};
  Option<double> labelSmoothing{*this, "label-smoothing",
                                llvm::cl::desc("cross_entropy: in [0, 1]")};
  ListOption<double> classWeights{*this, "class-weights",
                                  llvm::cl::desc("cross_entropy: per class")};
  Option<bool> softTargets{*this, "soft-targets",
                           llvm::cl::desc("cross_entropy: probability labels"),
                           llvm::cl::init(false)};
  ListOption<double> posWeight{*this, "pos-weight",
                               llvm::cl::desc("bce_with_logits: positives' "
                                              "weight")};
  Option<double> huberDelta{*this, "huber-delta",
                            llvm::cl::desc("huber: delta (default 1)")};
  Option<double> smoothL1Beta{*this, "smooth-l1-beta",
                              llvm::cl::desc("smooth_l1: beta (default 1)")};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd, adam, adamw or none"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("learning rate (default 1e-3)"),
                    llvm::cl::init(1e-3)};
  Option<double> momentum{*this, "momentum",
                          llvm::cl::desc("sgd momentum (default 0)"),
                          llvm::cl::init(0.0)};
  Option<double> dampening{*this, "dampening",
                           llvm::cl::desc("sgd dampening (default 0)"),
                           llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("sgd with Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("weight decay (default: 0.01 for adamw, 0 otherwise)")};
  Option<double> beta1{*this, "beta1",
                       llvm::cl::desc("adam/adamw beta1 (default 0.9)"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2",
                       llvm::cl::desc("adam/adamw beta2 (default 0.999)"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps",
                     llvm::cl::desc("adam/adamw eps (default 1e-8)"),
                     llvm::cl::init(1e-8)};
  Option<int64_t> accumulate{
      *this, "accumulate",
      llvm::cl::desc("micro-batches (calls) per optimizer step (default 1)"),
      llvm::cl::init(1)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("global L2 norm to clip gradients to (default: none)"),
      llvm::cl::init(0.0)};
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("dynamic, none or VALUE (default: dynamic at fp16, "
                     "none otherwise)")};
  Option<double> initScale{
      *this, "init-scale",
      llvm::cl::desc("initial dynamic loss scale (default 65536)"),
      llvm::cl::init(65536.0)};
  Option<double> growthFactor{*this, "growth-factor",
                              llvm::cl::desc("scale growth factor (default 2)"),
                              llvm::cl::init(2.0)};
  Option<double> backoffFactor{
      *this, "backoff-factor",
      llvm::cl::desc("scale backoff factor (default 0.5)"),
      llvm::cl::init(0.5)};
  Option<int64_t> growthInterval{
      *this, "growth-interval",
      llvm::cl::desc("finite steps before the scale grows (default 2000)"),
      llvm::cl::init(2000)};
  Option<double> minScale{
      *this, "min-scale",
      llvm::cl::desc("lower bound of the dynamic scale (default: none)"),
      llvm::cl::init(0.0)};
  Option<double> maxScale{
      *this, "max-scale",
      llvm::cl::desc("upper bound of the dynamic scale (default: none)"),
      llvm::cl::init(0.0)};
  Option<int64_t> maxTensorBytes{
      *this, "max-tensor-bytes",
      llvm::cl::desc("the largest tensor and arena in bytes (default 2^36)"),
      llvm::cl::init(ampc::kDefaultMaxTensorBytes)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("the kernels the memory plan places scratch for: cpu, "
                     "cuda or cuda-sim (default cpu)"),
      llvm::cl::init("cpu")};
  Option<std::string> padGemms{
      *this, "pad-gemms",
      llvm::cl::desc("pad a Linear's output features to Tensor Core "
                     "multiples: on, off or auto (on for cuda, cuda-sim)"),
      llvm::cl::init("auto")};
  Option<std::string> channelsLast{
      *this, "channels-last",
      llvm::cl::desc("store a CNN's images channels-last (N, H, W, C): on, "
                     "off or auto (on for cuda, cuda-sim)"),
      llvm::cl::init("auto")};
  Option<std::string> inputPrecision{
      *this, "input-precision",
      llvm::cl::desc("fp32, or auto: an input every use casts to FP16/BF16 "
                     "is taken in that type (ampc-input-precision)"),
      llvm::cl::init("fp32")};
  Option<std::string> emitAfter{
      *this, "emit-after",
      llvm::cl::desc("the last pass to run (default: all)")};

  ampc::PipelineFlags flags() const {
    ampc::PipelineFlags f;
    f.precision = precision;
    f.training = mode == "train";
    f.propagation = propagation;
    f.keepFp32.assign(keepFp32.begin(), keepFp32.end());
    f.forceLowp.assign(forceLowp.begin(), forceLowp.end());
    f.ampRules = ampRules;
    f.freeze.assign(freeze.begin(), freeze.end());
    f.trainable.assign(trainable.begin(), trainable.end());
    f.paramGroups.assign(paramGroups.begin(), paramGroups.end());
    f.inferTrainingMode = inferTrainingMode;
    f.fuseAttention = fuseAttention;
    f.skipPasses.assign(skipPass.begin(), skipPass.end());
    f.loss = loss;
    f.label = label;
    if (ignoreIndex.hasValue())
      f.ignoreIndex = ignoreIndex;
    if (labelSmoothing.hasValue())
      f.labelSmoothing = labelSmoothing;
    f.classWeights.assign(classWeights.begin(), classWeights.end());
    f.softTargets = softTargets;
    f.posWeight.assign(posWeight.begin(), posWeight.end());
    if (huberDelta.hasValue())
      f.huberDelta = huberDelta;
    if (smoothL1Beta.hasValue())
      f.smoothL1Beta = smoothL1Beta;
    f.optimizer = optimizer;
    f.lr = lr;
    f.momentum = momentum;
    f.dampening = dampening;
    f.nesterov = nesterov;
    if (weightDecay.hasValue())
      f.weightDecay = weightDecay;
    f.beta1 = beta1;
    f.beta2 = beta2;
    f.eps = eps;
    f.clipGradNorm = clipGradNorm;
    f.accumulate = accumulate;
    f.lossScale = lossScale;
    f.initScale = initScale;
    f.growthFactor = growthFactor;
    f.backoffFactor = backoffFactor;
    f.growthInterval = growthInterval;
    f.minScale = minScale;
    f.maxScale = maxScale;
    f.maxTensorBytes = maxTensorBytes;
    f.stopAfter = emitAfter;
    f.target = target;
    f.padGemms = padGemms;
    f.channelsLast = channelsLast;
    f.inputPrecision = inputPrecision;
    return f;
  }
};
} // namespace

void ampc::registerPipeline() {
  // PassPipelineRegistration's builder cannot fail, and a value found wrong
  // after parsing (a negative loss scale, mode=eval) must be an error, not
  // a pipeline built from a guess: register the builder directly.
  registerPassPipeline(
      "ampc-pipeline",
      "the whole ampc pipeline, as the ampc driver runs it (its flags as "
      "options)",
      [](OpPassManager &pm, StringRef text,
         function_ref<LogicalResult(const Twine &)> errorHandler) {
        PipelineRegistrationOptions parsed;
        if (failed(parsed.parseFromString(text)))
          return failure();
        auto fail = [&](const Twine &message) {
          return errorHandler("--ampc-pipeline: " + message);
        };
        if (parsed.mode != "train" && parsed.mode != "infer")
          return fail("mode must be train or infer, got '" + parsed.mode + "'");
        PipelineOptions options;
        std::string error;
        if (!pipelineOptionsFromFlags(parsed.flags(), options, "", error) ||
            !buildPipeline(pm, options, PipelinePart::All, error))
          return fail(error);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> printOptions) {
        printOptions(PipelineRegistrationOptions());
      });
}
