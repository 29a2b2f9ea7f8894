//===- Passes.td - ampc passes ----------------------------*- tablegen -*-===//

#ifndef AMPC_TRANSFORMS_PASSES_TD
#define AMPC_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

// Passes declared on `mlir::func::FuncOp` work on one function at a time and
// touch nothing outside it; buildPipeline (Pipeline.cpp) nests them, so they
// run on the functions in parallel. The others change symbols or several
// functions and see the whole module.
//
// Options that take one of a fixed set of words are typed by an enum of
// AMPCOps.td (ampc::OptimizerKind, ...): the enum's spellings are the
// option's values (EnumOption.h).

def DecomposeEinsumPass : Pass<"ampc-decompose-einsum", "mlir::func::FuncOp"> {
  let summary = "lower ampc.einsum to transposes, reductions and matmuls";
  let description = [{
    The importer imports ONNX `Einsum` 1:1 as `ampc.einsum`; this pass, the
    first of the pipeline, lowers each to what the rest of the pipeline
    knows: a repeated label's diagonal (transpose, reshape, strided slice),
    broadcast size-1 dimensions dropped, labels that appear once summed
    (`ampc.reduce_sum`), pairwise contractions from the left as one batched
    `ampc.matmul` each (operands transposed and reshaped to 3-D), and the
    rest summed and transposed to the output's order. The ops are built as
    the importer builds ops (`ampc::Composer`): inferred, verified and
    folded at once when their operands are constants. A contraction whose
    result would pass 2^63 elements, or an op past `max-tensor-bytes`, is an
    error at the einsum.
  }];
  let options = [
    Option<"maxTensorBytes", "max-tensor-bytes", "int64_t",
           /*default=*/"ampc::kDefaultMaxTensorBytes",
           "the largest tensor the lowering may make">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def DecomposeResizePass : Pass<"ampc-decompose-resize", "mlir::func::FuncOp"> {
  let summary = "lower ampc.resize to gathers and weighted sums per axis";
  let description = [{
    The importer imports ONNX `Resize` and `Upsample` 1:1 as `ampc.resize`
    (per-axis output sizes and scales resolved at import); this pass, right
    after ampc-decompose-einsum, lowers each to one step per resized axis,
    innermost first: nearest is an `ampc.gather` of the source positions,
    linear and cubic the sum over their 2 or 4 taps of a gather times a
    constant weight vector along the axis, plus `extrapolation_value`
    where tf_crop_and_resize reads outside its crop. Positions and weights
    follow ONNX's reference (coordinate transformation, edge-padded taps,
    nearest rounding, cubic coefficient, exclude_outside). The ops are built
    as the importer builds ops (`ampc::Composer`): inferred, verified and
    folded at once when their operands are constants. An op past
    `max-tensor-bytes` is an error at the resize.
  }];
  let options = [
    Option<"maxTensorBytes", "max-tensor-bytes", "int64_t",
           /*default=*/"ampc::kDefaultMaxTensorBytes",
           "the largest tensor the lowering may make">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def DecomposeQuantizationPass
    : Pass<"ampc-decompose-quantization", "mlir::ModuleOp"> {
  let summary = "lower ampc.quantize_linear and its kin; detect fake "
                "quantization";
  let description = [{
    The importer imports ONNX `QuantizeLinear`, `DequantizeLinear` and
    `DynamicQuantizeLinear` 1:1; this pass, after ampc-decompose-einsum
    and ampc-decompose-resize, lowers them to what the rest of the pipeline
    knows. First, a `dequantize_linear` of a `quantize_linear`'s result with
    the same scale and zero point is fake quantization (what torch exports
    for quantization-aware training): the dequantized value plus
    Where(in range, x - stop_gradient(x), 0), torch's straight-through
    gradient, and the scale's parameter is frozen (torch's observers set
    it, not its optimizer); a module pass, for that. Then each op is
    lowered: quantize_linear to div, round, add of the zero point, clip to
    the 8-bit range and cast (and where it was in range: greater_or_equal,
    less_or_equal, and), dequantize_linear to cast, sub and mul,
    dynamic_quantize_linear to reductions of x and -x and the same
    quantization. Per-axis scales and zero points are reshaped to
    broadcast along their axis. The ops are built as the importer builds
    ops (`ampc::Composer`), folded at once when their operands are
    constants.
  }];
  let options = [
    Option<"maxTensorBytes", "max-tensor-bytes", "int64_t",
           /*default=*/"ampc::kDefaultMaxTensorBytes",
           "the largest tensor the lowering may make">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def DecomposeIndexingPass
    : Pass<"ampc-decompose-indexing", "mlir::func::FuncOp"> {
  let summary = "lower the indexing ops imported 1:1 to gathers and scatters";
  let description = [{
    The importer imports ONNX `GatherElements`, `ScatterElements` (and
    `Scatter`), `GatherND`, `ScatterND`, `ReverseSequence`, `OneHot` and
    `TopK` 1:1 (`ampc.gather_elements`, `ampc.scatter_elements`,
    `ampc.gather_nd`, `ampc.scatter_nd`, `ampc.reverse_sequence`,
    `ampc.one_hot`, `ampc.top_k_values`); this pass, right after
    ampc-decompose-einsum, lowers each by a pattern of its own to what the
    rest of the pipeline knows: an `ampc.gather` or `ampc.scatter` of flat
    positions into the data viewed as rows, the positions computed by int64
    elementwise ops from the indices (negative ones wrapped, those out of
    range made positions that Gather and Scatter refuse at run time);
    `ampc.top_k` and a gather of the values for TopK; comparisons with an
    index vector and an `ampc.where` for OneHot. The ops are built as the
    importer builds ops (`ampc::Composer`): inferred, verified and folded
    at once when their operands are constants. An op past
    `max-tensor-bytes` is an error at the op.
  }];
  let options = [
    Option<"maxTensorBytes", "max-tensor-bytes", "int64_t",
           /*default=*/"ampc::kDefaultMaxTensorBytes",
           "the largest tensor the lowering may make">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FoldShapesPass : Pass<"ampc-fold-shapes", "mlir::func::FuncOp"> {
  let summary = "fold shape-computing subgraphs to constants";
  let description = [{
    Once every shape is static, the integer subgraphs that exported models
    use to compute reshape targets (ampc.shape, gather, unsqueeze, concat,
    arithmetic, where, cast, ...) are constants. This pass folds them and
    erases whatever becomes dead, so no shape computation survives into
    precision assignment or code generation. The importer folds as it
    builds; this pass is what guarantees the result for any module. It
    works on each function alone (shape ops and their constants live in
    functions; the module's parameters fold nothing).
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def WidenToF64Pass : Pass<"ampc-widen-to-f64", "mlir::ModuleOp"> {
  let summary = "make every FP32 tensor FP64 (--precision=fp64)";
  let description = [{
    Rewrites every f32 tensor type in the module to f64: function arguments
    and results, parameters and constants (values converted exactly), and
    every op result; LayerNormalization's FP32 stash becomes FP64. Used by
    `--precision=fp64`, which exists for finite-difference gradient checks
    (ampc-gradcheck): no mixed precision, every computation in double.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AttachLossPass : Pass<"ampc-attach-loss", "mlir::ModuleOp"> {
  let summary = "make the first result of @forward a scalar training loss";
  let description = [{
    Training differentiates the first result of `@forward`. When the graph
    already ends in a loss (a scalar SoftmaxCrossEntropyLoss,
    NegativeLogLikelihoodLoss, or the MSE pattern ReduceMean(Mul(d, d)) /
    ReduceMean(Pow(d, 2)) with d a Sub) that result becomes the first one
    and nothing is added. Otherwise `loss=cross_entropy` or `loss=mse`
    appends a label input named `label` (`ampc.name`) and a loss on the
    first output, computed in FP32 (f16/bf16 outputs are cast up):

    - cross_entropy: SoftmaxCrossEntropyLoss (mean) of scores (N, C, D...)
      against int64 class ids (N, D...). An output that is already a
      Softmax over axis 1 contributes its input (the logits), one that is a
      LogSoftmax over axis 1 gets NegativeLogLikelihoodLoss, so
      probabilities are never normalised twice.
    - mse: the mean over all elements of (output - label)^2, the label
      having the output's shape in f32.
    - l1, smooth_l1 (`smooth-l1-beta`), huber (`huber-delta`): the mean over all elements
      of PyTorch's l1_loss, smooth_l1_loss and huber_loss of the output and
      an f32 label of its shape.
    - bce_with_logits: PyTorch's binary_cross_entropy_with_logits (mean),
      the output being logits and the label probabilities of its shape,
      `pos-weight` broadcast along the last axis.

    Cross-entropy takes PyTorch's options: `class-weights` (one per class),
    `ignore-index` (labels equal to it count for nothing, neither in the
    sum nor in the mean's divisor), `label-smoothing` (in [0, 1]) and
    `soft-targets` (the label is class probabilities of the scores' shape
    instead of class ids). The value of each loss and its gradient are
    PyTorch's functional's at fp32 (test/Training/losses.test).

    The loss becomes result 0 (`ampc.name = "loss"`); the model's outputs
    are kept after it, so `@forward` still returns the predictions (for
    accuracy) beside the loss. `loss=none` adds nothing. The loss ops are
    located at node "ampc.loss".
  }];
  let options = [
    Option<"loss", "loss", "ampc::LossFunction",
           /*default=*/"ampc::LossFunction::CrossEntropy",
           "cross_entropy, bce_with_logits, mse, l1, smooth_l1, huber or "
           "none">,
    Option<"label", "label", "std::string", /*default=*/"\"label\"",
           "name of the label input the loss adds">,
    Option<"ignoreIndex", "ignore-index", "int64_t", /*default=*/"INT64_MIN",
           "cross_entropy: the class id that counts for nothing (default: "
           "none)">,
    Option<"labelSmoothing", "label-smoothing", "double", /*default=*/"0.0",
           "cross_entropy: PyTorch's label_smoothing, in [0, 1]">,
    ListOption<"classWeights", "class-weights", "double",
               "cross_entropy: one weight per class">,
    Option<"softTargets", "soft-targets", "bool", /*default=*/"false",
           "cross_entropy: the label is class probabilities of the scores' "
           "shape">,
    ListOption<"posWeight", "pos-weight", "double",
               "bce_with_logits: the positives' weight, one or one per "
               "class (the last axis)">,
    Option<"huberDelta", "huber-delta", "double", /*default=*/"1.0",
           "huber: where the loss turns from quadratic to linear">,
    Option<"smoothL1Beta", "smooth-l1-beta", "double", /*default=*/"1.0",
           "smooth_l1: where the loss turns from quadratic to linear">,
    Option<"partialBatches", "partial-batches", "bool", /*default=*/"false",
           "Decide whether a partial last batch trains (issue 34, item 6): "
           "record why not in the module attribute ampc.partial_batches, or "
           "mask the loss by the row count ampc-attach-optimizer makes state "
           "(ampc.batch_rows). The ampc pipeline sets it.">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AssignPrecisionPass : Pass<"ampc-assign-precision", "mlir::ModuleOp"> {
  let summary = "choose FP16/BF16/FP32 for every op and insert the casts";
  let description = [{
    Decides the compute dtype of every op that computes on floating-point
    data and inserts `ampc.cast` ops (marked `ampc.autocast`) where a value
    reaches an op in another dtype. Each decided op records its decision in
    an `ampc.precision` attribute: the compute dtype, the category and the
    rule that decided.

    `propagation=autocast` reproduces PyTorch CUDA autocast op by op from the
    precision category of each op (AMPCOps.td: allow, deny, fp32_output,
    promote, follow). `propagation=paint` colours the graph the way
    TensorFlow's auto_mixed_precision does, to need fewer casts, while every
    deny op stays in FP32. Overrides (`keep-fp32`, `force-lowp`, a `rules`
    file) beat the lists. Integer and boolean tensors, float64 tensors and a
    user's own casts are never changed; function arguments and results keep
    their types. docs/precision.md has the details. A module pass: an
    override that names nothing in any function is reported once.
  }];
  let options = [
    Option<"dtype", "dtype", "ampc::LowPrecisionType",
           /*default=*/"ampc::LowPrecisionType::F16",
           "low-precision dtype: f16, bf16, or f32 (nothing is lowered)">,
    Option<"propagation", "propagation", "ampc::Propagation",
           /*default=*/"ampc::Propagation::Autocast", "autocast or paint">,
    ListOption<"keepFp32", "keep-fp32", "std::string",
               "ops kept in FP32: op:TYPE or node:NAME">,
    ListOption<"forceLowp", "force-lowp", "std::string",
               "ops forced to low precision: op:TYPE or node:NAME">,
    Option<"rulesFile", "rules", "std::string", /*default=*/"",
           "a JSON rules file (categories, keep_fp32, force_lowp)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AssignFp8Pass : Pass<"ampc-assign-fp8", "mlir::ModuleOp"> {
  let summary = "decide which GEMMs compute in FP8 (--precision=fp8)";
  let description = [{
    `--precision=fp8` (issue 42): after ampc-assign-precision has decided
    every op as for BF16, each GEMM (ampc.gemm, ampc.matmul,
    ampc.batched_gemm) computing in BF16 gets an `ampc.fp8` attribute:
    `{format = "hybrid" | "e4m3", reason}` where it computes in FP8, or
    `{format = "bf16", reason}` where it stays BF16 because a `keep-bf16`
    rule names it, a dimension (M, N, K) is not a multiple of 16 (cuBLASLt's
    FP8 GEMMs, PyTorch's `_scaled_mm`), or M*N*K is at most `min-gemm`
    (default 2^31: 1024 x 2048 x 1024, where torchao measures FP8 at 0.80x
    of BF16). The module gets `ampc.fp8_recipe`, the delayed-scaling
    settings. A GEMM kept in FP32 by an override gets no decision.
    docs/precision.md, FP8.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"hybrid\"",
           "hybrid (E4M3 forward, E5M2 gradients) or e4m3">,
    ListOption<"keepBf16", "keep-bf16", "std::string",
               "GEMMs kept in BF16: op:TYPE or node:NAME (globs)">,
    Option<"minGemm", "min-gemm", "int64_t", /*default=*/"2147483648",
           "GEMMs with at most this many multiply-adds (M*N*K) stay BF16">,
    Option<"amaxHistory", "amax-history", "int64_t", /*default=*/"1024",
           "delayed scaling: the amax history's length">,
    Option<"margin", "margin", "int64_t", /*default=*/"0",
           "delayed scaling: scale = (fp8_max / amax) / 2^margin">,
    Option<"amaxAlgo", "amax-algo", "std::string", /*default=*/"\"max\"",
           "delayed scaling: max (over the history) or most_recent">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def InputPrecisionPass : Pass<"ampc-input-precision", "mlir::ModuleOp"> {
  let summary = "take an input in FP16/BF16 where every use casts it there";
  let description = [{
    `--input-precision=auto` (issue 37, item 2). A model input whose every
    use, through views (reshape, flatten, squeeze, unsqueeze), is an
    `ampc.autocast` cast from f32 to one 16-bit type is an input of that
    type: the caller sends the 16-bit data (half the bytes) and the step
    does not cast. The casts go, the views on the way take the 16-bit type.
    The step computes the same bits as with the FP32 input when the caller
    passes the round-to-nearest-even rounding of the data, which is what the
    casts computed.

    Runs after ampc-assign-precision, which inserted the casts. An input
    keeps one type in @forward and @train_step (the library's descriptor
    has one signature per input): it is narrowed only when it qualifies in
    each of them that exists, at the same position and name. Labels
    (`ampc.label`) never change. Every f32 input gets the argument
    attribute `ampc.input_precision`, a string saying why it takes the
    type it has ("every use is an autocast to f16", "node 'add' (Add)
    reads it in f32"), which the precision report shows.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FreezeParametersPass : Pass<"ampc-freeze-parameters", "mlir::ModuleOp"> {
  let summary = "decide which initializers train: --freeze, --trainable, "
                "and those no gradient reaches";
  let description = [{
    The trainable set is a decision in the IR: an `ampc.parameter` that
    does not train carries `ampc.frozen = "REASON"`, and ampc-autodiff
    computes no gradient for it (nor anything that only its gradient
    needs), so the optimizer keeps no state for it and never changes it;
    it stays a parameter (state_dict, checkpoints, ONNX export).

    - `freeze`: globs (`*`, `?`, `[...]`, as `--keep-fp32` node rules) over
      initializer names; a match is frozen ("--freeze PATTERN").
    - `trainable`: when given, an initializer that matches none of these
      globs is frozen ("not --trainable"). `freeze` wins over `trainable`.

    (ampc-autodiff freezes the rest that cannot train: an initializer the
    loss reaches only through comparisons, shapes, indices or `Where`
    conditions, whose gradient is structurally zero, like a causal mask.)
    A glob that matches no initializer is a warning (a misspelt name must
    not silently train the whole model). Runs before ampc-autodiff, in
    training only. `--summary` lists every frozen initializer and why.
  }];
  let options = [
    ListOption<"freeze", "freeze", "std::string",
               "initializer globs that do not train">,
    ListOption<"trainable", "trainable", "std::string",
               "initializer globs that train (the others do not)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def PadGemmsPass : Pass<"ampc-pad-gemms", "mlir::func::FuncOp"> {
  let summary = "pad a Linear's output features to Tensor Core multiples";
  let description = [{
    Issue 37, item 11 (docs/design.md, Tensor Core shapes). After precision
    assignment, before autodiff: every FP16/BF16 `ampc.gemm` whose N (output
    features) is not a multiple of 8 and whose B is a parameter's copy
    (through casts) and C absent or a bias row gets B and C padded with
    zeros (`ampc.concat` of a zero constant, marked `ampc.padding`); the
    GEMM computes N rounded up to 8 and an `ampc.slice` (marked
    `ampc.padding`) gives every reader the first N columns, so the attached
    loss, the user's outputs and the next layer see exactly what they saw.
    Parameters keep their shapes (checkpoints, state_dict, ONNX export and
    the optimizer's state are unpadded). Autodiff derives the backward from
    the padded forward: the slice's adjoint puts exact zeros in the padded
    columns of dY. Every forward GEMM gets `ampc.gemm_shape`, a string with
    M, N, K, what was padded and why each unaligned dimension was not
    (`--report` lists them). `min-n`: an N below it is left unpadded
    (`--pad-gemms=auto` uses 128: for a small head the pad and slice
    copies cost more launches than an unaligned GEMM costs time).
  }];
  let options = [
    Option<"minN", "min-n", "int64_t", /*default=*/"0",
           "leave an N below this unpadded">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def ChannelsLastPass : Pass<"ampc-channels-last", "mlir::func::FuncOp"> {
  let summary = "store a CNN's images channels-last (N, H, W, C)";
  let description = [{
    Issue 39, item 3 (docs/design.md, "Channels-last images"). After
    precision assignment, before autodiff, in a function with a 2-D
    convolution: every 2-D `ampc.conv`, `ampc.batch_normalization`,
    `ampc.max_pool` (whose Indices nothing reads) and `ampc.average_pool`
    takes `channels_last` (images (N, H, W, C), a convolution's weight
    (M, kH, kW, C/group)); a GlobalAveragePool of a channels-last image
    becomes `ampc.reduce_mean` over axes 1 and 2 with keepdims; an
    elementwise op whose image operands include a channels-last one
    computes on channels-last images (its other image operands
    transposed). Transposes, marked `ampc.layout` with what crosses and
    why, are inserted only where an image enters the region (a model
    input, a convolution's weight) or leaves it for an op without a
    channels-last form (a reshape instead where only unit dimensions
    move). The function's arguments and results keep their types.
    Autodiff then derives channels-last adjoints; ampc-attach-optimizer
    keeps a transposed weight's low-precision copy in the transposed
    layout. On for the CUDA target (`--channels-last=auto`), whose
    kernels and cuDNN calls take the layout; the CPU target's emitter
    refuses channels-last ops.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def PadChannelsPass : Pass<"ampc-pad-channels", "mlir::func::FuncOp"> {
  let summary = "pad a channels-last convolution's channels to multiples of 8";
  let description = [{
    Issue 39, item 3 (docs/design.md, "Channel counts for Tensor Cores").
    After ampc-channels-last, before autodiff: an FP16/BF16 channels-last
    `ampc.conv` of one group whose input channels C or output channels M
    are not a multiple of 8 computes on padded counts. C: X and the
    weight's low-precision copy get zero channels on their last axis
    (`ampc.concat` of an expanded zero, marked `ampc.padding`). M: the
    weight copy gets zero filters, the bias zeros, and an `ampc.slice`
    (marked `ampc.padding`) gives every reader the first M channels. The
    extra terms are exact zeros (0 x 0 added to an FP32 accumulator), the
    parameters keep their shapes, and autodiff derives the padded backward
    (the weight gradient's padding is sliced off by the concat's adjoint).
    Each convolution's decision, and the reason where it pads nothing
    (FP32, groups, depthwise), is recorded in `ampc.gemm_shape` for
    `--report`.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def GemmAlignmentPass : Pass<"ampc-gemm-alignment", "mlir::func::FuncOp"> {
  let summary = "record every GEMM's M, N, K alignment";
  let description = [{
    Issue 37, item 11. At the kernel level, after every rewrite of the
    GEMMs (epilogues, folded transposes, fused casts): each `ampc.gemm`,
    `ampc.batched_gemm` and `ampc.matmul`, forward and backward, gets
    `ampc.alignment = {m = array<i64: M, a>, n = ..., k = ..., needs = 8}`,
    `a` the largest of 16/8/4/2/1 dividing the dimension and `needs` the
    multiple Tensor Cores want for the operand type (8 for FP16/BF16, 1 for
    FP32/FP64; FP8, not supported yet, would need 16).
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def LowerMatMulPass : Pass<"ampc-lower-matmul", "mlir::func::FuncOp"> {
  let summary = "every ampc.matmul as an ampc.batched_gemm";
  let description = [{
    Issue 40, item 4. At the kernel level, after the passes that rewrite
    MatMuls (ampc-fuse-epilogues, ampc-fold-transposes, ampc-fold-casts,
    ampc-assign-accumulation) and before ampc-gemm-alignment and
    ampc-plan-memory: each remaining `ampc.matmul`, forward and backward,
    becomes an `ampc.batched_gemm` with numpy.matmul's layout written out:
    a 1-D A is one row and a 1-D B one column; m, n, k the matrices'; the
    batch the broadcast batch dimensions' product, each operand's batch
    stride its matrix size or 0 where every batch element shares it; packed
    rows (lda = k, ldb = n, ldd = n, strideD = m * n). An operand whose
    broadcast batch no single stride describes (A [2, 1, m, k] times B
    [3, k, n]) is first expanded (`ampc.expand`) to the whole batch. The
    MatMul's attributes (precision, accumulation) move to the GEMM. The
    emitters then print GEMMs only.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AutodiffPass : Pass<"ampc-autodiff", "mlir::ModuleOp"> {
  let summary = "reverse-mode autodiff: @train_step from @forward and its loss";
  let description = [{
    Builds `@train_step` beside `@forward` (which stays as it is). It takes
    `@forward`'s arguments and returns the loss (the first result of
    `@forward`, which must be a float scalar: rank 0 or one element) as a
    rank-0 f32 tensor (f64 for an f64 model), then the gradient of every
    trainable parameter the loss depends on, in the order of the
    `ampc.parameter` symbols, in the parameter's type (FP32 master weights:
    f32), each result marked `ampc.gradient_of = @name`.

    Reverse mode over the SSA graph of the precision-assigned forward: the
    loss is seeded with 1, each op's gradient rule (GradientOpInterface,
    lib/Dialect/Gradients.cpp) turns its result adjoints into operand
    adjoints, and adjoints of a value used several times are added. Backward
    ops run in the dtype of their forward op; the adjoint of a cast is the
    reverse cast, so a parameter's gradient is accumulated in FP32 at its
    load. Only values on a path from a trainable parameter to the loss get
    adjoints: integer and boolean values, non-differentiable operands
    (BatchNormalization's running statistics, class weights) and frozen
    parameters (`ampc.frozen`, unit or a reason) get none; a parameter
    that gets no gradient although nothing froze it (the loss reaches it
    only through comparisons, shapes, indices or `Where` conditions, or not
    at all) is marked `ampc.frozen = "no gradient reaches it"` with a
    note. Forward ops
    neither the loss nor a rule needs are removed from `@train_step`.

    Errors (at the op's location, naming its ONNX node): no `@forward`, a
    loss that is not a float scalar, an op on the gradient path without a
    gradient rule, a gradient through a result its rule does not
    differentiate.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def EvalForwardPass : Pass<"ampc-eval-forward", "mlir::func::FuncOp"> {
  let summary = "@forward becomes the eval-mode model";
  let description = [{
    Every inference entry of a library (`infer`, ampc-train's evaluation,
    a `--mode=infer` library) runs `@forward`, so `@forward` must be the
    model as PyTorch's `model.eval()` runs it: Dropout is the identity and
    BatchNormalization normalises with its running statistics
    (`training_mode = 0` on both; a fused attention's `dropout_ratio` 0).
    Runs after ampc-autodiff has copied the
    training-mode forward into `@train_step`, which keeps it. Tools that
    need the model exactly as exported (the ONNX node tests, the gradient
    check's finite differences) leave this pass out. It runs on each
    function and changes `@forward` only.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def RunningStatisticsPass : Pass<"ampc-running-statistics", "mlir::ModuleOp"> {
  let summary = "BatchNorm running statistics become state the step updates";
  let description = [{
    A training-mode BatchNormalization of `@train_step` whose running mean
    and variance are parameters (ONNX initializers) updates them on every
    step as torch.nn.BatchNorm does: `running = running * momentum + batch *
    (1 - momentum)` (ONNX's momentum, 1 - PyTorch's), the variance's batch
    term unbiased. The two parameters become `ampc.state` of the same name,
    type and initial value (no gradient, no optimizer, no low-precision
    copy; checkpoints hold them, the ONNX export writes them, `@forward`
    reads them in eval mode), and `@train_step` stores the op's running
    results at its end, also on a step whose optimizer update the loss
    scaler skips: torch's forward updates them before GradScaler skips
    `optimizer.step()`. A running mean named `PREFIX.running_mean` (torch's
    names) also gets the batch counter `PREFIX.num_batches_tracked`, an i64
    state the step increments. The states are marked `ampc.buffer`. Runs
    after ampc-attach-optimizer.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def InsertLossScalingPass : Pass<"ampc-insert-loss-scaling", "mlir::ModuleOp"> {
  let summary = "dynamic loss scaling of @train_step (torch.amp.GradScaler)";
  let description = [{
    With `mode=dynamic` or `mode=static`: the backward is seeded with the
    loss scale (state `ampc.loss_scale`, f32) times the seed (1; the seed
    constant stays for ampc-accumulate-gradients), so every
    gradient is scaled; one `ampc.unscale` multiplies all parameter
    gradients by (float)(1/(double)scale) in FP32 and computes `found_inf`,
    which ampc-attach-optimizer uses to skip the update. `dynamic` also
    updates the scale after each step (`ampc.update_scale`, REFERENCE.md 3:
    back off on overflow, grow after `growth-interval` finite steps, bounded
    by `min-scale`/`max-scale` when non-zero) and counts skipped steps
    (`ampc.skipped_steps`). `mode=none` changes nothing. The pipeline
    chooses dynamic for fp16 and none otherwise unless `--loss-scale` says.
  }];
  let options = [
    Option<"mode", "mode", "ampc::LossScalingMode",
           /*default=*/"ampc::LossScalingMode::Dynamic",
           "dynamic, static or none">,
    Option<"initScale", "init-scale", "double", /*default=*/"65536.0",
           "the initial (or, static, the fixed) scale">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"2.0", "">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"0.5", "">,
    Option<"growthInterval", "growth-interval", "int64_t",
           /*default=*/"2000", "">,
    Option<"minScale", "min-scale", "double", /*default=*/"0.0",
           "lower bound of the scale; 0: none">,
    Option<"maxScale", "max-scale", "double", /*default=*/"0.0",
           "upper bound of the scale; 0: none">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AttachOptimizerPass : Pass<"ampc-attach-optimizer", "mlir::ModuleOp"> {
  let summary = "turn @train_step into a whole training step";
  let description = [{
    With `kind` sgd, adam or adamw: @train_step updates every parameter it
    has a gradient for with torch.optim's rule on the FP32 master weight
    (`ampc.optimizer_update`), skipped when the loss scaler found a non-finite
    gradient, and then returns the loss only. The learning rate
    (`ampc.lr`) and the step count (`ampc.step`) are state the host can read
    and set; moments are state named after their parameter
    (NAME.momentum_buffer, NAME.exp_avg, NAME.exp_avg_sq). A weight the
    forward reads in f16/bf16 gets a low-precision copy (state NAME.f16 /
    NAME.bf16) that the step writes after the update, so the forward never
    casts weights. `clip-grad-norm` > 0 clips the unscaled gradients first.
    `kind=none` leaves @train_step returning the gradients.

    Parameter groups, as torch's `param_groups`: each of `param-groups` is
    `GLOB:KEY=X;KEY=Y...` with the keys lr, weight_decay, and the
    optimizer's own beta1, beta2, eps (adam, adamw) or momentum, dampening
    (sgd), each optional; a trained parameter takes the first group whose
    glob matches its name, the others the pass's settings. A group's learning rate is
    `ampc.lr` times X / `lr`, so that a schedule setting `ampc.lr` scales
    every group as torch's schedulers scale each base rate (exact for the
    schedules proportional to it). A group that matches no trained
    parameter is a warning.
  }];
  let options = [
    Option<"kind", "kind", "ampc::OptimizerKind",
           /*default=*/"ampc::OptimizerKind::Adamw",
           "sgd, adam, adamw or none">,
    Option<"lr", "lr", "double", /*default=*/"1.0e-3", "learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0", "sgd">,
    Option<"dampening", "dampening", "double", /*default=*/"0.0", "sgd">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false", "sgd">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "weight decay; negative: the optimizer's default (adamw 0.01, "
           "others 0)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "adam, adamw">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "adam, adamw">,
    Option<"eps", "eps", "double", /*default=*/"1.0e-8", "adam, adamw">,
    ListOption<"paramGroups", "param-groups", "std::string",
               "GLOB:lr=X;weight_decay=Y;... per group, first match wins">,
    Option<"clipGradNorm", "clip-grad-norm", "double", /*default=*/"0.0",
           "maximal global gradient norm; 0: no clipping">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AccumulateGradientsPass
    : Pass<"ampc-accumulate-gradients", "mlir::ModuleOp"> {
  let summary = "one optimizer step per N calls of @train_step";
  let description = [{
    Gradient accumulation with torch.amp.GradScaler's semantics: each call
    of `@train_step` is a micro-batch. Its backward is seeded with 1/N (the
    scale / N under loss scaling: a PyTorch loop's `scaler.scale(loss /
    N)`), and its FP32 gradients are added to accumulators (state
    NAME.accumulated_grad) before the unscale, the clipping and the
    optimizer read them, so the sum is unscaled and checked for overflow
    once. Every store ampc-insert-loss-scaling and ampc-attach-optimizer
    made (parameters, moments, low-precision copies, the step count, the
    scaler's state) writes the new value on the N-th call only and the old
    one otherwise; that call also zeroes the accumulators. A non-finite
    gradient in any micro-batch makes the sum non-finite: the optimizer
    step is skipped and the scale backs off, once. The count of
    micro-batches since the last step is state `ampc.micro_batches`, so a
    checkpoint taken between steps resumes in the middle of one. Each call
    still returns its micro-batch's loss (not divided by N). The optimizer
    and the scaler update run on every call and are discarded on the
    others (a select per stored element): N - 1 calls in N pay for an
    update they do not keep. Runs after ampc-attach-optimizer; `micro-
    batches=1` changes nothing.
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"1",
           "calls of @train_step per optimizer step">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def OptimizeCastsPass : Pass<"ampc-optimize-casts", "mlir::func::FuncOp"> {
  let summary = "one cast per value and dtype, no round trips";
  let description = [{
    Cleans up the casts that ampc-assign-precision inserted (those marked
    `ampc.autocast`; a user's own casts are kept, though inserted casts may
    reuse them):
    - casts of one value to one dtype are merged into one;
    - a cast of a cast whose first step widens exactly (f16 → f32 → f16) is
      folded: back to the original dtype it disappears, otherwise it casts
      from the original value directly;
    - casts to the type a value already has, and unused casts, are erased.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

//===----------------------------------------------------------------------===//
// Kernel-level form: what the target emitters consume
//===----------------------------------------------------------------------===//

def FuseEpiloguesPass : Pass<"ampc-fuse-epilogues", "mlir::func::FuncOp"> {
  let summary = "decide each GEMM's epilogue: bias, and a Relu folded in";
  let description = [{
    The kernel-level decision of what a GEMM library (cuBLASLt's epilogues;
    the CPU target's store loop) does while it stores a Gemm's result,
    recorded as the Gemm's `epilogue`. A C that is a row vector of the
    output's type added once (beta 1, more than one column) is the `bias`
    epilogue. A Relu that is the Gemm's only user, of the same type, is
    folded into the Gemm (`relu`, or `relu_bias` with a bias; not when C is
    added otherwise, since the sum would come after the clamp): its uses
    take the Gemm's result, so the memory plan, which runs later, keeps the
    fused output apart from the Gemm's operands like any result. Rounding to
    a 16-bit type commutes with the clamp, so the results are those of the
    separate ops bit for bit.

    With `fp32-weight-gradients` (issue 37, item 3; on in the pipeline for
    every target, the CPU reference included, since it changes the
    numbers), a weight-gradient Gemm (16-bit operands, op(A) = Aᵀ, no C)
    or a ReduceSum of a
    16-bit tensor, whose only user is the compiler's cast to FP32 (an
    `ampc.autocast` cast; a model's own Cast is semantics and stays) writes
    FP32 itself: a weight or bias gradient accumulated in FP32 without the
    rounding to 16 bits and the cast kernel. A slice between the result
    and the cast (ampc-pad-gemms' padded gradient sliced back) swaps with
    the cast first. A 2-D transpose that is then the Gemm's only user is
    folded by swapping the operands ((A B)^T = B^T A^T). GradScaler sees
    the FP32 gradients: a scaled weight gradient past FP16's range no
    longer overflows.

    With `backward` (the CUDA target), a ReduceSum over the
    leading axes of the tensor that is one operand's k-major matrix
    (op(A) = Aᵀ, or op(B) = B, through a reshape) is the bias gradient of
    that GEMM: it becomes the Gemm's second result (`bgrad_a` /
    `bgrad_b`, cuBLASLt's BGRADB / BGRADA, the operands being swapped
    there) where it is in the output's type or a cast narrows it to it
    (the epilogue's one rounding; never a widening cast), the Gemm has no
    C and alpha 1, and the sum's users come after the Gemm. Also with
    `backward`, a Relu's gradient (`relu_grad`, alpha 0) of a Gemm with a
    Relu epilogue, masking the next layer's input-gradient Gemm (read by
    nothing else), becomes that Gemm's `drelu` epilogue on the ReLU bit
    mask the forward Gemm then writes too (`relu_aux` / `relu_aux_bias`,
    cuBLASLt's RELU_AUX_BIAS and DRELU); a ReduceSum of the masked gradient
    over its rows in the Gemm's output type makes it `drelu_bgrad`
    (DRELU_BGRAD). The CPU target keeps the separate ops (its numerics are
    the reference).
  }];
  let options = [
    Option<"backward", "backward", "bool", /*default=*/"false",
           "bias-gradient epilogues (the CUDA target)">,
    Option<"fp32WeightGradients", "fp32-weight-gradients", "bool",
           /*default=*/"false",
           "GEMMs of 16-bit operands cast to FP32 write FP32">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FuseAttentionPass : Pass<"ampc-fuse-attention", "mlir::ModuleOp"> {
  let summary = "recognise softmax attention and make it one ampc.attention";
  let description = [{
    Issue 38 (docs/design.md, "Fused attention (issue 38)"). Before
    precision assignment, finds what exporters write for attention:
    MatMul(Q, Kᵀ) (Q and Kᵀ each maybe scaled by a constant, as torch's
    scaled_dot_product_attention export does), a Mul or Div by a constant
    scale, an Add of a mask or a Where(mask, -inf), Softmax over the last
    axis, maybe a Dropout whose mask nothing reads (in training mode its
    ratio and seed go to the op, which draws the same mask), MatMul(P, V);
    the Transposes that split the heads (and the one
    that merges them) become the op's perms. A mask that is a constant (or
    a frozen parameter) strictly-upper -inf triangle becomes `causal`; any
    other mask that needs no gradient becomes the additive bias. A
    Softmax where the pattern breaks keeps its graph and records why on
    `ampc.attention_unfused` (the report prints it). With `target` cuda
    only what the CUDA kernels take is fused (FP16/BF16, head dimensions
    cudaAttentionSupported accepts); the rest keeps its graph, with why.
  }];
  let options = [
    Option<"target", "target", "ampc::KernelTarget",
           /*default=*/"ampc::KernelTarget::Cpu",
           "the kernels the library is written with (cpu or cuda)">,
    Option<"training", "training", "bool", /*default=*/"false",
           "a training step is built: a mask reading a parameter that "
           "trains is not fused">,
    Option<"lowPrecision", "low-precision", "bool", /*default=*/"true",
           "the model computes in FP16/BF16 (the CUDA target's attention "
           "kernels take nothing else: FP32 attention stays unfused there)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FuseLayerNormGradPass
    : Pass<"ampc-fuse-layer-norm-grad", "mlir::func::FuncOp"> {
  let summary = "move LayerNorm's Scale and B adjoints into layer_norm_grad";
  let description = [{
    The CUDA target's LayerNorm backward as one kernel (issue 37, item 4).
    Autodiff writes the Scale adjoint as ReduceSum over the rows of
    dY·x̂ (x̂ = (X − Mean)·InvStdDev, the statistics maybe cast to X's
    type) and the B adjoint as ReduceSum of dY over the rows, beside the
    layer_norm_grad that computes dX. Where X is FP32 or FP64 and Scale
    has the normalised shape, this pass replaces the ReduceSums (after
    the op, in its block, of the normalised shape in X's type) by the
    op's `param_grads` results and erases the products only they read:
    the kernel computes each element's dY·x̂ as those ops did (the same
    two roundings), only the order of the sums differs. Run for the CUDA
    target only; the CPU target, the numerical reference, keeps the
    ReduceSums.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AssignAccumulationPass
    : Pass<"ampc-assign-accumulation", "mlir::func::FuncOp"> {
  let summary = "decide the type each accumulating op sums in";
  let description = [{
    Records on every op that sums or compares many elements per result
    (the Accumulating trait: GEMMs, convolutions, pooling, reductions,
    softmax, normalisation, losses, their gradients, the gradient norm)
    the type its kernels accumulate in, as `ampc.accumulate`: f64 when any
    of its float operands or results is f64, i64 for a ReduceSum, Mean,
    Max or Prod of signed integers and ui64 of unsigned ones (exact where
    FP32 rounds past 2^24), f32 otherwise. 16-bit data is
    thus always summed in FP32 (as cuBLASLt's CUBLAS_COMPUTE_32F and
    PyTorch's autocast kernels do) and rounded once when stored. The
    targets print what the attribute says; the memory plan sizes the
    scratch of the accumulators with it.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FoldTransposesPass : Pass<"ampc-fold-transposes", "mlir::func::FuncOp"> {
  let summary = "read and write GEMM operands through matrix layouts "
                "instead of copying transposes";
  let description = [{
    A transpose, with the reshapes around it, that only feeds GEMM operands
    (ampc.matmul, ampc.gemm; A and B) is a matrix layout the GEMM can read
    in place: a transpose flag, a leading dimension and one batch stride.
    Likewise a chain of reshapes and transposes that is a GEMM result's only
    user is a layout the GEMM can write in place (torch's attention writes
    [B*H, S, D] and transposes it to [S, B*H, D]). Each such GEMM becomes an
    ampc.batched_gemm reading the transpose's input (writing its result);
    the transposes left unused go. Not folded: a transpose with another
    user (its copy is needed anyway), batch dimensions that no single
    stride describes, a reshape that would split a transposed dimension
    across strides, a Gemm whose C is added other than as a bias, a
    result the GEMM would have to write transposed. Runs after autodiff:
    the new op has no gradient rule. Also (issue 39 item 3): a channels-last
    convolution's weight gradient (M, k..., C) transposed back to the
    weight's layout (M, C, k...), perhaps widened, and read only by
    `ampc.unscale` is read by the unscale in place (`channels_last` lists
    it; the widening cast applied before the transpose, which it commutes
    with), so no kernel transposes a weight gradient.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def PackQkvPass : Pass<"ampc-pack-qkv", "mlir::func::FuncOp"> {
  let summary = "compute an attention's Q, K and V projections as one GEMM";
  let description = [{
    Issue 37, item 3, after ampc-fold-transposes. When the Q, K and V of an
    ampc.attention ([B, S, H, D], perm 0 2 1 3) are three Linear GEMMs of
    one input with 16-bit weights and biases read from state (the
    optimizer's weight copies), the three weights and the three biases
    are laid out one after the other (ampc.load_packed_state) and one GEMM
    writes Q | K | V in each row; the attention reads them in place
    (packed_qkv). In a training step its adjoint then writes dQ | dK | dV
    the same way, one GEMM against the packed weight gives dX (the sum of
    the three dX, which the adds did before, now in the GEMM's FP32
    accumulator and rounded once) and one weight-gradient GEMM gives the
    three weight and bias gradients as its rows (ampc.subview). Six GEMMs
    of a transformer layer's step become two and the adds go. All or
    nothing per attention: anything that does not match (another reader
    of a projection, a dX summed with something else) leaves it as it was.
    The pipeline runs it for the CUDA target (`--skip-pass=ampc-pack-qkv`
    leaves it out): it matches the
    bias-gradient epilogues ampc-fuse-epilogues gives that target's
    weight-gradient GEMMs, and the CPU reference keeps the separate ops.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FoldCastsPass : Pass<"ampc-fold-casts", "mlir::func::FuncOp"> {
  let summary = "give every cast a fused kernel (no kernel that only casts)";
  let description = [{
    Runs right before ampc-fuse (issue 37, item 6). A top-level `ampc.cast`
    whose users are all elementwise ops of its shape becomes one cast per
    user (ampc-fuse then converts in each user's kernel, in registers). A
    cast whose producer is an elementwise op of its shape with other users
    gets its own copy of the producer's elementwise chain (ops of the
    cast's shape, at most 16, none reading a parameter or state that a
    store between it and the cast writes), so the chain and the cast fuse
    into one kernel and the original chain is left to its other users.
    Only elementwise work is repeated, on the same operands: every target
    computes the same values. A cast to FP16/BF16 that alone reads an FP32
    LayerNorm's Y, or the FP32 result of nll_loss_grad with log_prob (the
    cross-entropy's adjoint), folds into it (written in the cast's type,
    rounded once from FP32 as the cast rounded it); layer_norm_grad reads a
    16-bit dY, the loss scaler's unscale a 16-bit gradient (a
    convolution's weight gradient) and SoftmaxCrossEntropyLoss 16-bit
    scores (its results staying FP32), that a cast widened to FP32, as
    they are (widened exactly on load).
    Other casts between non-elementwise ops (a softmax's or reduction's
    output, a GEMM's operand) are left.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FuseResidualLayerNormPass
    : Pass<"ampc-fuse-residual-layer-norm", "mlir::func::FuncOp"> {
  let summary = "compute a residual add in the LayerNorm it feeds";
  let description = [{
    Issue 37, item 4, after ampc-fold-casts and before ampc-fuse. An
    `ampc.add` of two tensors of one shape (no broadcast) whose result a
    LayerNorm reads, and that its other readers read only after the
    LayerNorm, becomes part of the LayerNorm: `ampc.add_layer_norm` adds
    (in the compute type, stored in the sum's type, as the add did),
    writes the sum for the other readers and normalises the stored sum, so
    every target computes the bits of the add and the LayerNorm. A summand
    that a cast widened from FP16/BF16 (the GEMM output of a residual
    branch) is read in 16 bits and widened on load; the cast goes. One
    kernel instead of two, and the sum is not read back from memory by a
    second kernel.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FuseBatchNormEpiloguePass
    : Pass<"ampc-fuse-batch-norm-epilogue", "mlir::func::FuncOp"> {
  let summary = "compute a BatchNorm's ReLU and residual add in its kernel";
  let description = [{
    Issue 39, item 1, after ampc-fuse-residual-layer-norm and before
    ampc-fuse. A BatchNormalization whose Y only an `ampc.relu` reads gets
    `relu`; one whose Y only an `ampc.add` of a tensor of Y's type reads
    (a residual defined before the BatchNorm and not stored over before
    the add) gets that tensor as `residual`, and `relu` too when only a
    ReLU reads the sum. Y is then the ReLU's (or the sum's) value: the
    kernel rounds the normalised value to Y's type, adds the residual in
    the elementwise compute type and rounds as the add did, applies ReLU
    (NaN stays NaN, as ampc.relu) and writes Y, so every target computes
    the bits of the three ops. In a residual block whose shortcut is a
    BatchNorm too, the later of the two BatchNorms takes the earlier one's
    Y as its residual. One kernel instead of two or three, and the
    normalised tensor is neither written nor read back.

    With `backward` (the CUDA target) the adjoint's half too: a
    `batch_norm_grad` whose gradient is a `relu_grad` takes its mask
    (`relu_output`) and, when that gradient was a residual block's sum of
    two gradients, the add (`addend`), and keeps the masked gradient for
    the shortcut (`keep_grad`). The CPU target leaves them out: its
    pairwise sums read each channel's elements scattered over the batch,
    where a mask and an addend per element cost more than the separate
    vectorised loops (the Conv1d+BatchNorm model's FP32 step 7.2 ms ->
    10.6 ms with them; design.md).
  }];
  let options = [
    Option<"backward", "backward", "bool", /*default=*/"true",
           "the adjoint's prologue too (the CUDA target)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FusePass : Pass<"ampc-fuse", "mlir::func::FuncOp"> {
  let summary = "merge elementwise chains into ampc.fusion loop nests";
  let description = [{
    Groups chains of elementwise ops (AMPC_Elementwise in AMPCOps.td) into
    one `ampc.fusion` each, which a target runs as one loop over the result
    with every intermediate in a register. Walking each function backwards,
    an elementwise op starts a group, which becomes a fusion as soon as it
    is complete. An elementwise producer of a member joins it (never past a
    store to a parameter or state it reads: ampc::storedBetween) when:

    - it has the group's result shape and all its users are already in the
      group: it moves in, its value needed nowhere else;
    - its result is small (at most 4096 elements, so its operands are too)
      and broadcasts to the group's shape, as a loss's per-row mask or a
      scalar does: the group computes its own copy per element, the copy's
      operands widened by `ampc.expand` (reshapes that only add or drop
      leading unit dimensions between it and its reader are looked
      through);
    - it has the group's shape and other readers too, and a copy of it and
      of the producers above it (as many as keep the reads from growing)
      makes the group read fewer bytes of full-size tensors: the erf
      GELU's division and erf are recomputed by the forward and the
      backward kernel instead of stored between them.

    A group copies at most 16 ops (ampc::kMaxCopiedOps). A copied producer
    stays for the readers it still has and is erased when none is left.
    Copies compute the same ops on the same operands and a fusion rounds
    each intermediate to its type, so results are bit-identical. Operands
    outside the group, which may broadcast, become the fusion's operands.
    Groups of one op are left as they are.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def FuseHorizontalPass : Pass<"ampc-fuse-horizontal", "mlir::func::FuncOp"> {
  let summary = "run independent small elementwise ops side by side as one kernel";
  let description = [{
    Runs right after ampc-fuse. A run of top-level elementwise ops and
    fusions of one small result shape (at most 4096 elements: their launch
    is most of their cost, and merging large ones would keep their buffers
    live from the first member on) with nothing but stores between them,
    none reading another's result nor a parameter or state a store between
    them writes, becomes one `ampc.fusion` yielding each member's values,
    at the first member's place (at most 64 members; casts are left alone,
    for the optimizer's weight copies). Every operand of a member is
    defined before the run (only stores, which define nothing, and members,
    whose results no member reads, lie between), so each value is computed
    from the same operands as before: results are bit-identical. Every
    BatchNorm's batch counter and the step counter become one kernel
    instead of one each.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def InsertAllReducePass : Pass<"ampc-insert-all-reduce", "mlir::func::FuncOp"> {
  let summary = "average the gradients over the ranks of a data-parallel job";
  let description = [{
    Issue 41 (docs/design.md, "Data parallel"). In a function with an
    optimizer, the gradients the first of `ampc.unscale`,
    `ampc.clip_grad_norm` or `ampc.optimizer_update` reads are grouped into
    buckets of about `bucket-bytes` (in the communicated type), in the
    order the backward computes them (DDP's reverse order of the forward).
    Each bucket gets an `ampc.all_reduce_start` right after its last
    gradient, so its all-reduce runs while the backward goes on, and an
    `ampc.all_reduce_wait` just before the first reader, which then reads
    the means. `dtype` is the type gradients travel in: fp16, bf16, fp32,
    or auto (the step's 16-bit type where it has one, else the gradients'
    own). Each start records in `ampc.overlap` the number of ops between it
    and the waits. Gradient accumulation is refused (not supported yet).
  }];
  let options = [
    Option<"dtype", "dtype", "std::string", /*default=*/"\"auto\"",
           "the type gradients are communicated in: auto, fp16, bf16, fp32">,
    Option<"bucketBytes", "bucket-bytes", "int64_t",
           /*default=*/"25 * 1024 * 1024",
           "close a bucket once it holds this many bytes">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def SyncBatchNormPass : Pass<"ampc-sync-batch-norm", "mlir::func::FuncOp"> {
  let summary = "synchronise BatchNorm's batch statistics over the ranks";
  let description = [{
    Issue 41 (`--sync-batchnorm`, docs/distributed.md "Synchronised
    BatchNorm"). In a data-parallel step (a function with
    `ampc.all_reduce_start`, after ampc-insert-all-reduce), every
    training-mode `ampc.batch_normalization` and `ampc.batch_norm_grad`
    gets `ampc.sync_request`, the communicator request number its
    all-reduce uses (after the buckets', one per op in the step's order).
    The target then computes the forward's statistics over all ranks'
    rows (each rank's per-channel mean and M2 gathered and combined with
    Chan's formula over the ranks in a fixed tree, so every rank gets the
    same bits) and the backward's two per-channel sums over all ranks'
    rows, as torch.nn.SyncBatchNorm. Run alone (no communicator, or one
    rank) the step computes what it computes without the attribute.
  }];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def AssignLaunchGeometryPass
    : Pass<"ampc-assign-launch-geometry", "mlir::func::FuncOp"> {
  let summary = "decide how the target's kernels launch, for each op";
  let description = [{
    Records on every op whose kernels on `target` take a launch decision
    the decisions, as the dictionary `ampc.launch` (KernelGeometry.h,
    kLaunchAttr, lists its keys): on the CUDA target a reduction's blocks
    per output (`splits`), the batch statistics' work items and threads
    per block (`splits`, `threads`), layer_norm_grad's row groups
    (`groups`), clipping's partial sums (`partials`), whether
    SoftmaxCrossEntropyLoss reads its log_prob output (`log_prob`),
    whether cuDNN runs a convolution (`cudnn`) and how a row op spreads
    over threads (`parallelism`); on the CPU target the images a
    convolution puts in one GEMM (`images_per_gemm`). The memory plan
    sizes the ops' scratch from them and the emitters print them: both
    refuse an op that needs one and lacks it. Runs after
    ampc-assign-accumulation (cuDNN takes FP32 or FP64 accumulation only)
    and before ampc-plan-memory, for the target the plan is for.
  }];
  let options = [
    Option<"target", "target", "ampc::KernelTarget",
           /*default=*/"ampc::KernelTarget::Cpu",
           "the kernels whose launches the pass decides">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

def PlanMemoryPass : Pass<"ampc-plan-memory", "mlir::func::FuncOp"> {
  let summary = "give every intermediate tensor an offset in one arena";
  let description = [{
    The static memory plan. In each function, every result of a top-level
    op that needs storage (not constants, parameter loads, or views, which
    share their operand's buffer) gets a byte offset in one arena, recorded
    as `ampc.offsets` on the op (one entry per result, -1 for none); the
    function gets `ampc.arena_bytes`. Buffers are allocated in program
    order, best fit among the free blocks, 64-byte aligned, and freed after
    the last use of the value or of any view of it, never before the op
    that produces it has run, so an op's results never overlap its operands.
    Function results live to the end. An arena larger than
    `max-arena-bytes` (`--max-tensor-bytes`) is an error.

    The plan also places what the kernels need besides the tensors, so no
    kernel allocates inside a step and the emitters reserve nothing: every
    function's arena starts with the 8-byte run-time error slot
    (`ampc.error_slot`, at the same offset in every function, never
    reused); an op whose kernels on `target` need scratch memory
    (im2col columns, FP32 copies of 16-bit operands, accumulators,
    statistics: ampc::emit::scratchLayout) gets a block live only while
    it runs (`ampc.scratch`), apart from its operands and results; with
    `stage-inputs` (the CUDA target, which copies each host input to the
    device) every argument gets a buffer from the start of the function
    to its last use (`ampc.input_offsets`). The accumulation types
    (ampc-assign-accumulation) and the launch decisions
    (ampc-assign-launch-geometry, `ampc.launch`, for the same target) size
    the scratch; an op that takes a decision and lacks it is an error. With `guard-bytes` (the
    CUDA target) every result's buffer is followed by at least that many
    bytes no other live buffer uses (`ampc.guard_bytes` on the function):
    the CUDA emitter declares them to the CUDA execution on the CPU, which
    in its strict memory mode fails a kernel that writes into them.
  }];
  let options = [
    Option<"maxArenaBytes", "max-arena-bytes", "int64_t",
           /*default=*/"ampc::kDefaultMaxTensorBytes",
           "the largest arena a function may need">,
    Option<"target", "target", "ampc::KernelTarget",
           /*default=*/"ampc::KernelTarget::Cpu",
           "the kernels whose scratch memory the plan places">,
    Option<"stageInputs", "stage-inputs", "bool", /*default=*/"false",
           "give every argument a staging buffer (the CUDA target)">,
    Option<"guardBytes", "guard-bytes", "int64_t", /*default=*/"0",
           "leave at least this many unused bytes after every result (the "
           "CUDA target: the CUDA execution on the CPU checks them)">,
  ];
  let dependentDialects = ["ampc::AMPCDialect"];
}

#endif // AMPC_TRANSFORMS_PASSES_TD
