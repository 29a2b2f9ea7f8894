//===- KernelGeometry.h - op geometry for both targets' kernels -*- C++ -*-===//
//
// The numbers a kernel call needs besides its buffers: sizes, strides,
// windows, kept and reduced dimensions, the outer/axis/inner split of a
// softmax or a normalisation, the parts of a Concat, a loss's operands. The
// CPU and CUDA kernels take the same geometry, so it is computed here once
// per op, from the op, and the emitters only print it. Matrix
// multiplication (Gemm, MatMul) is not described here: its emitters decide
// their own layouts.
//
// Also here, because the memory plan (ampc-plan-memory) needs them before
// any emitter runs: the accumulation type an op carries
// (ampc-assign-accumulation) and the scratch memory each op's kernels use
// on each target (scratchLayout), which the plan places in the arena.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TARGET_KERNELGEOMETRY_H
#define AMPC_TARGET_KERNELGEOMETRY_H

#include "ampc/Dialect/AMPCEnums.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Operation.h"
#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

namespace ampc::emit {

/// Shapes and strides.
mlir::RankedTensorType tensorOf(mlir::Value v);
mlir::Type elementOf(mlir::Value v);
int64_t product(llvm::ArrayRef<int64_t> dims);
llvm::SmallVector<int64_t> rowMajorStrides(llvm::ArrayRef<int64_t> shape);
/// Row-major strides of `shape`, placed at the end of the index space of
/// `out`, 0 along dimensions of size 1 that broadcast.
llvm::SmallVector<int64_t> broadcastStrides(llvm::ArrayRef<int64_t> shape,
                                            llvm::ArrayRef<int64_t> out);

/// The C++ type an Accumulating op sums in: "float" or "double", from its
/// `ampc.accumulate` (ampc-assign-accumulation). Ops without one (the
/// emitters refuse modules where an Accumulating op lacks it) get "float".
llvm::StringRef accumulation(mlir::Operation *op);
/// Bytes of one element of accumulation(op).
int64_t accumulationBytes(mlir::Operation *op);
/// Whether `op` (a conv, pool, BatchNormalization or an adjoint of one)
/// has `channels_last`: its data tensors NHWC, a conv's weight OHWI.
bool isChannelsLast(mlir::Operation *op);


/// A shape seen as outer x size x inner around one axis.
struct AxisSplit {
  int64_t outer, size, inner;
};
AxisSplit splitAt(llvm::ArrayRef<int64_t> shape, int64_t axis);
/// Softmax and LogSoftmax: their input split at their axis.
AxisSplit softmaxGeometry(mlir::Operation *op);

/// Elements read (or written) at `offset + Σ index[d] * strides[d]` for
/// each multi-index of `dims`.
struct StridedView {
  llvm::SmallVector<int64_t> dims, strides;
  int64_t offset = 0;
};
/// Transpose: its output's elements in its input. Slice: its output's
/// elements in its input (a negative step is a negative stride).
/// SliceGrad: where its gradient's elements go in its output.
StridedView stridedView(mlir::Operation *op);

/// A reduction's dimensions split into those kept (in output order) and
/// those reduced, each with its input strides. ReduceSum, ReduceMean,
/// ReduceMax, ReduceProd (no axes: all), and GlobalAveragePool (a mean over the
/// spatial dimensions).
struct ReduceGeometry {
  llvm::SmallVector<int64_t> keptDims, keptStrides, reducedDims,
      reducedStrides;
  /// The kernels' name of the reduction: ReduceSum, ReduceMean, ReduceMax,
  /// ReduceProd.
  llvm::StringRef kind;
  int64_t keptCount() const;
  int64_t reducedCount() const;
};
ReduceGeometry reduceGeometry(mlir::Operation *op);

/// Blocks per output of a reduction on the CUDA target: 1, or for few
/// outputs of many elements each (a loss's mean over a whole activation)
/// enough to fill the device, each summing a contiguous share of at least
/// 8,192 elements into the op's `partials` scratch before a second kernel
/// combines each output's shares in order (ampc::cuda::reducePartials,
/// reduceFinish). One block alone read 4M elements in 1.8 ms on an H200.
int64_t cudaReduceSplits(int64_t outputs, int64_t count);

/// The CUDA kernels' threads per block (ampc::cuda::kThreads), the blocks a
/// grid-stride kernel over `n` elements launches (ampc::cuda::blocks), and
/// the tensors of one multi-tensor list (ampc::cuda::kMaxTensors).
constexpr int64_t kCudaThreads = 256;
constexpr int64_t kCudaMaxTensors = 256;
inline int64_t cudaBlocks(int64_t n) {
  return n < 1 ? 1 : (n + kCudaThreads - 1) / kCudaThreads;
}
/// A multi-tensor kernel's (unscale, clipping, the optimizer) blocks for a
/// tensor of `n` elements: each block covers kCudaListBlockElements
/// consecutive elements (ampc::cuda::kListBlockElements), and a list's
/// grid is the sum over its tensors, so no block idles (a grid of the
/// largest tensor's blocks for every tensor left most of them idle).
constexpr int64_t kCudaListBlockElements = 2048;
inline int64_t cudaListBlocks(int64_t n) {
  return n < 1 ? 1 : (n + kCudaListBlockElements - 1) / kCudaListBlockElements;
}
/// The partial sums of squares clipping's multi-tensor pass writes over
/// `grads` (one type): lists of kCudaMaxTensors, cudaListBlocks of each
/// tensor, a partial per block (ampc::cuda::sumOfSquares), added in order
/// by one block (sumPartials).
int64_t cudaClipPartials(mlir::ValueRange grads);
/// Whether the CUDA target's SoftmaxCrossEntropyLoss `op` writes its
/// log-probabilities once, into log_prob, and reads them there for the
/// loss: log_prob's element type is the compute type (FP32 or FP64, stored
/// exactly). Otherwise they go to scratch in C too.
bool cudaLossReadsLogProb(mlir::Operation *op);

/// The window of a conv or pool over spatial dimensions (N, C, spatial...,
/// or N, spatial..., C with `channels_last`) of the forward op, whichever
/// op of the family this is: begin/end pads and strides/dilations
/// defaulted to 0 and 1. `planes` is N * C of the forward input;
/// `channels` 0 for NCHW, C for channels-last (the CUDA pool kernels'
/// `channels`).
struct WindowGeometry {
  llvm::SmallVector<int64_t> in, out, kernel, strides, padBegin, padEnd,
      dilations;
  int64_t planes = 0;
  int64_t channels = 0;
  size_t rank() const { return in.size(); }
  int64_t inSize() const;
  int64_t outSize() const;
  int64_t kernelSize() const;
  /// A 1x1 window of stride 1 without padding: a plane is its own im2col
  /// matrix (the kernels' isDirectWindow).
  bool isIdentity() const;
};
/// Conv, ConvBackwardData, ConvBackwardWeight, MaxPool, AveragePool,
/// MaxPoolGrad and AveragePoolGrad (the forward's window).
WindowGeometry windowGeometry(mlir::Operation *op);

/// A convolution or one of its adjoints in the forward Conv's terms: X (n,
/// c, in...), W (m, c/group, kernel...), Y (n, m, out...), whichever of
/// them the op reads or writes; with `channels_last` (window.channels
/// non-zero) X (n, in..., c), W (m, kernel..., c/group), Y (n, out..., m).
struct ConvGeometry {
  mlir::Value input, weight, output;
  int64_t n, channels, filters, group;
  WindowGeometry window;
};
ConvGeometry convGeometry(mlir::Operation *op);
/// Whether the CUDA target runs `op` (a conv or one of its adjoints) as one
/// cuDNN call (CudaGemm.cpp): 1 to 3 spatial dimensions, pads equal at
/// both ends (cuDNN's legacy descriptors have one pad per dimension), the
/// output as long as cuDNN's formula makes it, the accumulation FP32 (FP64
/// for f64 data) and every tensor non-empty and under 2^31 elements
/// (cuDNN's positive int dimensions). The rest keeps im2col + cuBLASLt, col2im.
bool cudnnConvolves(mlir::Operation *op);
/// The workspace the memory plan gives a cuDNN convolution call (its
/// `ampc.launch` `workspace`, a scratch slot): the bytes of its largest
/// tensor, at least kCudnnWorkspaceFloor and at most
/// kCudnnWorkspaceCeiling. The library's init takes the algorithm cuDNN
/// ranks first among the deterministic ones and runs it in this slot when
/// its workspace fits, in one workspace allocated beside the arena when
/// not (docs/design.md, "The convolutions' workspace in the memory plan").
int64_t cudnnWorkspaceBudget(mlir::Operation *op);
constexpr int64_t kCudnnWorkspaceFloor = int64_t(1) << 20;
constexpr int64_t kCudnnWorkspaceCeiling = int64_t(256) << 20;
/// How many images the CPU target's conv and conv_backward_data put side
/// by side in one GEMM (CpuKernels.h, conv): 1 where an image's output
/// plane has at least kCpuConvNarrowPlane positions (a wide enough GEMM;
/// more images only grow the columns past the caches), else about
/// kCpuConvChunkColumns columns' worth, spread evenly over the batch.
/// conv_backward_weight always takes one (docs/design.md, "CPU
/// convolutions").
inline constexpr int64_t kCpuConvNarrowPlane = 128;
inline constexpr int64_t kCpuConvChunkColumns = 512;
int64_t cpuConvImagesPerGemm(mlir::Operation *op);

/// Concat: each input is a block of `block` elements per outer index, at
/// `offset` within the output's row of `row` elements.
struct ConcatPart {
  mlir::Value input;
  int64_t block, offset;
};
struct ConcatGeometry {
  int64_t outer, row;
  llvm::SmallVector<ConcatPart> parts;
};
ConcatGeometry concatGeometry(mlir::Operation *op);
/// Whether `op` is a concat of one tensor and zeros after it (the second
/// operand a +0 splat constant, or an expand of one: ampc-pad-gemms' and
/// ampc-pad-channels' padding), which the CUDA target writes in one
/// kernel that reads only the first operand (padPart).
bool concatPadsWithZeros(mlir::Operation *op);

/// Gather, GatherGrad and Scatter: the data split at the axis, and the
/// number of indices.
struct GatherGeometry {
  AxisSplit data;
  int64_t indexCount;
};
GatherGeometry gatherGeometry(mlir::Operation *op);
/// Scatter's reduction as the kernels name it (math::ScatterReduction).
llvm::StringRef scatterReductionName(mlir::Operation *op);

/// TopK: the input split at the axis, k, and whether the largest come
/// first.
struct TopKGeometry {
  AxisSplit input;
  int64_t k;
  bool largest;
};
TopKGeometry topKGeometry(mlir::Operation *op);

/// ampc.attention and its adjoint: the sizes and each tensor's logical
/// (b, h, s, d) strides in elements (ampc::cpu::AttentionShape and the
/// CUDA kernels take them), the bias's 0 along broadcast dimensions.
struct AttentionGeometry {
  int64_t batch, heads, sq, sk, d, dv;
  llvm::SmallVector<int64_t, 4> q, k, v, o, bias;
  /// Where K and V start, in elements from their operand's first (and their
  /// gradients from dK's and dV's): H and 2H heads in with `packed_qkv`
  /// (Q, K and V one operand), else 0.
  int64_t kOffset = 0, vOffset = 0;
  /// Dropout on P (ampc::math::AttentionDropout): its ratio (0: none) and
  /// its masks' seed.
  double dropoutRatio = 0;
  uint64_t dropoutSeed = 0;
};
AttentionGeometry attentionGeometry(mlir::Operation *op);

/// LayerNormalization and LayerNormGrad: `outer` rows of `size` normalised
/// elements of shape `normalized`; Scale and B broadcast to it.
struct LayerNormGeometry {
  int64_t outer, size;
  llvm::SmallVector<int64_t> normalized, scaleStrides, biasStrides;
  llvm::StringRef compute;
};
LayerNormGeometry layerNormGeometry(mlir::Operation *op);

/// BatchNormalization and BatchNormGrad: (n, channels, inner) data and the
/// type the statistics are computed in; with `channels_last` the channel
/// is the last axis: (N · spatial, C, 1).
struct BatchNormGeometry {
  int64_t n, channels, inner;
  llvm::StringRef compute;
};
BatchNormGeometry batchNormGeometry(mlir::Operation *op);

/// How ampc.unscale `op` reads its gradient `i`: (channels, spatial) of a
/// channels-last gradient (M, k..., C) under the result's (M, C, k...), for
/// math::weightCopyIndex; (0, 0) when it reads it in the result's layout.
std::pair<int64_t, int64_t> unscaleLayout(mlir::Operation *op, unsigned i);
/// Work items per channel of the CUDA target's batch statistics and their
/// adjoint's sums (ampc::cuda::batchNormTrain and batchNormGrad, a block
/// each at a time):
/// cudaReduceSplits over the channel's n · inner elements, as a power of two
/// of at most kCudaThreads whose blocks each take a node of the pairwise
/// sum's tree (every node above them has more than 64 terms).
int64_t cudaBatchNormSplits(const BatchNormGeometry &g);
/// Threads per block of those kernels and of their combines: as many as
/// the tree's nodes below the blocks need, and the channel's splits (a
/// power of two from 32 to kCudaThreads). A channel of few elements (a
/// CNN's late layers: n · inner = 32 at batch 2) is summed by one thread;
/// a block of 256 left 255 of them waiting at every barrier. The tree, and
/// so every sum's bits, is the same whatever the count: a block has at
/// least the threads the tree's cut gives work to.
int64_t cudaBatchNormThreads(const BatchNormGeometry &g);

/// SoftmaxCrossEntropyLoss (log-softmax over the classes, then the NLL),
/// NegativeLogLikelihoodLoss and NllLossGrad: `scores` of shape (n,
/// classes, inner...) are the scores, the log-probabilities, or for the
/// gradient its output; `logProb` is SoftmaxCrossEntropyLoss's optional
/// output.
struct LossGeometry {
  mlir::Value scores, labels, weights, logProb;
  ampc::Reduction reduction;
  std::optional<int64_t> ignoreIndex;
  int64_t n, classes, inner;
  llvm::StringRef compute;
};
LossGeometry lossGeometry(mlir::Operation *op);

/// How the CUDA target spreads an op's kernels over threads (issue 37,
/// item 9): an element (or output) per thread whose loops are over a
/// window or the op's own small dimension (Element), rows each reduced by a
/// warp (RowByWarp) or a block (RowByBlock), shares of few long outputs
/// over several blocks then a combining pass (Split), a thread per row for
/// rows shorter than kCudaWarpRowMinLength (RowByThread), or one thread
/// looping over a whole row or column of an activation (Serial: what is
/// left of that, listed in docs/design.md, "Row-parallel normalisation").
enum class Parallelism { Element, RowByThread, RowByWarp, RowByBlock, Split,
                         Serial };
llvm::StringRef parallelismName(Parallelism p);
/// Rows (a softmax's, a normalisation's, a reduction's elements per
/// output) of at least this many elements run a warp per row, and of at
/// least kCudaBlockRowMinLength a block per row: a mean over a whole
/// activation summed by one thread took 0.3 s per call on an H200.
constexpr int64_t kCudaWarpRowMinLength = 8;
constexpr int64_t kCudaBlockRowMinLength = 256;
/// The kernel for rows of `length` elements: RowByThread, RowByWarp or
/// RowByBlock. With `exactSum`, RowByThread below kCudaBlockRowMinLength:
/// a reduction's thread then sums in the CPU's pairwise order, bit for
/// bit (docs/design.md, "Row-parallel normalisation": a sum with
/// cancellation, a bias gradient, moves by more than the fp32 tolerance in
/// another order).
Parallelism cudaRowParallelism(int64_t length, bool exactSum = false);
/// An op's kernels on the CUDA target: how they are spread, over how many
/// rows of how many elements (0 where the op has no rows), and for Serial
/// the longest loop one thread runs over an activation.
struct KernelParallelism {
  Parallelism kind = Parallelism::Element;
  int64_t rows = 0, length = 0;
};
KernelParallelism cudaParallelism(mlir::Operation *op);

/// A layer_norm_grad with `param_grads` on the CUDA target runs a warp per
/// row (a block for rows of kCudaBlockRowMinLength or more) whatever the
/// row's length. Its row groups (warps or blocks) are the leaves of the
/// CPU's pairwise sum over the rows (math::pairwiseSum: ranges of at most
/// 64 rows), each summing its rows' shares of the Scale and B adjoints in
/// row order into the op's `partials` scratch (2 · length elements of the
/// accumulation type per group); one more kernel adds the leaves as
/// pairwiseSum does, so the adjoints are the CPU's ReduceSums bit for bit.
/// The count: the leaves, for warps rounded up to whole blocks.
int64_t cudaLayerNormGradGroups(int64_t rows, int64_t length);

/// The rows an op's kernels spread over on the CUDA target, however they
/// are spread (the rows and length of cudaParallelism; 0 where the op has
/// none): the op's geometry, which the emitters compute rather than read.
KernelParallelism cudaParallelRows(mlir::Operation *op);

/// The launch decisions above, recorded on each op by
/// ampc-assign-launch-geometry as the dictionary `ampc.launch`
/// (ampc::kLaunchAttr; docs/design.md, "Launch geometry in the IR"), so
/// the memory plan's scratchLayout and both emitters read one decision
/// instead of each making it; only that pass calls the decision functions (and
/// ampc-channels-last cudnnConvolves, a graph-level choice). Its keys, by
/// op, on the CUDA target: `parallelism` (parallelismName of
/// cudaParallelism) on softmax, normalisation, reduction and loss ops;
/// `splits` (i64) on reductions (cudaReduceSplits) and training-mode
/// batch norm and its adjoint (cudaBatchNormSplits), which also take
/// `threads` (cudaBatchNormThreads); `groups` (cudaLayerNormGradGroups) on
/// layer_norm_grad with param_grads; `log_prob` (bool,
/// cudaLossReadsLogProb) on SoftmaxCrossEntropyLoss; `partials`
/// (cudaClipPartials) on clip_grad_norm; `cudnn` (bool, cudnnConvolves) on
/// convolutions and their adjoints. On the CPU target: `images_per_gemm`
/// (cpuConvImagesPerGemm) on convolutions and their adjoints. The dialect
/// verifies the keys' types (ampc::kLaunchAttr).
/// The keys `op` takes on `target`, in the order above; none: the op has
/// no `ampc.launch`.
llvm::SmallVector<llvm::StringRef, 3> launchKeys(mlir::Operation *op,
                                                 ampc::KernelTarget target);
/// Fails with one error at `op` (hand-written IR that skipped the pass, or
/// ran it for the other target) where its `ampc.launch` lacks a key
/// launchKeys names or names no parallelism (parallelismName).
mlir::LogicalResult checkLaunchGeometry(mlir::Operation *op,
                                        ampc::KernelTarget target);
/// The recorded decisions (checkLaunchGeometry saw them): an integer key,
/// a boolean key, and the op's parallelism with its rows
/// (cudaParallelRows), Element where the op records none.
int64_t launchInt(mlir::Operation *op, llvm::StringRef key);
bool launchFlag(mlir::Operation *op, llvm::StringRef key);
KernelParallelism launchParallelism(mlir::Operation *op);

/// The scratch memory an op's kernels use while it runs: named slots, each
/// at a multiple of 64 bytes from the block's start. The memory plan gives
/// the block an arena offset (`ampc.scratch`) live only during the op, so
/// no kernel allocates inside a step; the emitters address the slots by
/// name. Which slots an op takes on each target is written once, in
/// scratchLayout, sized by the op's recorded decisions (`ampc.launch`).
class ScratchLayout {
public:
  /// Adds a slot of `count` elements of `elementBytes` each.
  void add(llvm::StringRef name, int64_t count, int64_t elementBytes);
  /// The offset of slot `name` in the block, std::nullopt for none.
  std::optional<int64_t> offset(llvm::StringRef name) const;
  int64_t bytes() const { return size; }

private:
  llvm::SmallVector<std::pair<std::string, int64_t>> slots;
  int64_t size = 0;
};
ScratchLayout scratchLayout(mlir::Operation *op, ampc::KernelTarget target);

/// Fused attention's CUDA kernels (ampc::cuda::attention,
/// CudaAttention.cuh): each block is kCudaAttentionThreads threads (4
/// warps) with `sharedBytes` of static shared memory; the forward's block
/// owns `rows` queries and steps over `keys` keys at a time (grid:
/// ceil(Sq / rows) x B*H); the backward's blocks own `rows` queries (the
/// first ceil(Sq / rows)) or `keys` keys (the next ceil(Sk / keys)), grid
/// x B*H; the pre-pass is a warp per row (ceil(B*H*Sq / 4) blocks). T is
/// FP16 or BF16 (2 bytes). The kernels' shared structs must have this
/// size (CudaAttentionTest checks it).
constexpr int64_t kCudaAttentionThreads = 128;
struct CudaAttentionGeometry {
  int64_t rows = 0, keys = 0, sharedBytes = 0;
};
CudaAttentionGeometry cudaAttentionGeometry(int64_t headDim, bool backward);

} // namespace ampc::emit

namespace ampc {
/// Whether the CUDA target's fused attention kernels take head dimensions
/// D (queries, keys) and Dv (values): both the forward and the backward,
/// so D == Dv, a multiple of 16 from 16 to 128 (the forward alone goes to
/// 256). The recognition pass leaves other attention unfused on CUDA.
inline bool cudaAttentionSupported(int64_t d, int64_t dv) {
  return d == dv && d % 16 == 0 && d >= 16 && d <= 128;
}
} // namespace ampc

#endif // AMPC_TARGET_KERNELGEOMETRY_H
