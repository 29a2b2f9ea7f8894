//===- AMPCTrainOps.td - training state, loss scaling, optimizers -*- tablegen -*-===//
//
// What ampc-insert-loss-scaling and ampc-attach-optimizer add to
// @train_step: state that persists across steps (optimizer moments, the
// loss scale, counters, low-precision weight copies), the fused unscale and
// overflow check, gradient clipping, the optimizer update and the scale
// update. Updates are pure ops producing the new values; `ampc.store` writes
// them back at the end of the step, so a skipped step stores the old bits.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRAIN_OPS_TD
#define AMPC_TRAIN_OPS_TD

def AMPC_StateOp : AMPC_Op<"state", [Symbol]> {
  let summary = "training state kept across steps";
  let description = [{
    A tensor the training step reads and writes besides the parameters:
    optimizer moments, the learning rate, the loss scaler's state, step
    counters, and low-precision copies of weights. `derived_from` names the
    parameter whose low-precision copy this is (it is recomputed whenever
    that parameter is written from outside and is not checkpointed). With
    `channels_last` the copy is the parameter (M, C, k...) laid out
    channels-last, (M, k..., C): a channels-last convolution's weight
    (ampc-channels-last, ampc-attach-optimizer).

    ```mlir
    ampc.state @"fc1.weight.exp_avg" : tensor<512x784xf32> = dense<0.0> : tensor<512x784xf32>
    ampc.state @"fc1.weight.f16" {derived_from = @"fc1.weight"} : tensor<512x784xf16> = dense<0.0> : tensor<512x784xf16>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AMPC_Tensor>:$type,
                       ElementsAttr:$initial_value,
                       OptionalAttr<FlatSymbolRefAttr>:$derived_from,
                       UnitAttr:$channels_last);
  let assemblyFormat = "$sym_name attr-dict `:` $type `=` $initial_value";
  let hasVerifier = 1;
}

def AMPC_LoadStateOp : AMPC_Op<"load_state",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "read the current value of training state";
  let description = [{
    ```mlir
    %scale = ampc.load_state @"ampc.loss_scale" : tensor<f32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$state);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$state attr-dict `:` type($output)";
}

def AMPC_LoadPackedStateOp : AMPC_Op<"load_packed_state",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemRead]>]> {
  let summary = "read several states laid out one after the other as one tensor";
  let description = [{
    The states `states` (one element type, equal trailing dimensions)
    concatenated along their first dimension: the targets lay them out
    contiguously in this order (no padding between them), so this is a
    view of their storage, not a copy. ampc-pack-qkv creates it for the
    16-bit weight copies of the Q, K and V projections, so that one GEMM
    computes all three (issue 37, item 3). A state is in at most one
    packing.

    ```mlir
    %w = ampc.load_packed_state [@"q.weight.f16", @"k.weight.f16", @"v.weight.f16"] : tensor<96x32xf16>
    ```
  }];
  let arguments = (ins FlatSymbolRefArrayAttr:$states);
  let results = (outs AMPC_Tensor:$output);
  let assemblyFormat = "$states attr-dict `:` type($output)";
}

def AMPC_StoreOp : AMPC_Op<"store",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     MemoryEffects<[MemWrite]>]> {
  let summary = "write a parameter or training state";
  let description = [{
    Replaces the value of an `ampc.parameter` or `ampc.state` with `value`
    (its exact type). The stores of a step come after every read of the
    symbols they write.

    ```mlir
    ampc.store @"fc1.weight", %new : tensor<512x784xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$target, AMPC_Tensor:$value);
  let assemblyFormat = "$target `,` $value attr-dict `:` type($value)";
}

def AMPC_UnscaleOp : AMPC_Op<"unscale", [Pure]> {
  let summary = "unscale gradients and check them for overflow in one pass";
  let description = [{
    torch.amp.GradScaler's `_amp_foreach_non_finite_check_and_unscale_`:
    with `inv = (float)(1 / (double)scale)`, every result is its gradient
    times `inv` (the gradient itself when `inv == 1`), and `found_inf` is
    true when any element of any gradient is not finite. Results are FP32
    (FP64 in an f64 model); a gradient may be f16/bf16 under an FP32 result
    of its shape (`ampc-fold-casts` folds the widening cast of a 16-bit
    gradient, a convolution's weight gradient, into this op): it is widened
    on load, exactly as the cast widened it, so the results are the same.
    `channels_last` lists the gradients (by position among `grads`) stored
    channels-last, (M, k..., C) under a result (M, C, k...): a channels-last
    convolution's weight gradient whose transpose back to the weight's
    layout `ampc-fold-transposes` folds into this op; result element
    (m, c, k) is gradient element (m, k, c).

    ```mlir
    %g0, %g1, %found_inf = ampc.unscale %scale, %d0, %d1 : (tensor<f32>, tensor<8x4xf32>, tensor<8xf32>) -> (tensor<8x4xf32>, tensor<8xf32>, tensor<i1>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$scale,
                       Variadic<AMPC_FloatTensor>:$grads,
                       OptionalAttr<DenseI64ArrayAttr>:$channels_last);
  let results = (outs Variadic<AMPC_FloatTensor>:$unscaled,
                      AMPC_BoolTensor:$found_inf);
  let extraClassDeclaration = [{
    /// Whether gradient `i` is stored channels-last (`channels_last`).
    bool isChannelsLast(unsigned i) {
      auto list = getChannelsLast();
      return list && llvm::is_contained(*list, static_cast<int64_t>(i));
    }
  }];
  let assemblyFormat =
      "$scale `,` $grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_ClipGradNormOp : AMPC_Op<"clip_grad_norm", [AMPC_Accumulating, Pure]> {
  let summary = "scale gradients down to a maximal global L2 norm";
  let description = [{
    torch.nn.utils.clip_grad_norm_: with `norm` the L2 norm of all the
    gradients together (in FP32, FP64 for f64 gradients), every gradient is
    multiplied by `min(1, max_norm / (norm + 1e-6))`.

    ```mlir
    %c0, %c1 = ampc.clip_grad_norm %g0, %g1 {max_norm = 1.0 : f32} : (tensor<8x4xf32>, tensor<8xf32>) -> (tensor<8x4xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins Variadic<AMPC_FloatTensor>:$grads, F32Attr:$max_norm);
  let results = (outs Variadic<AMPC_FloatTensor>:$clipped);
  let assemblyFormat = "$grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_OptimizerUpdateOp : AMPC_Op<"optimizer_update",
    [Pure, AttrSizedOperandSegments]> {
  let summary = "one optimizer step on one FP32 master weight";
  let description = [{
    The update of torch.optim's `kind` (sgd, adam, adamw) for one
    parameter, in FP32 (FP64 for f64): `param` and `grad` have one type,
    `moments` are the optimizer's state for it (SGD with momentum: the
    momentum buffer; Adam/AdamW: exp_avg and exp_avg_sq), `lr` the learning
    rate and `step` the number of steps taken before this one (i64 scalar;
    Adam's bias correction uses step + 1, SGD's momentum buffer starts as the
    gradient when step is 0). The results are the new parameter and new
    moments. When `found_inf` is given and true, every result is bitwise its
    input: the step is skipped.

        sgd:   g = grad + weight_decay·param
               b = step == 0 ? g : momentum·b + (1 − dampening)·g
               g = nesterov ? g + momentum·b : b        (momentum ≠ 0)
               param −= lr·g
        adam:  g = grad + weight_decay·param
        adamw: param ·= 1 − lr·weight_decay;  g = grad
               m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²
               param −= lr/(1 − β1^t) · m / (√v / √(1 − β2^t) + eps), t = step + 1

    ```mlir
    %p, %m, %v = ampc.optimizer_update %w, %g, %lr, %step, %found_inf, %m0, %v0 {kind = #ampc<optimizer adamw>, beta1 = 0.9 : f32, beta2 = 0.999 : f32, eps = 1.0e-8 : f32, weight_decay = 0.01 : f32} : ...
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$param, AMPC_FloatTensor:$grad,
                       AMPC_FloatTensor:$lr, AMPC_I64Tensor:$step,
                       Optional<AMPC_BoolTensor>:$found_inf,
                       Variadic<AMPC_FloatTensor>:$moments,
                       AMPC_OptimizerKindAttr:$kind,
                       DefaultValuedAttr<F32Attr, "0.0">:$momentum,
                       DefaultValuedAttr<F32Attr, "0.0">:$dampening,
                       DefaultValuedAttr<BoolAttr, "false">:$nesterov,
                       DefaultValuedAttr<F32Attr, "0.9">:$beta1,
                       DefaultValuedAttr<F32Attr, "0.999">:$beta2,
                       DefaultValuedAttr<F32Attr, "1.0e-8">:$eps,
                       DefaultValuedAttr<F32Attr, "0.0">:$weight_decay);
  let results = (outs AMPC_FloatTensor:$new_param,
                      Variadic<AMPC_FloatTensor>:$new_moments);
  let assemblyFormat =
      "$param `,` $grad `,` $lr `,` $step (`found_inf` $found_inf^)? "
      "(`moments` $moments^)? attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_UpdateScaleOp : AMPC_Op<"update_scale",
    [Pure, AllTypesMatch<["scale", "new_scale"]>,
     AllTypesMatch<["growth_tracker", "new_growth_tracker"]>]> {
  let summary = "the dynamic loss scale's update after a step";
  let description = [{
    torch.amp.GradScaler's `_amp_update_scale_`, plus optional bounds:

        found_inf: scale = max(scale · backoff_factor, min_scale); tracker = 0
        otherwise: t = tracker + 1
                   t == growth_interval: s = scale · growth_factor, kept
                       when finite (and capped at max_scale); tracker = 0
                   else tracker = t

    `min_scale`/`max_scale` of 0 mean no bound.

    ```mlir
    %s, %t = ampc.update_scale %scale, %tracker, %found_inf {growth_interval = 2000 : i64} : tensor<f32>, tensor<i32>, tensor<i1>
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$scale,
                       StaticShapeTensorOf<[I32]>:$growth_tracker,
                       AMPC_BoolTensor:$found_inf,
                       DefaultValuedAttr<F32Attr, "2.0">:$growth_factor,
                       DefaultValuedAttr<F32Attr, "0.5">:$backoff_factor,
                       DefaultValuedAttr<I64Attr, "2000">:$growth_interval,
                       DefaultValuedAttr<F32Attr, "0.0">:$min_scale,
                       DefaultValuedAttr<F32Attr, "0.0">:$max_scale);
  let results = (outs AMPC_FloatTensor:$new_scale,
                      StaticShapeTensorOf<[I32]>:$new_growth_tracker);
  let assemblyFormat = "$scale `,` $growth_tracker `,` $found_inf attr-dict "
                       "`:` type($scale) `,` type($growth_tracker) `,` "
                       "type($found_inf)";
}

def AMPC_AllReduceStartOp : AMPC_Op<"all_reduce_start",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "start the data-parallel mean of a bucket of gradients";
  let description = [{
    Data-parallel training (ampc-insert-all-reduce, docs/design.md "Data
    parallel"): the gradients `grads` of one bucket, each divided by the
    world size W in FP32 (FP64 for f64) and rounded to the element type of
    `packed`, laid end to end in operand order (each in its stored layout)
    as the 1-D `packed`; then a sum all-reduce of `packed` across the ranks
    starts and runs while the rest of the step does (the communicator's
    non-blocking all-reduce). `packed` holds the sum after the matching
    `ampc.all_reduce_wait`. Dividing before the sum is what keeps a 16-bit
    sum from overflowing where the mean would not. When the step runs on
    one rank (no communicator, or W = 1) nothing is packed or sent. The op
    has effects (the communication), so nothing moves it or removes it.

    ```mlir
    %b = ampc.all_reduce_start %g0, %g1 : (tensor<8x4xf32>, tensor<8xf32>) -> tensor<40xf16>
    ```
  }];
  let arguments = (ins Variadic<AMPC_FloatTensor>:$grads,
                       I64Attr:$bucket);
  let results = (outs AMPC_FloatTensor:$packed);
  let assemblyFormat =
      "$grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def AMPC_AllReduceWaitOp : AMPC_Op<"all_reduce_wait",
    [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "finish a bucket's all-reduce and unpack the mean gradients";
  let description = [{
    Waits for the all-reduce `ampc.all_reduce_start` began on `packed` and
    writes each result, of its gradient's type, from its slice of the sum
    (widened or rounded to the gradient's element type). On one rank each
    result is its gradient, bit for bit: a library compiled for data
    parallelism trains exactly as one compiled without it when run alone.

    ```mlir
    %m0, %m1 = ampc.all_reduce_wait %b, %g0, %g1 : (tensor<40xf16>, tensor<8x4xf32>, tensor<8xf32>) -> (tensor<8x4xf32>, tensor<8xf32>)
    ```
  }];
  let arguments = (ins AMPC_FloatTensor:$packed,
                       Variadic<AMPC_FloatTensor>:$grads);
  let results = (outs Variadic<AMPC_FloatTensor>:$means);
  let assemblyFormat =
      "$packed `,` $grads attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

#endif // AMPC_TRAIN_OPS_TD
