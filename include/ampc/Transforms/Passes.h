//===- Passes.h - ampc passes and the compilation pipeline ------*- C++ -*-===//

#ifndef AMPC_TRANSFORMS_PASSES_H
#define AMPC_TRANSFORMS_PASSES_H

#include "ampc/Dialect/AMPCDialect.h"
#include "ampc/Dialect/TensorSize.h"
#include "ampc/Transforms/EnumOption.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"

namespace ampc {

#define GEN_PASS_DECL
#include "ampc/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "ampc/Transforms/Passes.h.inc"

/// The two parts of the pipeline: graph-level passes on ONNX-semantics ops,
/// then the kernel-level form (fusion, memory plan) that code generation
/// reads. Reports and ONNX export read the module between the two.
enum class PipelinePart { Graph, Kernel, All };

/// Options of the whole pipeline; grows as passes are added.
struct PipelineOptions {
  /// Stop after the pass with this argument name (e.g. "ampc-fold-shapes");
  /// empty runs the whole pipeline.
  std::string stopAfter;
  /// `--skip-pass`: kernel-level rewrites left out (pipelineSkippable),
  /// to compare a step with and without one.
  std::vector<std::string> skipPasses;
  /// --precision=fp64: every f32 tensor becomes f64 before precision
  /// assignment (which then has nothing to lower).
  bool widenToF64 = false;
  /// ampc-fold-shapes runs; false for a module that is already in the
  /// dialect's form (tools that read MLIR directly).
  bool foldShapes = true;
  /// Builds the training step: ampc-attach-loss and ampc-autodiff run
  /// (docs/design.md, Pipeline); false compiles the forward only.
  bool training = false;
  /// ampc-eval-forward runs: @forward (infer, evaluation) is the eval-mode
  /// model. False keeps the model as exported (the ONNX node tests, the
  /// gradient check's finite differences of `infer`).
  bool evalForward = true;
  /// ampc-fuse-attention runs (`--fuse-attention=off` turns it off);
  /// `--fuse-attention=cuda`: it fuses only what the CUDA kernels take.
  bool fuseAttention = true;
  bool attentionAsCuda = false;
  /// The kernels the library is written with: the memory plan places
  /// their scratch (and, for CUDA, the inputs' staging buffers).
  KernelTarget kernelTarget = KernelTarget::Cpu;
  /// ampc-pad-gemms runs (issue 37 item 11): `--pad-gemms`, on by default
  /// for the CUDA targets.
  bool padGemms = false;
  /// ampc-pad-gemms's min-n: 0 for `--pad-gemms=on`, 128 for auto.
  int64_t padGemmsMinN = 0;
  /// ampc-channels-last runs (issue 39 item 3): `--channels-last`, on by
  /// default for the CUDA targets.
  bool channelsLast = false;
  /// ampc-pad-channels runs (issue 39): `--pad-channels`, on by default
  /// wherever channels-last is.
  bool padChannels = false;
  /// ampc-input-precision runs (`--input-precision=auto`): an f32 input
  /// that every use casts to FP16/BF16 is taken in that type.
  bool narrowInputs = false;
  /// The largest tensor or arena (bytes), `--max-tensor-bytes`.
  int64_t maxTensorBytes = kDefaultMaxTensorBytes;
  /// ampc-attach-loss: the loss (ampc::LossFunction) and the label's name.
  AttachLossPassOptions loss;
  /// ampc-assign-precision: dtype (ampc::LowPrecisionType), propagation
  /// (ampc::Propagation), overrides, rules file.
  AssignPrecisionPassOptions precision;
  /// ampc-assign-fp8 runs (`--precision=fp8`, issue 42; precision is
  /// then BF16): which GEMMs compute in FP8, the delayed-scaling recipe.
  bool fp8 = false;
  AssignFp8PassOptions fp8Options;
  /// ampc-freeze-parameters: the initializers that do not train.
  FreezeParametersPassOptions freeze;
  /// ampc-insert-loss-scaling: mode (ampc::LossScalingMode; `None` leaves
  /// the pass out) and the scaler's constants.
  InsertLossScalingPassOptions lossScaling;
  /// ampc-attach-optimizer: kind (ampc::OptimizerKind; `None` leaves the
  /// pass out) and hyperparameters.
  AttachOptimizerPassOptions optimizer;
  /// ampc-accumulate-gradients: micro-batches per optimizer step.
  AccumulateGradientsPassOptions accumulation;
  /// ampc-insert-all-reduce runs (`--data-parallel`, issue 41): the
  /// gradients are averaged over the ranks, in `allReduce.dtype`.
  bool dataParallel = false;
  InsertAllReducePassOptions allReduce;
  /// ampc-sync-batch-norm runs (`--sync-batchnorm`, with dataParallel).
  bool syncBatchNorm = false;
};

/// Whether ampc-sync-batch-norm synchronises `op` in a data-parallel step:
/// a training-mode ampc.batch_normalization or ampc.batch_norm_grad.
bool synchronisesBatchNorm(mlir::Operation *op);

/// A line for each BatchNorm of `module`'s @train_step that
/// `--sync-batchnorm` synchronises (the report's `sync_batchnorm`).
std::vector<std::string> synchronisedBatchNorms(mlir::ModuleOp module);

/// The argument names of the pipeline's passes, in order.
llvm::ArrayRef<llvm::StringRef> pipelinePassNames();

/// Builds `part` of the ampc pipeline (docs/design.md, Pipeline) into `pm`,
/// up to `options.stopAfter`. False with `error` set when `options.stopAfter`
/// names no pass of the pipeline.
bool buildPipeline(mlir::OpPassManager &pm, const PipelineOptions &options,
                   PipelinePart part, std::string &error);

/// The passes `--skip-pass` may leave out: rewrites whose input every
/// later pass and both targets also take, so that a step with and without
/// one can be compared (their results are the same up to the rounding the
/// pass documents).
llvm::ArrayRef<llvm::StringRef> pipelineSkippable();

/// Whether `options.stopAfter` names a pass that runs before `part`.
bool pipelineStopsBefore(PipelinePart part, const PipelineOptions &options);

/// Registers the dialects every ampc tool loads.
void registerAllDialects(mlir::DialectRegistry &registry);

} // namespace ampc

#endif // AMPC_TRANSFORMS_PASSES_H
