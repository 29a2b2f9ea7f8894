//===- PipelineSettings.cpp - every pipeline option, declared once ---------===//
//
// The pipeline's options (bindOptions: the `ampc` flag, the
// `--ampc-pipeline` option and the `ampc --list-options=json` entry of
// each), their checks and defaults (toPipelineOptions), and ampc-opt's
// `--ampc-pipeline` (docs/design.md, Options).
//
//===----------------------------------------------------------------------===//

#include "ampc/Transforms/PipelineSettings.h"

#include "ampc/Dialect/Fp8.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace mlir;
using ampc::OptionGroup;
using ampc::OptionSpec;

namespace {
/// The words of an enum of the dialect (AMPCOps.td), as allowed values.
template <typename E>
std::vector<std::string> spellings() {
  std::vector<std::string> words;
  for (llvm::StringRef word : ampc::enumSpellings<E>())
    words.push_back(word.str());
  return words;
}
} // namespace

void ampc::PipelineSettings::bindOptions(OptionsBinder &binder) {
  const OptionGroup lossGroup = OptionGroup::Loss,
                    trainingGroup = OptionGroup::Training;
  binder.choice("mode", mode,
                {{"train", "the training step (default)"},
                 {"infer", "the forward pass only"}},
                OptionSpec("what the output computes"));
  binder.opt("target", target,
             OptionSpec("the kernels the memory plan places scratch for: "
                        "cpu, cuda or cuda-sim (default cpu)")
                 .oneOf({"cpu", "cuda", "cuda-sim"})
                 .pipelineOnly());
  binder.opt(
      "pad-gemms", padGemms,
      OptionSpec("pad a Linear's output features (classes) to multiples of 8 "
                 "for Tensor Cores, results unchanged: on, off or auto "
                 "(default: on for --target=cuda and cuda-sim; never in "
                 "--emit=onnx)")
          .valueName("on|off|auto")
          .oneOf({"on", "off", "auto"}));
  binder.opt(
      "channels-last", channelsLast,
      OptionSpec("store a CNN's images channels-last (N, H, W, C), "
                 "transposed only at the model's inputs and outputs, results "
                 "unchanged: on, off or auto (default: on for --target=cuda "
                 "and cuda-sim, whose kernels and cuDNN take it; the CPU "
                 "target refuses it; never in --emit=onnx)")
          .valueName("on|off|auto")
          .oneOf({"on", "off", "auto"}));
  binder.opt(
      "pad-channels", padChannels,
      OptionSpec("pad a channels-last FP16/BF16 convolution's input and "
                 "output channels to multiples of 8 for Tensor Cores, "
                 "results unchanged: on, off or auto (default: wherever "
                 "--channels-last is on)")
          .valueName("on|off|auto")
          .oneOf({"on", "off", "auto"}));
  binder.opt("precision", precision,
             OptionSpec("low-precision dtype: fp16 (default), bf16, or fp32 "
                        "(no mixed precision); fp64 makes every FP32 tensor "
                        "FP64 (for gradient checks); fp8: BF16, and FP8 "
                        "decided for the large GEMMs (computed in BF16 until "
                        "FP8 kernels exist; docs/precision.md)")
                 .valueName("fp16|bf16|fp32|fp64|fp8")
                 .oneOf({"fp16", "bf16", "fp32", "fp64", "fp8"}));
  binder.opt(
      "input-precision", inputPrecision,
      OptionSpec("the type of the library's float inputs: fp32 (default: as "
                 "the model declares them) or auto (FP16/BF16 where every "
                 "use of the input casts it there, as a Linear's input under "
                 "autocast: the caller passes 16-bit data, rounded to "
                 "nearest even, and the step computes the same bits; labels "
                 "never change; --report says why an input stays fp32; not "
                 "in --emit=onnx)")
          .valueName("fp32|auto")
          .oneOf({"fp32", "auto"}));
  binder.opt("propagation", propagation,
             OptionSpec("autocast: PyTorch autocast op by op (default); "
                        "paint: TensorFlow-style cast-minimising colouring")
                 .valueName("autocast|paint")
                 .oneOf(spellings<Propagation>()));
  binder.list("keep-fp32", keepFp32,
              OptionSpec("keep these ops in FP32, e.g. "
                         "op:Softmax,node:/x/MatMul")
                  .valueName("RULE,...")
                  .commaSeparated());
  binder.list("force-lowp", forceLowp,
              OptionSpec("compute these ops in low precision (op:TYPE or "
                         "node:NAME)")
                  .valueName("RULE,...")
                  .commaSeparated());
  binder.opt("amp-rules", ampRules,
             OptionSpec("JSON file changing categories and overriding nodes "
                        "(docs/precision.md)")
                 .valueName("rules.json"));
  binder.opt("fp8-format", fp8Format,
             OptionSpec("--precision=fp8: hybrid (default: E4M3 forward, "
                        "E5M2 gradients) or e4m3")
                 .valueName("hybrid|e4m3"));
  binder.list("keep-bf16", keepBf16,
              OptionSpec("--precision=fp8: keep these GEMMs in BF16 (op:TYPE "
                         "or node:NAME, globs as for --keep-fp32)")
                  .valueName("RULE,...")
                  .commaSeparated());
  binder.opt("fp8-min-gemm", fp8MinGemm,
             OptionSpec("--precision=fp8: GEMMs with at most this many "
                        "multiply-adds (M*N*K) stay BF16 (default 2147483648, "
                        "1024x2048x1024)")
                 .valueName("N"));
  binder.opt("fp8-amax-history", fp8AmaxHistory,
             OptionSpec("--precision=fp8: the delayed-scaling amax history's "
                        "length (default 1024)")
                 .valueName("N"));
  binder.opt("fp8-margin", fp8Margin,
             OptionSpec("--precision=fp8: scale = (fp8_max / amax) / "
                        "2^margin (default 0)")
                 .valueName("M"));
  binder.opt("fp8-amax-algo", fp8AmaxAlgo,
             OptionSpec("--precision=fp8: the amax a scale comes from: max "
                        "(default, over the history) or most_recent")
                 .valueName("max|most_recent"));
  binder.list("freeze", freeze,
              OptionSpec("initializers that do not train (globs over their "
                         "names, e.g. 'backbone.*'): no gradient, no "
                         "optimizer state, kept bit for bit")
                  .valueName("GLOB,...")
                  .commaSeparated()
                  .in(trainingGroup));
  binder.list("trainable", trainable,
              OptionSpec("train only the initializers these globs match "
                         "(--freeze still applies to them)")
                  .valueName("GLOB,...")
                  .commaSeparated()
                  .in(trainingGroup));
  binder.opt("infer-training-mode", inferTrainingMode,
             OptionSpec("infer runs Dropout and BatchNormalization as the "
                        "model says (training mode, when exported so) "
                        "instead of in eval mode as PyTorch's model.eval(); "
                        "for checking ops, not for deployment"));
  binder.opt("fuse-attention", fuseAttention,
             OptionSpec("recognise softmax attention (MatMul, scale, mask, "
                        "Softmax, MatMul) and compute it as one fused op: on "
                        "(default: what the target's kernels take), off (the "
                        "graph as exported), or cuda (only what the CUDA "
                        "target's kernels take, on either target)")
                 .valueName("on|off|cuda")
                 .oneOf({"on", "off", "cuda"})
                 .alsoAccepts({"true", "false"}));
  binder.opt(
      "loss", loss,
      OptionSpec("training loss attached to the first output unless the "
                 "model ends in one, as PyTorch's functional (mean "
                 "reduction): cross_entropy (default; int64 class-id "
                 "labels), bce_with_logits, mse, l1, smooth_l1, huber (float "
                 "labels of the output's shape), or none")
          .valueName(
              "cross_entropy|bce_with_logits|mse|l1|smooth_l1|huber|none")
          .oneOf(spellings<LossFunction>()));
  binder.opt("label", label,
             OptionSpec("name of the label input that --loss adds (default: "
                        "label)")
                 .valueName("NAME"));
  binder.opt("ignore-index", ignoreIndex,
             OptionSpec("cross_entropy: labels equal to N count for nothing "
                        "(PyTorch's ignore_index; its default -100 is not "
                        "implied)")
                 .valueName("N")
                 .in(lossGroup));
  binder.opt("label-smoothing", labelSmoothing,
             OptionSpec("cross_entropy: PyTorch's label_smoothing, in [0, 1] "
                        "(default 0)")
                 .valueName("EPS")
                 .in(lossGroup));
  binder.list("class-weights", classWeights,
              OptionSpec("cross_entropy: one weight per class (PyTorch's "
                         "weight)")
                  .valueName("W0,W1,...")
                  .commaSeparated()
                  .in(lossGroup));
  binder.opt("soft-targets", softTargets,
             OptionSpec("cross_entropy: the label is class probabilities of "
                        "the scores' shape (float), not class ids")
                 .in(lossGroup));
  binder.list("pos-weight", posWeight,
              OptionSpec("bce_with_logits: the positives' weight, one value "
                         "or one per class of the output's last axis "
                         "(PyTorch's pos_weight)")
                  .valueName("W|W0,W1,...")
                  .commaSeparated()
                  .in(lossGroup));
  binder.opt("huber-delta", huberDelta,
             OptionSpec("huber: PyTorch's delta (default 1)")
                 .valueName("D")
                 .in(lossGroup));
  binder.opt("smooth-l1-beta", smoothL1Beta,
             OptionSpec("smooth_l1: PyTorch's beta (default 1; 0 is l1)")
                 .valueName("B")
                 .in(lossGroup));
  binder.opt("optimizer", optimizer,
             OptionSpec("optimizer on the FP32 master weights: adamw "
                        "(default), adam, sgd, or none (the library computes "
                        "gradients only)")
                 .valueName("sgd|adam|adamw|none")
                 .oneOf(spellings<OptimizerKind>())
                 .in(trainingGroup));
  binder.opt("lr", lr,
             OptionSpec("initial learning rate (default 1e-3; runtime state)")
                 .in(trainingGroup));
  binder.opt("momentum", momentum,
             OptionSpec("sgd momentum (default 0)").in(trainingGroup));
  binder.opt("dampening", dampening,
             OptionSpec("sgd dampening (default 0)").in(trainingGroup));
  binder.opt("nesterov", nesterov,
             OptionSpec("sgd with Nesterov momentum").in(trainingGroup));
  binder.opt("weight-decay", weightDecay,
             OptionSpec("weight decay (default: 0.01 for adamw, 0 otherwise)")
                 .in(trainingGroup));
  binder.opt("beta1", beta1,
             OptionSpec("adam/adamw beta1 (default 0.9)").in(trainingGroup));
  binder.opt("beta2", beta2,
             OptionSpec("adam/adamw beta2 (default 0.999)").in(trainingGroup));
  binder.opt("eps", eps,
             OptionSpec("adam/adamw eps (default 1e-8)").in(trainingGroup));
  binder.opt("accumulate", accumulate,
             OptionSpec("gradient accumulation: N calls of the training step "
                        "(N micro-batches) per optimizer step, as a PyTorch "
                        "loop that divides the loss by N and steps its "
                        "GradScaler every N batches (default 1)")
                 .valueName("N")
                 .in(trainingGroup));
  binder.opt("data-parallel", dataParallel,
             OptionSpec("average the gradients over the ranks of an MPI job "
                        "(mpirun) before the optimizer reads them; run alone, "
                        "the library trains exactly as without it "
                        "(docs/distributed.md)")
                 .in(trainingGroup));
  binder.opt("sync-batchnorm", syncBatchNorm,
             OptionSpec("with --data-parallel, every training BatchNorm "
                        "normalises with the statistics of all ranks' rows "
                        "and all-reduces its backward's sums, as "
                        "torch.nn.SyncBatchNorm (CPU target; "
                        "docs/distributed.md)")
                 .in(trainingGroup));
  binder.opt("allreduce-dtype", allreduceDtype,
             OptionSpec("with --data-parallel, the type gradients travel in: "
                        "auto (default: the 16-bit type of --precision, fp32 "
                        "at fp32), fp16, bf16 or fp32")
                 .valueName("auto|fp16|bf16|fp32")
                 .oneOf({"auto", "fp16", "bf16", "fp32"})
                 .in(trainingGroup));
  binder.opt("bucket-mb", bucketMb,
             OptionSpec("with --data-parallel, the size of a bucket of "
                        "gradients all-reduced together, in MiB of the "
                        "communicated type (default 25, as DDP)")
                 .valueName("MB")
                 .in(trainingGroup));
  binder.opt("shard-optimizer", shardOptimizer,
             OptionSpec("with --data-parallel, ZeRO-1: gradients "
                        "reduce-scattered, each rank updating its shard of "
                        "the optimizer state, the new weights all-gathered "
                        "(CPU target; docs/distributed.md)")
                 .in(trainingGroup));
  binder.opt("clip-grad-norm", clipGradNorm,
             OptionSpec("clip the unscaled gradients to this global L2 norm "
                        "(default: no clipping)")
                 .in(trainingGroup));
  binder.list(
      "param-group", paramGroups,
      OptionSpec("a parameter group as torch's param_groups, repeatable, the "
                 "first that matches a parameter wins: "
                 "GLOB:lr=X,weight_decay=Y (each key optional; also beta1, "
                 "beta2, eps for adam/adamw, momentum, dampening for sgd)")
          .valueName("GLOB:lr=X,weight_decay=Y")
          .inPipeline(" (';' between a group's settings: ',' separates "
                      "groups)")
          .in(trainingGroup));
  binder.opt("loss-scale", lossScale,
             OptionSpec("loss scaling: dynamic (default for fp16), none "
                        "(default for bf16, fp32, fp64), or a fixed scale "
                        "VALUE")
                 .valueName("dynamic|none|VALUE")
                 .in(trainingGroup));
  binder.opt("init-scale", initScale,
             OptionSpec("initial dynamic loss scale (default 65536)")
                 .in(trainingGroup));
  binder.opt("growth-factor", growthFactor,
             OptionSpec("scale growth factor (default 2)").in(trainingGroup));
  binder.opt("backoff-factor", backoffFactor,
             OptionSpec("scale backoff factor (default 0.5)").in(trainingGroup));
  binder.opt("growth-interval", growthInterval,
             OptionSpec("finite steps before the scale grows (default 2000)")
                 .in(trainingGroup));
  binder.opt("min-scale", minScale,
             OptionSpec("lower bound of the dynamic scale (default: none)")
                 .in(trainingGroup));
  binder.opt("max-scale", maxScale,
             OptionSpec("upper bound of the dynamic scale (default: none)")
                 .in(trainingGroup));
  binder.opt("max-tensor-bytes", maxTensorBytes,
             OptionSpec("the largest tensor, and the largest memory arena of "
                        "the library, in bytes (default 2^36 = 64 GiB; at "
                        "most 2^48); a model past it is an error naming the "
                        "node"));
  binder.opt("emit-after", stopAfter,
             OptionSpec("with --emit=mlir: stop after this pass ('import' "
                        "stops before the first)")
                 .valueName("pass"));
  // The passes it takes, named where the pipeline defines them.
  binder.list("skip-pass", skipPasses,
              OptionSpec("leave out a kernel-level rewrite, to compare a step "
                         "with and without it or to debug; repeatable (" +
                         llvm::join(pipelineSkippable(), ", ") + ")")
                  .valueName("pass"));
}

/// `v` as %g prints it (1e+39, not 1000000000000000000000000000000000000000).
static std::string shortest(double v) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", v);
  return text;
}

bool ampc::PipelineSettings::toPipelineOptions(PipelineOptions &options,
                                               StringRef flagPrefix,
                                               std::string &error) const {
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
  // Each float option (as bindOptions declares them) in f32's range, then
  // the words of each option that takes a few.
  {
    PipelineSettings declared = *this;
    OptionsBinder binder = OptionsBinder::describe();
    declared.bindOptions(binder);
    for (const OptionInfo &info : binder.options())
      if (info.floatValues)
        for (double value : info.floatValues())
          if (!fitsF32(info.name.c_str(), value))
            return false;
    if (!binder.checkChoices(flagPrefix, error))
      return false;
  }
  const bool training = mode == "train";
  options.stopAfter = stopAfter;
  options.skipPasses = skipPasses;
  // cuda-sim writes the CUDA kernels.
  std::optional<KernelTarget> kernels =
      llvm::StringSwitch<std::optional<KernelTarget>>(target)
          .Case("cpu", KernelTarget::Cpu)
          .Cases({"cuda", "cuda-sim"}, KernelTarget::Cuda)
          .Default(std::nullopt);
  options.kernelTarget = *kernels;
  options.padGemms = padGemms == "on" ||
                     (padGemms == "auto" && *kernels == KernelTarget::Cuda);
  // auto leaves small heads alone: their pad and slice copies would cost
  // more launches than the unaligned GEMM costs (docs/design.md).
  options.padGemmsMinN = padGemms == "auto" ? 128 : 0;
  options.channelsLast =
      channelsLast == "on" ||
      (channelsLast == "auto" && *kernels == KernelTarget::Cuda);
  options.padChannels = padChannels != "off";
  std::optional<LowPrecisionType> dtype =
      llvm::StringSwitch<std::optional<LowPrecisionType>>(precision)
          .Case("fp16", LowPrecisionType::F16)
          .Cases({"bf16", "fp8"}, LowPrecisionType::BF16)
          .Cases({"fp32", "fp64"}, LowPrecisionType::F32)
          .Default(std::nullopt);
  options.precision.dtype = *dtype;
  // --precision=fp8: BF16 everywhere, and ampc-assign-fp8's decisions.
  options.fp8 = precision == "fp8";
  for (auto [flag, given] :
       {std::pair<const char *, bool>{"fp8-format", fp8Format.has_value()},
        {"keep-bf16", !keepBf16.empty()},
        {"fp8-min-gemm", fp8MinGemm.has_value()},
        {"fp8-amax-history", fp8AmaxHistory.has_value()},
        {"fp8-margin", fp8Margin.has_value()},
        {"fp8-amax-algo", fp8AmaxAlgo.has_value()}})
    if (given && !options.fp8)
      return fail(flag, "needs --precision=fp8, got --precision=" + precision);
  AssignFp8PassOptions &fp8 = options.fp8Options;
  fp8.format = fp8Format.value_or("hybrid");
  if (fp8.format != "hybrid" && fp8.format != "e4m3")
    return fail("fp8-format", "must be hybrid or e4m3, got '" + fp8.format +
                                  "'");
  fp8.amaxAlgo = fp8AmaxAlgo.value_or("max");
  if (!isFp8AmaxAlgo(fp8.amaxAlgo))
    return fail("fp8-amax-algo",
                "must be max or most_recent, got '" + fp8.amaxAlgo + "'");
  fp8.amaxHistory = fp8AmaxHistory.value_or(1024);
  if (fp8.amaxHistory < 1 || fp8.amaxHistory > kFp8MaxAmaxHistory)
    return fail("fp8-amax-history", "must be between 1 and " +
                                        Twine(kFp8MaxAmaxHistory) + ", got " +
                                        Twine(fp8.amaxHistory));
  fp8.margin = fp8Margin.value_or(0);
  if (fp8.margin < 0 || fp8.margin > kFp8MaxMargin)
    return fail("fp8-margin", "must be between 0 and " + Twine(kFp8MaxMargin) +
                                  ", got " + Twine(fp8.margin));
  fp8.minGemm = fp8MinGemm.value_or(int64_t(1) << 31);
  if (fp8.minGemm < 0)
    return fail("fp8-min-gemm", "must be at least 0, got " +
                                    Twine(fp8.minGemm));
  fp8.keepBf16.assign(keepBf16.begin(), keepBf16.end());
  options.narrowInputs = inputPrecision == "auto";
  options.widenToF64 = precision == "fp64";
  options.precision.propagation = *symbolizeEnum<Propagation>(propagation);
  options.precision.keepFp32.assign(keepFp32.begin(),
                                    keepFp32.end());
  options.precision.forceLowp.assign(forceLowp.begin(),
                                     forceLowp.end());
  options.precision.rulesFile = ampRules;
  if (!training && (!freeze.empty() || !trainable.empty()))
    return fail(freeze.empty() ? "trainable" : "freeze",
                "decides what trains: it needs --mode=train");
  options.freeze.freeze.assign(freeze.begin(), freeze.end());
  options.freeze.trainable.assign(trainable.begin(),
                                  trainable.end());
  options.training = training;
  options.evalForward = !inferTrainingMode;
  options.fuseAttention =
      fuseAttention != "off" && fuseAttention != "false";
  options.attentionAsCuda = fuseAttention == "cuda";
  options.loss.loss = *symbolizeEnum<LossFunction>(loss);
  options.loss.label = label;
  // The pass checks which options apply to which loss and their values
  // against the model; here only what a pass option cannot carry.
  if (ignoreIndex) {
    if (*ignoreIndex == INT64_MIN)
      return fail("ignore-index", "must be greater than " + Twine(INT64_MIN));
    options.loss.ignoreIndex = *ignoreIndex;
  }
  options.loss.labelSmoothing = labelSmoothing.value_or(0.0);
  options.loss.classWeights.assign(classWeights.begin(),
                                   classWeights.end());
  options.loss.softTargets = softTargets;
  options.loss.posWeight.assign(posWeight.begin(), posWeight.end());
  options.loss.huberDelta = huberDelta.value_or(1.0);
  options.loss.smoothL1Beta = smoothL1Beta.value_or(1.0);
  const OptimizerKind kind = *symbolizeEnum<OptimizerKind>(optimizer);
  options.optimizer.kind = kind;
  options.optimizer.lr = lr;
  options.optimizer.momentum = momentum;
  options.optimizer.dampening = dampening;
  options.optimizer.nesterov = nesterov;
  // Negative means "the optimizer's default" to the pass; a user's
  // negative or NaN value is a mistake.
  if (weightDecay &&
      !(*weightDecay >= 0 && std::isfinite(*weightDecay)))
    return fail("weight-decay", "must be finite and >= 0, got " +
                                    std::to_string(*weightDecay));
  options.optimizer.weightDecay = weightDecay.value_or(-1.0);
  options.optimizer.beta1 = beta1;
  options.optimizer.beta2 = beta2;
  options.optimizer.eps = eps;
  options.optimizer.clipGradNorm = clipGradNorm;
  // The pass's list is comma separated: a group's settings go with ';'.
  options.optimizer.paramGroups.clear();
  for (const std::string &group : paramGroups) {
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
  if (!paramGroups.empty() && kind == OptimizerKind::None)
    return fail("param-group", "needs an optimizer, got --optimizer=none");
  if (accumulate < 1)
    return fail("accumulate",
                "must be at least 1, got " + Twine(accumulate));
  if (accumulate > 1 && kind == OptimizerKind::None)
    return fail("accumulate", "needs an optimizer (the library accumulates "
                              "for its own optimizer step), got "
                              "--optimizer=none");
  options.accumulation.microBatches = accumulate;
  if (dataParallel && kind == OptimizerKind::None)
    return fail("data-parallel", "needs an optimizer (the ranks average the "
                                 "gradients it reads), got --optimizer=none");
  if (dataParallel && accumulate > 1)
    return fail("data-parallel",
                "with --accumulate is not supported yet (docs/distributed.md)");
  if (!(bucketMb > 0) || !std::isfinite(bucketMb) || bucketMb > 1e6)
    return fail("bucket-mb", "must be a positive number of MiB up to 1e6, "
                             "got " + std::to_string(bucketMb));
  if (syncBatchNorm && !dataParallel)
    return fail("sync-batchnorm", "needs --data-parallel (the statistics are "
                                  "all-reduced over the ranks of its job)");
  if (syncBatchNorm && *kernels == KernelTarget::Cuda)
    return fail("sync-batchnorm",
                "is not supported on the CUDA target yet (--target=" +
                    target + "); use --target=cpu (docs/distributed.md)");
  if (shardOptimizer && !dataParallel)
    return fail("shard-optimizer", "needs --data-parallel");
  if (syncBatchNorm && shardOptimizer)
    return fail("sync-batchnorm",
                "cannot be combined with --shard-optimizer yet (both number "
                "their exchanges after the gradient buckets)");
  options.dataParallel = dataParallel;
  options.syncBatchNorm = syncBatchNorm;
  options.allReduce.dtype = allreduceDtype;
  options.allReduce.bucketBytes =
      std::max<int64_t>(1, static_cast<int64_t>(bucketMb * 1024 * 1024));
  // GradScaler's defaults; fp16 needs scaling, bf16 and wider do not.
  LossScalingMode scaling = precision == "fp16" ? LossScalingMode::Dynamic
                                                      : LossScalingMode::None;
  options.lossScaling.initScale = initScale;
  if (lossScale == "dynamic") {
    scaling = LossScalingMode::Dynamic;
  } else if (lossScale == "none") {
    scaling = LossScalingMode::None;
  } else if (!lossScale.empty()) {
    double fixed = 0;
    if (StringRef(lossScale).getAsDouble(fixed) || !(fixed > 0) ||
        !std::isfinite(fixed))
      return fail("loss-scale",
                  "must be dynamic, none or a positive number, got '" +
                      lossScale + "'");
    if (!fitsF32("loss-scale", fixed))
      return false;
    options.lossScaling.initScale = fixed;
    scaling = LossScalingMode::Static;
  }
  options.lossScaling.mode = scaling;
  options.lossScaling.growthFactor = growthFactor;
  options.lossScaling.backoffFactor = backoffFactor;
  options.lossScaling.growthInterval = growthInterval;
  options.lossScaling.minScale = minScale;
  options.lossScaling.maxScale = maxScale;
  if (maxTensorBytes < 1 || maxTensorBytes > kMaxTensorBytes)
    return fail("max-tensor-bytes", "must be between 1 and 2^48 (" +
                                        Twine(kMaxTensorBytes) + "), got " +
                                        Twine(maxTensorBytes));
  options.maxTensorBytes = maxTensorBytes;
  return true;
}

namespace {
/// The options of `--ampc-pipeline`: those PipelineSettings::bindOptions
/// declares, spelt as the driver's flags.
struct PipelineRegistrationOptions
    : public PassPipelineOptions<PipelineRegistrationOptions> {
  PipelineRegistrationOptions() { settings.bindOptions(binder); }
  ampc::PipelineSettings settings;
  ampc::OptionsBinder binder = ampc::OptionsBinder::passPipeline(*this);
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
        parsed.binder.apply();
        PipelineOptions options;
        std::string error;
        // ZeRO-1 is recorded on the module (ampc.shard_optimizer), which a
        // pass pipeline cannot reach: the ampc driver sets it.
        if (parsed.settings.shardOptimizer)
          return errorHandler("--ampc-pipeline: shard-optimizer is recorded "
                              "on the module; give the input module the "
                              "unit attribute ampc.shard_optimizer instead");
        if (!parsed.settings.toPipelineOptions(options, "", error) ||
            !buildPipeline(pm, options, PipelinePart::All, error))
          return errorHandler("--ampc-pipeline: " + error);
        return success();
      },
      [](function_ref<void(const mlir::detail::PassOptions &)> printOptions) {
        printOptions(PipelineRegistrationOptions());
      });
}
