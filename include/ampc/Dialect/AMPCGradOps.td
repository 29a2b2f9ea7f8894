//===- AMPCGradOps.td - backward ops of the ampc dialect --*- tablegen -*-===//
//
// Adjoints that the forward ops cannot express well (scatters, transposed
// convolutions, fused normalisation backwards). Only gradient rules
// (lib/Dialect/Gradients.cpp) create them, after precision assignment, so
// they carry no precision category: each runs in the dtype of its operands,
// which is the dtype its forward op ran in. Sums and means are accumulated
// in FP32 (FP64 for f64 tensors) and rounded once when stored, as the
// forward kernels do. They are not differentiable themselves (no
// second-order gradients).
//
// Included at the end of AMPCOps.td. Layouts are the forward ops': NCHW
// (N, C, spatial...) for convolution, pooling and BatchNormalization.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_GRAD_OPS_TD
#define AMPC_GRAD_OPS_TD

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

def AMPC_ReluGradOp : AMPC_Op<"relu_grad",
    [Pure, AMPC_Elementwise, AllTypesMatch<["grad", "input", "output"]>]> {
  let summary = "adjoint of Relu and LeakyRelu";
  let description = [{
    Elementwise, all three tensors of one type:

        output[i] = input[i] > 0 ? grad[i] : alpha * grad[i]

    (with `alpha = 0`: `input[i] > 0 ? grad[i] : 0`, so an infinite or NaN
    `grad` where `input` is not positive gives 0.)
    `grad` is the adjoint of the forward result. Relu's rule passes Relu's
    *result* as `input` (it is positive exactly where Relu's input is) with
    `alpha = 0`; LeakyRelu's rule passes its input and its `alpha`. At
    `input == 0` (and for NaN) the result is `alpha * grad` (0 for Relu),
    as in PyTorch (`threshold_backward`, `leaky_relu_backward`).

    ```mlir
    %dx = ampc.relu_grad %dy, %y : tensor<4x8xf16>
    %dz = ampc.relu_grad %dy, %x {alpha = 1.000000e-01 : f32} : tensor<4x8xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$input,
                       DefaultValuedAttr<F32Attr, "0.0">:$alpha);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($output)";
}

def AMPC_GeluGradOp : AMPC_Op<"gelu_grad",
    [Pure, AMPC_Elementwise, AllTypesMatch<["grad", "input", "output"]>]> {
  let summary = "adjoint of Gelu";
  let description = [{
    Elementwise, all three tensors of one type, computed in FP32 (FP64 for
    f64) and rounded once: `output = grad * gelu'(input)` where `input` is
    Gelu's input and

    - `approximate = #ampc<approximate none>`: gelu'(x) = Φ(x) + x·φ(x), with
      Φ(x) = 0.5·(1 + erf(x/√2)) and φ(x) = exp(−x²/2)/√(2π);
    - `approximate = #ampc<approximate tanh>`: with u = √(2/π)·(x + 0.044715·x³) and
      t = tanh(u), gelu'(x) = 0.5·(1 + t) + 0.5·x·(1 − t²)·√(2/π)·(1 + 3·0.044715·x²).

    ```mlir
    %dx = ampc.gelu_grad %dy, %x {approximate = #ampc<approximate tanh>} : tensor<2x16x128xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$input,
                       DefaultValuedAttr<AMPC_GeluApproximateAttr,
                                         "::ampc::GeluApproximate::None">:$approximate);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $input attr-dict `:` type($output)";
}

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

def AMPC_ConvBackwardDataOp : AMPC_Op<"conv_backward_data", [AMPC_Accumulating, Pure]> {
  let summary = "adjoint of Conv with respect to its input X";
  let description = [{
    `grad` is the adjoint of a Conv's result Y (N, M, out...), `weight` the
    Conv's W (M, C/group, k...); the attributes are the Conv's (absent
    strides/dilations mean 1, absent pads 0; pads are begins then ends).
    The result type is the type of the Conv's X (N, C, in...): it is
    written out, because strides make it ambiguous, and the verifier checks
    that a Conv of that shape with these attributes gives `grad`'s shape.
    All three tensors have one element type.

    With G = group, Mg = M/G, Cg = C/G, the result is the transposed
    convolution (starting from zeros, summed in FP32):

        for n, m, o (output position), c < Cg, k (kernel position):
          g = m / Mg
          i[d] = o[d]·strides[d] − pads[d] + k[d]·dilations[d]   (each spatial d)
          if 0 <= i[d] < in[d] for every d:
            output[n, g·Cg + c, i] += grad[n, m, o] · weight[m, c, k]

    Input positions no window reads (in the padding's shadow, or cut off by
    the stride) get 0.

    ```mlir
    %dx = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$weight,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $weight attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_ConvBackwardWeightOp : AMPC_Op<"conv_backward_weight", [AMPC_Accumulating, Pure]> {
  let summary = "adjoint of Conv with respect to its weight W";
  let description = [{
    `input` is the Conv's X (N, C, in...), `grad` the adjoint of its result
    Y (N, M, out...); the attributes are the Conv's. The result type is the
    type of W (M, C/group, k...), written out (strides make the kernel size
    ambiguous) and checked: a Conv of `input` by a weight of that shape
    gives `grad`'s shape. All three tensors have one element type.

    With G = group, Mg = M/G, Cg = C/G, summed in FP32 over n and o:

        output[m, c, k] = Σ_{n, o} grad[n, m, o] · input[n, g·Cg + c, i]
          g = m / Mg,  i[d] = o[d]·strides[d] − pads[d] + k[d]·dilations[d]

    where terms whose i falls outside the input (in the padding) are 0.
    The bias adjoint is not part of this op (it is a ReduceSum of `grad`
    over N and the spatial dimensions).

    ```mlir
    %dw = ampc.conv_backward_weight %x, %dy {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$input, AMPC_FloatTensor:$grad,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "1">:$group,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$input `,` $grad attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

def AMPC_MaxPoolGradOp : AMPC_Op<"max_pool_grad", [AMPC_Accumulating, Pure]> {
  let summary = "adjoint of MaxPool: routes each gradient to its argmax";
  let description = [{
    `grad` is the adjoint of a MaxPool's result Y, `indices` the
    MaxPool's Indices result (same shape as Y) and the window attributes
    the MaxPool's (`kernel_shape`, `strides`, `pads`, `dilations`,
    `ceil_mode`; the result type follows the pooling shape rule): the flat index of each
    window's maximum into the whole input, `plane · inSize + offset`, where
    plane = n·C + c, inSize the number of spatial positions of the input and
    offset the row-major spatial offset (`storage_order = 0`) or the
    column-major one, the first spatial dimension fastest
    (`storage_order = 1`, as the MaxPool wrote it). The result type is the
    type of the MaxPool's X, written out; it has `grad`'s element type,
    rank, N and C.

        output = 0
        for every position p of grad:
          if indices[p] >= 0: output.flat[row-major(indices[p])] += grad[p]

    Overlapping windows that chose the same input add up (in FP32), in
    the order of p, from 0. An index of −1 (a window lying wholly in the
    padding) contributes nothing. Each index lies in its own window (as
    MaxPool writes them), so the windows tell which gradients can reach an
    input element: the CUDA target gathers them per input element, in the
    same order, without atomics.

    ```mlir
    %dx = ampc.max_pool_grad %dy, %idx {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x64x16x16xf16>, tensor<1x64x16x16xi64>) -> tensor<1x64x32x32xf16>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_I64Tensor:$indices,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$storage_order,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_AveragePoolGradOp : AMPC_Op<"average_pool_grad", [AMPC_Accumulating, Pure]> {
  let summary = "adjoint of AveragePool";
  let description = [{
    `grad` is the adjoint of an AveragePool's result Y (N, C, out...); the
    attributes are the AveragePool's. The result type is the type of its X
    (N, C, in...), written out and checked against the pooling shape rule.
    Each output position's gradient is spread evenly over the input
    positions its window read, divided by the divisor the forward used:

        output = 0
        for n, c, o, k (kernel position):
          i[d] = o[d]·strides[d] − pads[d] + k[d]·dilations[d]
          if 0 <= i[d] < in[d] for every d:
            output[n, c, i] += grad[n, c, o] / count(o)

    count(o) is the number of kernel positions of window o inside the input;
    with `count_include_pad = 1`, also those in the padding
    (−pads_begin[d] <= i[d] < in[d] + pads_end[d]), but never positions that
    ceil_mode adds beyond the end padding. Sums are in FP32.

    ```mlir
    %dx = ampc.average_pool_grad %dy {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>) -> tensor<1x8x8x8xf16>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad,
                       DenseI64ArrayAttr:$kernel_shape,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$pads,
                       OptionalAttr<DenseI64ArrayAttr>:$dilations,
                       DefaultValuedAttr<I64Attr, "0">:$ceil_mode,
                       DefaultValuedAttr<I64Attr, "0">:$count_include_pad,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

def AMPC_BatchNormGradOp : AMPC_Op<"batch_norm_grad",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor, AttrSizedOperandSegments]> {
  let summary = "adjoint of BatchNormalization (input, scale and bias)";
  let description = [{
    `grad` and `input` are the adjoint of a BatchNormalization's Y and its X
    (N, C, spatial...), one type; `scale` its scale (C); `mean` and
    `inv_std_dev` the statistics the forward normalised with (its `saved`
    results: C each, f32, or f64 for f64 X). Results: the adjoints of X (X's
    type), of scale and of B (both the type of `scale`). Per channel c,
    over the m = N·(spatial size) elements of the channel, in the
    accumulation type, with μ = mean[c], r = inv_std_dev[c] and
    x̂ = (x − μ)·r:

        grad_bias[c]  = Σ grad
        grad_scale[c] = Σ grad · x̂
        grad_input    = scale[c]·r·(grad − grad_bias[c]/m − x̂·grad_scale[c]/m)   (training_mode 1)
        grad_input    = scale[c]·r·grad                                          (training_mode 0)

    Training mode: the forward normalised with the batch statistics, which
    depend on X; otherwise with its running statistics. The running
    statistics get no gradient.

    The prologue (ampc-fuse-batch-norm-epilogue, never autodiff): `grad`
    above is then the value the ops it replaces computed, from the
    operand `grad` (here g): with `addend` (g's type), g + addend in the
    elementwise compute type rounded to g's type, as an `ampc.add`; with
    `relu_output` (the forward ReLU's Y, g's type), that where
    relu_output > 0 and 0 elsewhere, as `ampc.relu_grad`. With
    `keep_grad` the op also returns that value (`kept`, g's type) for its
    other readers (a residual block's shortcut).

    ```mlir
    %dx, %dscale, %dbias = ampc.batch_norm_grad %dy, %x, %scale, %mean, %rstd {training_mode = 1 : i64} : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
    %dx2, %ds2, %db2, %g = ampc.batch_norm_grad %dy, %x, %scale, %mean, %rstd addend %dz relu_output %y {keep_grad, training_mode = 1 : i64} : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<2x16x8x8xf16>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$input,
                       AMPC_FloatTensor:$scale, AMPC_FloatTensor:$mean,
                       AMPC_FloatTensor:$inv_std_dev,
                       Optional<AMPC_FloatTensor>:$addend,
                       Optional<AMPC_FloatTensor>:$relu_output,
                       DefaultValuedAttr<I64Attr, "1">:$training_mode,
                       UnitAttr:$keep_grad,
                       UnitAttr:$channels_last);
  let results = (outs AMPC_FloatTensor:$grad_input,
                      AMPC_FloatTensor:$grad_scale,
                      AMPC_FloatTensor:$grad_bias,
                      Variadic<AMPC_FloatTensor>:$kept);
  let assemblyFormat = "$grad `,` $input `,` $scale `,` $mean `,` "
                       "$inv_std_dev (`addend` $addend^)? "
                       "(`relu_output` $relu_output^)? attr-dict `:` "
                       "functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// The gradient the op used, for other readers (null without
    /// `keep_grad`).
    mlir::Value getKeptGrad() {
      return getKept().empty() ? mlir::Value() : getKept()[0];
    }
  }];
}

def AMPC_LayerNormGradOp : AMPC_Op<"layer_norm_grad",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor]> {
  let summary = "adjoint of LayerNormalization with respect to X";
  let description = [{
    `grad` and `input` are the adjoint of a LayerNormalization's Y and its
    X, of one shape and one type, or `grad` FP16/BF16 where X is FP32
    (ampc-fold-casts: the op reads dY as its producer wrote it and widens
    it exactly on load, in place of a cast kernel); `scale` its Scale
    (broadcastable to the normalised shape X.shape[axis:]); `mean` and `inv_std_dev` its Mean and InvStdDev results
    (X's shape with the normalised dimensions 1, stash type). The result
    has X's type. With i a row (the dimensions before `axis`), j a position
    in the normalised shape, n its size, and in FP32:

        x̂[i, j] = (input[i, j] − mean[i]) · inv_std_dev[i]
        g[i, j] = grad[i, j] · scale[j]
        output[i, j] = inv_std_dev[i] · (g[i, j] − Σ_j g[i, j]/n − x̂[i, j] · Σ_j g[i, j]·x̂[i, j]/n)

    The adjoints of Scale and B are ordinary reductions (ReduceSum of
    grad·x̂ and of grad over the rows), not part of this op as autodiff
    writes it. On the CUDA target, ampc-fuse-layer-norm-grad moves them
    into the op (`param_grads` 1: Σ_i grad·x̂, 2: also Σ_i grad, each of
    the normalised shape in X's element type, replacing those
    ReduceSums), so that one kernel computes the three from one read of
    the rows (issue 37, item 4).

    ```mlir
    %dx = ampc.layer_norm_grad %dy, %x, %g, %mean, %rstd {axis = -1 : i64} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$input,
                       AMPC_FloatTensor:$scale, AMPC_FloatTensor:$mean,
                       AMPC_FloatTensor:$inv_std_dev,
                       DefaultValuedAttr<I64Attr, "-1">:$axis,
                       DefaultValuedAttr<I64Attr, "0">:$param_grads);
  let results = (outs AMPC_FloatTensor:$output,
                      Variadic<AMPC_FloatTensor>:$grad_params);
  let assemblyFormat = "$grad `,` $input `,` $scale `,` $mean `,` $inv_std_dev "
                       "attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

def AMPC_AttentionGradOp : AMPC_Op<"attention_grad",
    [AMPC_Accumulating, Pure, InferTypeOpAdaptor]> {
  let summary = "adjoint of ampc.attention with respect to Q, K and V";
  let description = [{
    `grad` is the adjoint of an ampc.attention's O (O's type and layout);
    `q`, `k`, `v`, `bias`, `o` and `lse` are that op's operands and results,
    and the attributes are its own. Results dQ, dK, dV have the types (and
    layouts) of Q, K, V. With P recomputed from `lse` (in FP32; FP64 for
    f64 data):

        D_i   = Σ_c grad_ic · o_ic
        P_ij  = exp(scale · q_i·k_j + bias_ij − lse_i)  (0 where causal hides j)
        Z_ij  = 1 / (1 − p) if the forward kept P_ij, else 0 (1 with
                `dropout_ratio` p = 0; the forward's mask, regenerated)
        dV_jc = Σ_i P_ij · Z_ij · grad_ic
        dS_ij = P_ij · ((Σ_c grad_ic · v_jc) · Z_ij − D_i)
        dQ_ic = scale · Σ_j dS_ij · k_jc,   dK_jc = scale · Σ_i dS_ij · q_ic

    P·Z and dS are rounded to the data type before they multiply (as the
    CUDA kernel's 16-bit matrix products do). The bias gets no adjoint.
    With `packed_qkv` (the forward's packed Q, K, V: ampc.attention) the
    one result is dQ | dK | dV in the packed operand's type and layout.

    ```mlir
    %dq, %dk, %dv = ampc.attention_grad %do, %q, %k, %v, %o, %lse {scale = 0.125 : f32} : (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>, tensor<2x4x8x64xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_FloatTensor:$q,
                       AMPC_FloatTensor:$k, AMPC_FloatTensor:$v,
                       AMPC_FloatTensor:$o, AMPC_FloatTensor:$lse,
                       Optional<AMPC_FloatTensor>:$bias,
                       F32Attr:$scale,
                       DefaultValuedAttr<BoolAttr, "false">:$causal,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$q_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$k_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$v_perm,
                       DefaultValuedAttr<DenseI64ArrayAttr, "{0, 1, 2, 3}">:$o_perm,
                       DefaultValuedAttr<F32Attr, "0.0">:$dropout_ratio,
                       DefaultValuedAttr<I64Attr, "0">:$dropout_seed,
                       DefaultValuedAttr<BoolAttr, "false">:$packed_qkv);
  let results = (outs Variadic<AMPC_FloatTensor>:$grads);
  let extraClassDeclaration = [{
    /// dQ, dK and dV, or (`packed_qkv`) their one packed buffer.
    mlir::Value getGradQ() { return getGrads()[0]; }
    mlir::Value getGradK() { return getGrads()[getPackedQkv() ? 0 : 1]; }
    mlir::Value getGradV() { return getGrads()[getPackedQkv() ? 0 : 2]; }
  }];
  let assemblyFormat = "$grad `,` $q `,` $k `,` $v `,` $o `,` $lse "
                       "(`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def AMPC_NllLossGradOp : AMPC_Op<"nll_loss_grad",
    [AMPC_Accumulating, Pure, AttrSizedOperandSegments]> {
  let summary = "adjoint of NegativeLogLikelihoodLoss with respect to its input";
  let description = [{
    `grad` is the adjoint of the loss (shape (N, D...) for
    reduction `none`, a scalar otherwise), `target` the integer class
    ids (N, D...), `weight` the optional class weights (C); the attributes
    are the loss op's. The result type is the type of the loss's input
    (N, C, D...), written out; `grad`, `weight` and the result share one
    element type. For each sample s = (n, d...) with t = target[s]:

        w_s = 0                               if t == ignore_index
              weight[t] (1 without weights)   otherwise
        W   = Σ_s w_s                        (only for mean)
        f_s = w_s · grad[s]   (none)
              w_s · grad      (sum)
              w_s · grad / W  (mean; f_s = 0 for every s when W == 0)
        output[n, c, d...] = −f_s if c == t, else 0

    A target outside [0, C) that is not ignore_index is an error at run
    time, as in the forward. SoftmaxCrossEntropyLoss's rule uses this op and
    LogSoftmax's adjoint (the loss is NLL of LogSoftmax along axis 1).

    With `log_prob` (a SoftmaxCrossEntropyLoss's log_prob result, the
    result's shape in `grad`'s element type) the op is that loss's whole
    adjoint with respect to its scores, LogSoftmax's adjoint applied to the
    output above (g) in one kernel:

        result[n, c, d...] = g[n, c, d...] − exp(log_prob[n, c, d...]) · S
        S = Σ_c g[n, c, d...] = g[n, t, d...] + 0

    (the row has one non-zero term, so the sum is exact in any order and
    the reduction is not run). The result may then be a 16-bit type of an
    FP32 `grad` (ampc-fold-casts), rounded once from the FP32 value.

    ```mlir
    %dlogp = ampc.nll_loss_grad %dloss, %t {reduction = #ampc<reduction mean>} : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
    %ds = ampc.nll_loss_grad %dloss, %t log_prob(%lp) : (tensor<f32>, tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf16>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_IndexTensor:$target,
                       Optional<AMPC_FloatTensor>:$weight,
                       Optional<AMPC_FloatTensor>:$log_prob,
                       DefaultValuedAttr<AMPC_ReductionAttr,
                                         "::ampc::Reduction::Mean">:$reduction,
                       OptionalAttr<I64Attr>:$ignore_index);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $target (`,` $weight^)? "
                       "(`log_prob` `(` $log_prob^ `)`)? attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def AMPC_GatherGradOp : AMPC_Op<"gather_grad", [AMPC_Accumulating, Pure]> {
  let summary = "adjoint of Gather: scatter-add into the table";
  let description = [{
    `grad` is the adjoint of a Gather's result, `indices` the Gather's
    indices, `axis` its axis. The result type is the type of the Gather's
    data, written out; `grad` must have the Gather's result shape
    data.shape[:axis] + indices.shape + data.shape[axis+1:] and the result's
    element type.

        output = 0
        for a (before axis), j (index position), b (after axis):
          k = indices[j];  k += data.shape[axis] if k < 0
          output[a, k, b] += grad[a, j, b]

    Repeated indices add up (in FP32). An index outside
    [−data.shape[axis], data.shape[axis]) is an error at run time, as in
    the forward.

    ```mlir
    %dtable = ampc.gather_grad %dy, %ids {axis = 0 : i64} : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<100x64xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, AMPC_IndexTensor:$indices,
                       DefaultValuedAttr<I64Attr, "0">:$axis);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad `,` $indices attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_SliceGradOp : AMPC_Op<"slice_grad", [Pure]> {
  let summary = "adjoint of Slice: the gradient placed back, zeros elsewhere";
  let description = [{
    `grad` is the adjoint of a Slice's result; the attributes are the
    Slice's, read exactly as ampc.slice reads them (negative starts/ends
    count from the end, clamped as ONNX specifies, negative steps walk
    backwards). The result type is the type of the Slice's input, written
    out; slicing it with these attributes must give `grad`'s type.

        output = 0
        output[the elements the Slice selected] = grad   (in the same order)

    ```mlir
    %dx = ampc.slice_grad %dy {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$grad, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$ends, DenseI64ArrayAttr:$axes,
                       DenseI64ArrayAttr:$steps);
  let results = (outs AMPC_FloatTensor:$output);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // AMPC_GRAD_OPS_TD
