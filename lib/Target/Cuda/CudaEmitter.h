//===- CudaEmitter.h - the CUDA target's emitter, by op family --*- C++ -*-===//
//
// The CUDA emitter's class, shared by its files: CudaEmitter.cpp (launches,
// arguments, the dispatch by op family, the library), CudaGemm.cpp,
// CudaDataMovement.cpp, CudaNormalization.cpp, CudaReduction.cpp,
// CudaElementwise.cpp, CudaTraining.cpp, CudaOptimizer.cpp and
// CudaWindow.cpp. Private to lib/Target/Cuda.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_LIB_TARGET_CUDA_CUDAEMITTER_H
#define AMPC_LIB_TARGET_CUDA_CUDAEMITTER_H

#include "ampc/Analysis/KernelGeometry.h"
#include "ampc/Target/LibraryEmitter.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <string>

namespace ampc::cudagen {

using llvm::ArrayRef;
using llvm::SmallVector;
using llvm::StringRef;
using mlir::BlockArgument;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::Type;
using mlir::Value;
using mlir::ValueRange;
namespace func = mlir::func;
using namespace ampc::emit;

/// Row kernels (a reduction's elements per output, a softmax or
/// layer-norm row) run a warp or a block per row (cudaRowParallelism,
/// KernelGeometry.h). The grid of a block per row is the row count, of a
/// warp per row the row count over kWarpsPerBlock, at most kMaxRowBlocks
/// (the kernels loop over the rest).
constexpr int64_t kWarpsPerBlock = 8;
constexpr int64_t kMaxRowBlocks = int64_t(1) << 16;

/// The cudaDataType of a GEMM operand, or "" for a type cuBLASLt does not
/// multiply.
inline StringRef cudaDataType(Type t) {
  if (t.isF16()) return "CUDA_R_16F";
  if (t.isBF16()) return "CUDA_R_16BF";
  if (t.isF32()) return "CUDA_R_32F";
  if (t.isF64()) return "CUDA_R_64F";
  return "";
}

/// The codec the templated kernels read and write `t` with.
inline std::string codec(Type t) { return codecName(t, "ampc::cuda"); }

/// A `ampc::cuda::Strided` literal: `dims` with `strides`.
inline std::string strided(ArrayRef<int64_t> dims, ArrayRef<int64_t> strides) {
  return llvm::formatv("ampc::cuda::Strided{{{0}, {1}, {2}}", dims.size(), list(dims),
                 list(strides))
      .str();
}

/// A multi-tensor list's firstBlock initialiser for tensors of `sizes`
/// elements ("{0, b0, b0 + b1, ...}", cudaListBlocks each); `grid` gets the
/// list's blocks (its 1-D grid).
inline std::string firstBlocks(ArrayRef<int64_t> sizes, int64_t &grid) {
  std::string text = "{0";
  grid = 0;
  for (int64_t n : sizes) {
    grid += ampc::emit::cudaListBlocks(n);
    text += ", " + std::to_string(grid);
  }
  return text + "}";
}

class CudaEmitter : public ampc::LibraryEmitter {
public:
  using LibraryEmitter::LibraryEmitter;

private:
  StringRef targetName() const override { return "cuda"; }
  StringRef unsupportedOpHint() const override {
    return " (use --target=cpu)";
  }
  ampc::KernelTarget kernelTarget() const override {
    return ampc::KernelTarget::Cuda;
  }
  bool constantInState(Operation *) const override { return true; }
  std::string load(Type t, const std::string &e) const override {
    if (t.isF16()) return "ampc::cuda::loadF16(" + e + ")";
    if (t.isBF16()) return "ampc::cuda::loadBf16(" + e + ")";
    if (t.isInteger(1)) return "(" + e + " != 0)";
    return e;
  }
  std::string store(Type t, const std::string &e) const override {
    if (t.isF16()) return "ampc::cuda::storeF16(" + e + ")";
    if (t.isBF16()) return "ampc::cuda::storeBf16(" + e + ")";
    return "static_cast<" + storageType(t).str() + ">(" + e + ")";
  }
  std::string hostStateSize() const override {
    return "sizeof(ampc::cuda::Context)";
  }
  std::string synchronizeFunction() const override {
    return "synchronizeState";
  }
  std::string deviceFunctions(bool training) const override {
    return training ? "trainStepDevice, inferDevice, memoryOf, waitStream"
                    : "nullptr, inferDevice, memoryOf, waitStream";
  }
  void beginFunction(func::FuncOp f) override {
    inTrainStep = f.getName() == "train_step" && isTraining(f);
    planInPlace(f);
  }
  std::optional<int64_t> inPlaceOffset(Value v) const override {
    if (auto it = inPlace.find(v); it != inPlace.end())
      return it->second;
    return std::nullopt;
  }
  void emitStore(Operation *op, llvm::raw_ostream &body) override;
  void emitArgument(unsigned index, BlockArgument arg,
                    llvm::raw_ostream &body) override;
  void emitReturn(unsigned index, Value v, llvm::raw_ostream &body) override;
  LogicalResult emitLibrary(func::FuncOp forward, func::FuncOp trainStep,
                            StringRef inferBody, StringRef stepBody) override;

  /// `where` of the error macros: the node's description.
  std::string where(Operation *op) {
    return "\"" + cString(nodeDescription(op)) + "\"";
  }
  /// `kernel` (ampc::cuda::kernel<templateArgs>) over `rows` rows of
  /// `length` elements as the op's recorded parallelism says (its
  /// `ampc.launch`): a thread per row (kernel), a warp per row
  /// (kernelByWarp) or a block per row (kernelByBlock). Returns the grid ("" for a thread per row).
  std::string launchRows(Operation *op, StringRef kernel,
                         StringRef templateArgs, int64_t rows, int64_t length,
                         const std::string &args, llvm::raw_ostream &body);
  /// AMPC_GUARD for each planned result of `op`, before a launch that
  /// writes them (ampc.guard_bytes on the function; none without it).
  void emitGuards(Operation *op, llvm::raw_ostream &body);
  /// A launch of `kernel` over `count` threads (grid-stride) and its check.
  /// `threads`: the block size (default ampc::cuda::kThreads).
  void launch(Operation *op, StringRef kernel, int64_t count,
              const std::string &args, llvm::raw_ostream &body,
              StringRef grid = "", StringRef threads = "");
  /// A cooperative launch of `kernel` (ampc::cuda::launchCooperative: its
  /// blocks all resident, for ampc::cuda::gridSync) of as many blocks as
  /// the device holds at once, at most `maxBlocks` (and kMaxRowBlocks),
  /// and its check. The kernel loops over its work by gridDim.
  void launchCooperative(Operation *op, StringRef kernel, int64_t maxBlocks,
                         const std::string &args, llvm::raw_ostream &body,
                         StringRef threads);
  /// What launch and launchCooperative write: ampc::cuda::`launcher`.
  void emitLaunch(Operation *op, StringRef launcher, StringRef kernel,
                  StringRef grid, StringRef threads, const std::string &args,
                  llvm::raw_ostream &body);
  /// A device error code whose message names the node; the kernel argument
  /// pair "error, code".
  std::string deviceError(Operation *op, StringRef what);
  /// A generated kernel for `ops` (elementwise, in order, the last one
  /// computing `output`) over the elements of `output`, and its launch.
  LogicalResult emitElementwise(ArrayRef<Operation *> ops, ValueRange inputs,
                                ValueRange arguments, ValueRange yielded,
                                ValueRange outputs,
                                llvm::raw_ostream &body) override;
  LogicalResult emitMatmul(Operation *op, llvm::raw_ostream &body) override;
  /// Leading dimensions of row-major A, B and D as stored
  /// (ampc.batched_gemm); 0: packed rows.
  struct LeadingDims {
    int64_t a, b, d;
  };
  /// The ReLU bit mask of an ampc.gemm's RELU_AUX / DRELU epilogue: its
  /// pointer and its bits per row (cuBLASLt's EPILOGUE_AUX_LD).
  struct ReluMask {
    std::string pointer;
    int64_t bits;
  };
  /// One cuBLASLt call (row-major operands).
  void emitGemm(Operation *op, bool ta, bool tb, int64_t m, int64_t n,
                int64_t k, int64_t batch, int64_t strideA, int64_t strideB,
                int64_t strideD, Type ab, Type d, float alpha, float beta,
                StringRef epilogue, const std::string &a, const std::string &b,
                const std::string &out, const std::string &bias,
                llvm::raw_ostream &body, LeadingDims ld = {0, 0, 0},
                const ReluMask &mask = {});
  void emitStrided(Operation *op, Value input, Value output,
                   ArrayRef<int64_t> strides, int64_t base,
                   llvm::raw_ostream &body);
  // The op families, one file each (LibraryEmitter::emitKernelOp
  // dispatches).
  /// Transpose, Slice, SliceGrad, Concat, Gather, GatherGrad, Shape,
  /// Scatter and TopK (CudaDataMovement.cpp).
  LogicalResult emitDataMovement(Operation *op, llvm::raw_ostream &body) override;
  /// Softmax, LogSoftmax, LayerNormalization and its adjoint
  /// (CudaNormalization.cpp).
  LogicalResult emitNormalization(Operation *op, llvm::raw_ostream &body) override;
  /// The reductions, GlobalAveragePool and the losses (CudaReduction.cpp).
  LogicalResult emitReduction(Operation *op, llvm::raw_ostream &body) override;
  /// Dropout (CudaElementwise.cpp).
  LogicalResult emitDropout(Operation *op, llvm::raw_ostream &body) override;
  /// A `const int64_t *` to the training step Dropout's masks are drawn
  /// for (ampc.step in the device state), or `nullptr` (step 0) in a
  /// library without an optimizer.
  std::string trainingStep() const;
  /// The reductions and GlobalAveragePool.
  void emitReduce(Operation *op, llvm::raw_ostream &body);
  /// SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss.
  void emitLoss(Operation *op, llvm::raw_ostream &body);
  LogicalResult emitTrainingOp(Operation *op,
                               llvm::raw_ostream &body) override;
  /// Convolutions and their adjoints: one cuDNN call each, or im2col +
  /// cuBLASLt, col2im where cuDNN cannot take them (cudnnConvolves,
  /// recorded as `cudnn`).
  LogicalResult emitConvolution(Operation *op, llvm::raw_ostream &body) override;
  /// The cuDNN call of `op` (its plan in the library's table of
  /// convolutions, made at init); `beta` 1: Y holds the bias.
  void emitCudnnConvolution(Operation *op, const ConvGeometry &geometry,
                            float beta, llvm::raw_ostream &body);
  /// The library's convolutions: each ampc::cuda::Convolution literal and
  /// the node it is first called for (ampc::cuda::initConvolutions).
  SmallVector<std::pair<std::string, std::string>> convolutions;
  /// Pooling, batch normalisation and their adjoints.
  LogicalResult emitWindowOp(Operation *op, llvm::raw_ostream &body) override;
  /// Fused attention and its adjoint (CudaAttention.cpp).
  LogicalResult emitAttention(Operation *op, llvm::raw_ostream &body) override;
  /// `g` as a `ampc::cuda::Window` literal.
  std::string window(const WindowGeometry &g);

  std::string kernels;
  unsigned kernelCount = 0;
  SmallVector<std::string> deviceErrors = {""};
  // The in-place step (CudaOptimizer.cpp).
  /// Decides, for `f`, which stored results are written in place into the
  /// slot their store targets (inPlace) and which optimizer updates run as
  /// one multi-tensor launch (fusedAt, fusedUpdates, folded).
  void planInPlace(func::FuncOp f);
  /// The one multi-tensor launch of fusedUpdates, at fusedAt.
  LogicalResult emitFusedOptimizer(Operation *op, llvm::raw_ostream &body);
  /// Results written in place: the state offset of the slot.
  llvm::DenseMap<Value, int64_t> inPlace;
  /// The optimizer updates of the fused launch, in order, each with the
  /// results of the casts (FP16/BF16 weight copies) it writes.
  SmallVector<std::pair<Operation *, SmallVector<Value>>> fusedUpdates;
  /// The op the fused launch replaces (the first update); null: none.
  Operation *fusedAt = nullptr;
  /// Ops the fused launch does (the other updates and the casts): they emit
  /// nothing.
  llvm::DenseSet<Operation *> folded;
  /// Whether the function being written is the training step (its output 0
  /// is the loss, delivered asynchronously).
  bool inTrainStep = false;
  /// The training step's inputs, their staging offsets and bytes
  /// (ampc::cuda::stageInputs copies them before the step's graph), and
  /// the loss's size (emitArgument, emitReturn).
  SmallVector<std::pair<int64_t, int64_t>> stepInputs;
  int64_t stepLossBytes = 0;
};

} // namespace ampc::cudagen

#endif // AMPC_LIB_TARGET_CUDA_CUDAEMITTER_H
