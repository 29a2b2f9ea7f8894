//===- PipelineSettings.h - the pipeline's options, declared once -*- C++ -*-===//
//
// Every option of the ampc pipeline is declared once, in
// PipelineSettings::bindOptions (lib/Transforms/PipelineSettings.cpp): its
// name, type, default (the field's initializer), help and allowed values.
// The one declaration is the `ampc` driver's flag, the option of ampc-opt's
// `--ampc-pipeline`, and an entry of `ampc --list-options=json`, which the
// Python module checks its keywords against (ampc/Support/OptionsBinder.h;
// docs/design.md, Options). toPipelineOptions checks and defaults them into
// the ampc::PipelineOptions both tools build the pipeline from.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRANSFORMS_PIPELINESETTINGS_H
#define AMPC_TRANSFORMS_PIPELINESETTINGS_H

#include "ampc/Support/OptionsBinder.h"
#include "ampc/Transforms/Passes.h"

#include <optional>
#include <string>
#include <vector>

namespace ampc {

/// The pipeline's options as the `ampc` driver spells them (docs/design.md,
/// Command-line contract), before they are checked and defaulted. Each
/// field's initializer is the option's default.
struct PipelineSettings {
  std::string precision = "fp16";
  /// train or infer (`--mode`).
  std::string mode = "train";
  std::string propagation = "autocast";
  std::vector<std::string> keepFp32, forceLowp;
  std::string ampRules;
  /// `--precision=fp8` (issue 42); unset unless given, so that one given
  /// with another precision is an error.
  std::optional<std::string> fp8Format, fp8AmaxAlgo;
  std::vector<std::string> keepBf16;
  std::optional<int64_t> fp8AmaxHistory, fp8Margin, fp8MinGemm;
  std::vector<std::string> freeze, trainable;
  /// `--param-group GLOB:lr=X,weight_decay=Y` (ampc-attach-optimizer's
  /// groups, whose settings it separates with ';').
  std::vector<std::string> paramGroups;
  bool inferTrainingMode = false;
  std::string fuseAttention = "on";
  std::string loss = "cross_entropy";
  std::string label = "label";
  /// PyTorch's loss options (ampc-attach-loss); unset: the loss's default.
  std::optional<int64_t> ignoreIndex;
  std::optional<double> labelSmoothing, huberDelta, smoothL1Beta;
  std::vector<double> classWeights, posWeight;
  bool softTargets = false;
  std::string optimizer = "adamw";
  double lr = 1e-3, momentum = 0, dampening = 0;
  bool nesterov = false;
  /// Unset: the optimizer's default (0.01 for adamw, 0 otherwise).
  std::optional<double> weightDecay;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8, clipGradNorm = 0;
  int64_t accumulate = 1;
  /// Data parallel (issue 41): the all-reduce, its type and bucket size.
  bool dataParallel = false;
  /// --sync-batchnorm: BatchNorm's batch statistics over every rank's rows.
  bool syncBatchNorm = false;
  std::string allreduceDtype = "auto";
  double bucketMb = 25;
  /// ZeRO-1 (issue 41, item 3): the optimizer sharded over the ranks.
  bool shardOptimizer = false;
  /// dynamic, none or a fixed positive scale; empty: dynamic at fp16, none
  /// at the other precisions (GradScaler's use).
  std::string lossScale;
  double initScale = 65536, growthFactor = 2, backoffFactor = 0.5;
  int64_t growthInterval = 2000;
  double minScale = 0, maxScale = 0;
  int64_t maxTensorBytes = kDefaultMaxTensorBytes;
  /// The kernels the memory plan places scratch for: cpu, cuda or
  /// cuda-sim (the driver sets it from its --target).
  std::string target = "cpu";
  std::string padGemms = "auto";
  std::string channelsLast = "auto";
  std::string padChannels = "auto";
  std::string inputPrecision = "fp32";
  /// `--emit-after`: the last pass to run; empty runs them all.
  std::string stopAfter;
  /// `--skip-pass`: rewrites to leave out (ampc::pipelineSkippable).
  std::vector<std::string> skipPasses;

  /// Declares every option (the one place an option is declared).
  void bindOptions(OptionsBinder &binder);

  /// Checks the settings and sets `options` from them. False with a
  /// one-line message in `error` naming the option as `flagPrefix` + its
  /// name ("--precision must be fp16, bf16, fp32 or fp64, got 'fp8'" for
  /// the driver's "--").
  bool toPipelineOptions(PipelineOptions &options, llvm::StringRef flagPrefix,
                         std::string &error) const;
};

/// Registers `ampc-pipeline` for ampc-opt: the whole pipeline of the `ampc`
/// driver, its options those of PipelineSettings::bindOptions
/// (`--ampc-pipeline="precision=fp16 mode=train optimizer=adamw"`).
void registerPipeline();

} // namespace ampc

#endif // AMPC_TRANSFORMS_PIPELINESETTINGS_H
