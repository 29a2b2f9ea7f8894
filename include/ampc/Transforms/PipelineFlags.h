//===- PipelineFlags.h - the pipeline's options as the driver spells them -===//
//
// One place where the `ampc` driver's flags become ampc::PipelineOptions:
// the driver and ampc-opt's registered `--ampc-pipeline` both go through
// pipelineOptionsFromFlags, so `ampc-opt --ampc-pipeline=...` runs what
// `ampc` runs (docs/design.md, Pipeline).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_PIPELINEFLAGS_H
#define AMPC_TRANSFORMS_PIPELINEFLAGS_H

#include "ampc/Transforms/Passes.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// The pipeline's options as the `ampc` driver spells them (docs/design.md,
/// Command-line contract), before they are checked and defaulted.
struct PipelineFlags {
  /// fp16, bf16, fp32 or fp64.
  std::string precision = "fp16";
  /// Build the training step (`--mode=train`) or the forward only.
  bool training = true;
  /// autocast or paint.
  std::string propagation = "autocast";
  std::vector<std::string> keepFp32, forceLowp;
  std::string ampRules;
  /// `--freeze` / `--trainable`: initializer globs (ampc-freeze-parameters).
  std::vector<std::string> freeze, trainable;
  /// `--param-group GLOB:lr=X,weight_decay=Y` (ampc-attach-optimizer's
  /// groups, whose settings it separates with ';').
  std::vector<std::string> paramGroups;
  /// `--infer-training-mode`: @forward keeps Dropout/BatchNorm as exported.
  bool inferTrainingMode = false;
  /// `--fuse-attention`: on (default: what the target's kernels take), off,
  /// or cuda (only what the CUDA target's kernels take, on either target:
  /// the CPU reference then computes the graph the CUDA target does).
  std::string fuseAttention = "on";
  /// The loss ampc-attach-loss adds (ampc::LossFunction's spellings); the
  /// label input it adds.
  std::string loss = "cross_entropy";
  std::string label = "label";
  /// PyTorch's loss options (ampc-attach-loss); unset: the loss's default.
  std::optional<int64_t> ignoreIndex;
  std::optional<double> labelSmoothing, huberDelta, smoothL1Beta;
  std::vector<double> classWeights, posWeight;
  bool softTargets = false;
  /// sgd, adam, adamw or none, and its hyperparameters.
  std::string optimizer = "adamw";
  double lr = 1e-3, momentum = 0, dampening = 0;
  bool nesterov = false;
  /// Unset: the optimizer's default (0.01 for adamw, 0 otherwise).
  std::optional<double> weightDecay;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, clipGradNorm = 0;
  /// `--accumulate N`: calls of the training step per optimizer step.
  int64_t accumulate = 1;
  /// dynamic, none or a fixed positive scale; empty: dynamic at fp16, none
  /// at the other precisions (GradScaler's use).
  std::string lossScale;
  double initScale = 65536, growthFactor = 2, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  double minScale = 0, maxScale = 0;
  int64_t maxTensorBytes = kDefaultMaxTensorBytes;
  /// The target whose kernels the memory plan places scratch for: cpu,
  /// cuda or cuda-sim.
  std::string target = "cpu";
  /// `--pad-gemms`: on, off or auto (on for the CUDA targets), issue 37
  /// item 11 (ampc-pad-gemms).
  std::string padGemms = "auto";
  /// `--channels-last`: on, off or auto (on for the CUDA targets), issue
  /// 39 item 3 (ampc-channels-last).
  std::string channelsLast = "auto";
  /// `--input-precision`: fp32 (every float input as the model declares
  /// it) or auto (FP16/BF16 where every use casts the input there,
  /// ampc-input-precision; issue 37, item 2).
  std::string inputPrecision = "fp32";
  /// `--emit-after`: the last pass to run; empty runs them all.
  std::string stopAfter;
  /// `--skip-pass`: rewrites to leave out (ampc::pipelineSkippable).
  std::vector<std::string> skipPasses;
};

/// Checks `flags` and sets `options` from them. False with a one-line
/// message in `error` naming the flag as `flagPrefix` + its name
/// ("--precision must be fp16, bf16, fp32 or fp64, got 'fp8'" for the
/// driver's "--").
bool pipelineOptionsFromFlags(const PipelineFlags &flags,
                              PipelineOptions &options,
                              llvm::StringRef flagPrefix, std::string &error);

/// Registers `ampc-pipeline` for ampc-opt: the whole pipeline of the `ampc`
/// driver from the options of PipelineFlags, spelled as pass options
/// (`--ampc-pipeline="precision=fp16 mode=train optimizer=adamw"`).
void registerPipeline();

} // namespace ampc

#endif // AMPC_TRANSFORMS_PIPELINEFLAGS_H
