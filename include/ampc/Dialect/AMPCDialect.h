//===- AMPCDialect.h - the ampc dialect and its ops -------------*- C++ -*-===//

#ifndef AMPC_DIALECT_AMPCDIALECT_H
#define AMPC_DIALECT_AMPCDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/IR/TypeUtilities.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace mlir {
class PatternRewriter; // Dropout's canonicalize (lib/Dialect/AMPCOps.cpp)
} // namespace mlir

#include "ampc/Dialect/AMPCTraits.h"
#include "ampc/Dialect/AMPCOpsDialect.h.inc"
#include "ampc/Dialect/AMPCEnums.h"
#define GET_ATTRDEF_CLASSES
#include "ampc/Dialect/AMPCAttrs.h.inc"
#include "ampc/Dialect/AMPCInterfaces.h.inc"

#define GET_OP_CLASSES
#include "ampc/Dialect/AMPCOps.h.inc"

namespace ampc {

//===----------------------------------------------------------------------===//
// Discardable attributes. The passes record facts on ops, functions and the
// module under these names; AMPCDialect::verifyOperationAttribute (and the
// region argument/result verifiers) check every `ampc.*` attribute, so a
// misspelt or malformed one is an error wherever the IR comes from.
//===----------------------------------------------------------------------===//

/// Unit attribute on the casts the compiler inserted (by precision
/// assignment, or as the adjoint of a cast in the backward pass); a user's
/// own ONNX Cast never carries it and is never removed.
constexpr llvm::StringLiteral kAutocastAttr = "ampc.autocast";
/// On every op precision assignment decided: a PrecisionDecisionAttr,
/// `#ampc.precision<category = allow, compute = f16, rule = "allow list">`.
constexpr llvm::StringLiteral kPrecisionAttr = "ampc.precision";
/// Unit attribute on the constant ampc-autodiff seeds the backward with.
constexpr llvm::StringLiteral kLossSeedAttr = "ampc.loss_seed";
/// On an `ampc.parameter` that does not train (no gradient, no optimizer
/// state): unit, or a string saying why ("--freeze backbone.*", "no
/// gradient reaches it", "a quantization scale").
constexpr llvm::StringLiteral kFrozenAttr = "ampc.frozen";
/// Unit attribute on an `ampc.state` that is a buffer of the model (torch's
/// word): state the step updates that is neither trained nor the
/// optimizer's, such as BatchNorm's running statistics and batch counter.
/// The library lists buffers for state_dict() (ModelAbi.h, buffer_states).
constexpr llvm::StringLiteral kBufferAttr = "ampc.buffer";
/// Unit attribute of the i64 constant (the batch size) ampc-attach-loss
/// builds its row mask from (issue 34, item 6); ampc-attach-optimizer
/// makes it a load of the state ampc.batch_rows in @train_step.
constexpr llvm::StringLiteral kBatchRowsAttr = "ampc.batch_rows";
/// Module attribute (a string): why a partial batch cannot be trained, ""
/// when it can (set by ampc-attach-loss with partial-batches).
constexpr llvm::StringLiteral kPartialBatchesAttr = "ampc.partial_batches";
/// Op attribute (ampc-plan-memory): `array<i64>`, one arena offset per
/// result, -1 for results without a buffer of their own.
constexpr llvm::StringLiteral kOffsetsAttr = "ampc.offsets";
/// Function attribute (ampc-plan-memory): the arena's size in bytes (i64).
constexpr llvm::StringLiteral kArenaBytesAttr = "ampc.arena_bytes";
/// Op attribute (ampc-plan-memory): `array<i64: offset, bytes>`, the arena
/// block of scratch memory the op's kernels use while it runs
/// (ampc::emit::scratchLayout); only on ops that need some.
constexpr llvm::StringLiteral kScratchAttr = "ampc.scratch";
/// Function attribute (ampc-plan-memory): i64, the arena offset of the
/// 8-byte slot where a kernel that fails at run time (a label or index out
/// of range) leaves its error. The same offset in every function, reserved
/// before any buffer, so no function's buffers overwrite it.
constexpr llvm::StringLiteral kErrorSlotAttr = "ampc.error_slot";
/// On an ampc.all_reduce_start (ampc-insert-all-reduce): the number of ops
/// of the step between it and the waits, the work its communication
/// overlaps (a non-negative i64).
constexpr llvm::StringLiteral kOverlapAttr = "ampc.overlap";
/// On a training-mode ampc.batch_normalization or ampc.batch_norm_grad of
/// a data-parallel step (ampc-sync-batch-norm, `--sync-batchnorm`): the
/// communicator request number (a non-negative i64) of the all-reduce
/// that makes its statistics, or its backward's sums, those of all ranks.
constexpr llvm::StringLiteral kSyncRequestAttr = "ampc.sync_request";
/// Function attribute (ampc-plan-memory with stage-inputs, the CUDA
/// target): `array<i64>`, the arena offset of each argument's staging
/// buffer (the device copy of the host input).
constexpr llvm::StringLiteral kInputOffsetsAttr = "ampc.input_offsets";
/// Op attribute (ampc-assign-accumulation) on every Accumulating op: the
/// type it sums or compares in, f32 or f64 (a TypeAttr).
constexpr llvm::StringLiteral kAccumulateAttr = "ampc.accumulate";
/// Op attribute (ampc-assign-launch-geometry): a dictionary, the target's
/// launch decisions for the op (ampc::emit::launchKeys in
/// KernelGeometry.h lists them), which the plan and the emitters read.
constexpr llvm::StringLiteral kLaunchAttr = "ampc.launch";
/// Buffers of the memory plan start at multiples of this many bytes.
constexpr int64_t kBufferAlignment = 64;
/// Function attribute (ampc-plan-memory with guard-bytes, the CUDA
/// target): i64, the bytes at least that the plan leaves unused after every
/// result's buffer, so that a kernel writing past the end of a result
/// writes no other tensor, and the CUDA execution on the CPU can see it
/// (a guard the emitter declares before each launch, AMPC_GUARD).
constexpr llvm::StringLiteral kGuardBytesAttr = "ampc.guard_bytes";
/// Module attributes the target emitters describe the step with: the
/// LossScalingModeAttr, the OptimizerKindAttr (never `none`) and the
/// hyperparameters as "name=value ..." text.
constexpr llvm::StringLiteral kLossScalingAttr = "ampc.loss_scaling";
constexpr llvm::StringLiteral kOptimizerAttr = "ampc.optimizer";
constexpr llvm::StringLiteral kHyperparametersAttr = "ampc.hyperparameters";
/// Tensor Core shapes (issue 37 item 11): `ampc.gemm_shape`, the decision
/// of ampc-pad-gemms on an ampc.gemm (a string `--report` lists);
/// `ampc.padding`, the unit mark of the ampc.concat / ampc.slice it adds;
/// `ampc.alignment`, ampc-gemm-alignment's dictionary {m, n, k: array<i64:
/// dim, alignment>, needs: i64} on an ampc.gemm, batched_gemm or matmul.
constexpr llvm::StringLiteral kGemmShapeAttr = "ampc.gemm_shape";
/// Channels-last images (issue 39, item 3): `ampc.layout`, a string on the
/// ampc.transpose / ampc.reshape / ampc.reduce_mean ampc-channels-last
/// makes, saying which image crosses the layout and why (`--report` lists
/// them).
constexpr llvm::StringLiteral kLayoutAttr = "ampc.layout";
constexpr llvm::StringLiteral kPaddingAttr = "ampc.padding";
constexpr llvm::StringLiteral kAlignmentAttr = "ampc.alignment";
/// Function argument and result attribute: the ONNX name of an input or
/// output (a string).
constexpr llvm::StringLiteral kNameAttr = "ampc.name";
/// Unit attribute on the function arguments that are labels.
constexpr llvm::StringLiteral kLabelAttr = "ampc.label";
/// Argument attribute (ampc-input-precision, `--input-precision=auto`): on
/// each f32 input it looked at, a string saying why the input has the
/// type it has ("every use is an autocast to f16", "node 'add' (Add)
/// reads it in f32").
constexpr llvm::StringLiteral kInputPrecisionAttr = "ampc.input_precision";
/// Function result attribute (ampc-autodiff): the `ampc.parameter` whose
/// gradient the result is (a flat symbol reference; the result has the
/// parameter's type).
constexpr llvm::StringLiteral kGradientOfAttr = "ampc.gradient_of";

/// String attribute on a Softmax that ampc-fuse-attention left unfused:
/// the node where the attention pattern broke and why (`--report` prints
/// it).
constexpr llvm::StringLiteral kAttentionUnfusedAttr = "ampc.attention_unfused";
/// On an ampc.attention (ampc-fuse-attention): the bytes of score-sized
/// buffers ([B, H, Sq, Sk]) the unfused graph would have materialised per
/// step, as the report prints them (a non-negative i64).
constexpr llvm::StringLiteral kAttentionSavesAttr = "ampc.attention_saves";
/// On an ampc.attention (ampc-fuse-attention) whose Q, K and V the model
/// held as [B·H, S, D] (nn.MultiheadAttention): batch and heads are one
/// dimension there, and the report says so instead of "batch 1" (unit).
constexpr llvm::StringLiteral kAttentionMergedHeadsAttr =
    "ampc.attention_merged_heads";

/// "node 'NAME' (OpType)" for the ONNX node an op came from (its NameLoc
/// and the importer's op type); the ampc op name where the location says
/// nothing. Messages name ops by it, and Dropout's mask seed hashes it.
std::string nodeDescription(mlir::Operation *op);

/// Normalises an ONNX axis (negative counts from the end) into [0, rank);
/// returns std::nullopt when it is out of range.
std::optional<int64_t> normalizeAxis(int64_t axis, int64_t rank);

/// Multidirectional (numpy) broadcast of shapes; std::nullopt when two
/// dimensions differ and neither is 1.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<llvm::ArrayRef<int64_t>> shapes);

/// Whether `narrow` is an FP16 or BF16 tensor of FP32 tensor `wide`'s
/// shape: the type a LayerNorm's Y may be written in and a
/// layer_norm_grad's dY and an unscale's gradient read in, in place of a
/// cast (ampc-fold-casts).
bool isSixteenBitOfF32(mlir::Type wide, mlir::Type narrow);

/// The bits of each row of a row-major [m, n] GEMM result's ReLU mask (an
/// ampc.gemm `relu_aux` result, cuBLASLt's RELU_AUX): n rounded up to a
/// multiple of 128, cuBLASLt's rule for CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD
/// (in bits). The mask's type: i8 of shape [m, bits / 8].
int64_t reluMaskBits(int64_t n);
mlir::RankedTensorType reluMaskType(mlir::MLIRContext *ctx, int64_t m,
                                    int64_t n);

/// ampc.attention's operands: the logical [b, h, s, d] shape of a 4-D
/// tensor stored row-major with `physical` shape under `perm` (perm[l] =
/// the physical dimension holding logical dimension l), and the logical
/// dimensions' strides in elements.
llvm::SmallVector<int64_t, 4>
attentionLogicalShape(llvm::ArrayRef<int64_t> physical,
                      llvm::ArrayRef<int64_t> perm);
llvm::SmallVector<int64_t, 4>
attentionLogicalStrides(llvm::ArrayRef<int64_t> physical,
                        llvm::ArrayRef<int64_t> perm);
/// The physical shape that stores logical shape `logical` under `perm`.
llvm::SmallVector<int64_t, 4>
attentionPhysicalShape(llvm::ArrayRef<int64_t> logical,
                       llvm::ArrayRef<int64_t> perm);

} // namespace ampc

#endif // AMPC_DIALECT_AMPCDIALECT_H
