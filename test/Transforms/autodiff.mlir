// RUN: ampc-opt %s --split-input-file --ampc-autodiff | FileCheck %s

// ampc-autodiff on FP32 graphs (no precision assignment): @train_step is
// @forward followed by its reverse pass, returning the loss and the gradient
// of every trainable parameter, in parameter order. The expected backward is
// derived from each op's rule (lib/Dialect/Gradients.cpp), not copied from
// the output. autodiff-fp16.mlir shows the same on a precision-assigned graph.

// An MLP with Gemm + Relu + SoftmaxCrossEntropyLoss. The loss is seeded
// with 1; SCE's adjoint is nll_loss_grad with log_prob (the NLL gradient
// and LogSoftmax's adjoint in one op); each Gemm gives dA = dY op(B)^T and dB = dY^T op(A) as one
// Gemm with transposition flags and dC = dY summed over the rows; Relu's
// adjoint reads Relu's result. The first layer's input x reaches no
// parameter, so no adjoint is computed for it (one Gemm less), and the
// logits output is not part of @train_step.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf32> {ampc.name = "logits"})
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32> {ampc.name = "x"}, %[[LABEL:.+]]: tensor<2xi64> {ampc.name = "label"})
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<8x4xf32> {ampc.gradient_of = @w1}, tensor<8xf32> {ampc.gradient_of = @b1}, tensor<3x8xf32> {ampc.gradient_of = @w2}, tensor<3xf32> {ampc.gradient_of = @b2})
// CHECK-NEXT: %[[W1:.+]] = ampc.load_parameter @w1
// CHECK-NEXT: %[[B1:.+]] = ampc.load_parameter @b1
// CHECK-NEXT: %[[W2:.+]] = ampc.load_parameter @w2
// CHECK-NEXT: %[[B2:.+]] = ampc.load_parameter @b2
// CHECK-NEXT: %[[H:.+]] = ampc.gemm %[[X]], %[[W1]], %[[B1]] {transB = 1 : i64}
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[H]]
// CHECK-NEXT: %[[LOGITS:.+]] = ampc.gemm %[[A]], %[[W2]], %[[B2]] {transB = 1 : i64}
// CHECK-NEXT: %[[LOSS:.+]], %[[LOGP:.+]] = ampc.softmax_cross_entropy_loss %[[LOGITS]], %[[LABEL]]
// CHECK-NEXT: %[[SEED:.+]] = ampc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DLOGITS:.+]] = ampc.nll_loss_grad %[[SEED]], %[[LABEL]] log_prob(%[[LOGP]]) : (tensor<f32>, tensor<2xi64>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[DA:.+]] = ampc.gemm %[[DLOGITS]], %[[W2]] : (tensor<2x3xf32>, tensor<3x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[DW2:.+]] = ampc.gemm %[[DLOGITS]], %[[A]] {transA = 1 : i64} : (tensor<2x3xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT: %[[DB2:.+]] = ampc.reduce_sum %[[DLOGITS]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
// CHECK-NEXT: %[[DH:.+]] = ampc.relu_grad %[[DA]], %[[A]] : tensor<2x8xf32>
// CHECK-NEXT: %[[DW1:.+]] = ampc.gemm %[[DH]], %[[X]] {transA = 1 : i64} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[DB1:.+]] = ampc.reduce_sum %[[DH]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW1]], %[[DB1]], %[[DW2]], %[[DB2]]
ampc.parameter @w1 : tensor<8x4xf32> = dense<0.5> : tensor<8x4xf32>
ampc.parameter @b1 : tensor<8xf32> = dense<0.0> : tensor<8xf32>
ampc.parameter @w2 : tensor<3x8xf32> = dense<0.25> : tensor<3x8xf32>
ampc.parameter @b2 : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @forward(%x: tensor<2x4xf32> {ampc.name = "x"}, %label: tensor<2xi64> {ampc.name = "label"}) -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf32> {ampc.name = "logits"}) {
  %w1 = ampc.load_parameter @w1 : tensor<8x4xf32>
  %b1 = ampc.load_parameter @b1 : tensor<8xf32>
  %w2 = ampc.load_parameter @w2 : tensor<3x8xf32>
  %b2 = ampc.load_parameter @b2 : tensor<3xf32>
  %h = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<2x4xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %a = ampc.relu %h : tensor<2x8xf32>
  %logits = ampc.gemm %a, %w2, %b2 {transB = 1 : i64} : (tensor<2x8xf32>, tensor<3x8xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %loss, %logp = ampc.softmax_cross_entropy_loss %logits, %label : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
  return %loss, %logits : tensor<f32>, tensor<2x3xf32>
}

// -----

// Broadcasting: the adjoints of the bias b (8) and the scale s (1x8) are
// the adjoint of their 4x8 results summed over the broadcast rows, then
// reshaped to the operand's shape. The squared difference d * d uses d
// twice, so d's adjoint is the sum of the two contributions. ReduceMean
// over all 32 elements spreads dy / 32 back.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<8xf32> {ampc.gradient_of = @b}, tensor<1x8xf32> {ampc.gradient_of = @s})
// CHECK: %[[XB:.+]] = ampc.add %{{.+}}, %[[B:.+]] : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: ampc.mul %[[XB]], %[[S:.+]] : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[D:.+]] = ampc.sub
// CHECK-NEXT: %[[SQ:.+]] = ampc.mul %[[D]], %[[D]]
// CHECK-NEXT: %[[LOSS:.+]] = ampc.reduce_mean %[[SQ]]
// CHECK-NEXT: %[[SEED:.+]] = ampc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[SEED2:.+]] = ampc.reshape %[[SEED]] : tensor<f32> to tensor<1x1xf32>
// CHECK-NEXT: %[[N:.+]] = ampc.constant dense<3.125000e-02> : tensor<f32>
// CHECK-NEXT: %[[SCALED:.+]] = ampc.mul %[[SEED2]], %[[N]]
// CHECK-NEXT: %[[DSQ:.+]] = ampc.expand %[[SCALED]] : tensor<1x1xf32> to tensor<4x8xf32>
// CHECK-NEXT: %[[D1:.+]] = ampc.mul %[[DSQ]], %[[D]]
// CHECK-NEXT: %[[D2:.+]] = ampc.mul %[[DSQ]], %[[D]]
// CHECK-NEXT: %[[DD:.+]] = ampc.add %[[D1]], %[[D2]]
// CHECK-NEXT: %[[DXB:.+]] = ampc.mul %[[DD]], %[[S]]
// CHECK-NEXT: %[[DS0:.+]] = ampc.mul %[[DD]], %[[XB]]
// CHECK-NEXT: %[[DS1:.+]] = ampc.reduce_sum %[[DS0]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[DS:.+]] = ampc.reshape %[[DS1]] : tensor<8xf32> to tensor<1x8xf32>
// CHECK-NEXT: %[[DB:.+]] = ampc.reduce_sum %[[DXB]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DB]], %[[DS]]
ampc.parameter @b : tensor<8xf32> = dense<0.0> : tensor<8xf32>
ampc.parameter @s : tensor<1x8xf32> = dense<1.0> : tensor<1x8xf32>
func.func @forward(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<f32> {
  %b = ampc.load_parameter @b : tensor<8xf32>
  %s = ampc.load_parameter @s : tensor<1x8xf32>
  %0 = ampc.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %1 = ampc.mul %0, %s : (tensor<4x8xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %d = ampc.sub %1, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %sq = ampc.mul %d, %d : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %loss = ampc.reduce_mean %sq {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// A small CNN: Conv, BatchNormalization in training mode, Relu, MaxPool,
// AveragePool, GlobalAveragePool, Flatten, Gemm. The running statistics
// reach the loss only through BatchNormalization's non-differentiable
// operands and fc.bias is marked ampc.frozen: none of the three gets a
// gradient. The BatchNormalization of @train_step saves its statistics
// (the mean and inverse standard deviation), which batch_norm_grad reads.
// MaxPool's adjoint routes through its Indices result; the input
// image gets no adjoint, so there is no conv_backward_data.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<4x3x3x3xf32> {ampc.gradient_of = @conv.weight}, tensor<4xf32> {ampc.gradient_of = @conv.bias}, tensor<4xf32> {ampc.gradient_of = @bn.weight}, tensor<4xf32> {ampc.gradient_of = @bn.bias}, tensor<2x4xf32> {ampc.gradient_of = @fc.weight})
// CHECK: %[[C:.+]] = ampc.conv %[[X:[^,]+]], %[[W:[^,]+]], %[[CB:[^ ]+]] {pads = array<i64: 1, 1, 1, 1>}
// CHECK-NEXT: %[[N:[^,]+]], %{{[^,]+}}, %{{[^,]+}}, %[[SAVED:[^:]+]]:2 = ampc.batch_normalization %[[C]], %[[SCALE:[^,]+]], {{.*}} {saved_statistics, training_mode = 1 : i64}
// CHECK-NEXT: %[[R:.+]] = ampc.relu %[[N]]
// CHECK-NEXT: %{{.+}}, %[[IDX:.+]] = ampc.max_pool %[[R]]
// CHECK: %[[F:.+]] = ampc.flatten
// CHECK: ampc.softmax_cross_entropy_loss
// CHECK: %[[DLOGITS:.+]] = ampc.nll_loss_grad {{.+}} log_prob(
// CHECK-NEXT: %[[DF:.+]] = ampc.gemm %[[DLOGITS]], %{{.+}} : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[DFW:.+]] = ampc.gemm %[[DLOGITS]], %[[F]] {transA = 1 : i64}
// CHECK-NEXT: %[[DG:.+]] = ampc.reshape %[[DF]] : tensor<2x4xf32> to tensor<2x4x1x1xf32>
// CHECK-NEXT: %[[AREA:.+]] = ampc.constant dense<6.250000e-02> : tensor<f32>
// CHECK-NEXT: %[[DG2:.+]] = ampc.mul %[[DG]], %[[AREA]]
// CHECK-NEXT: %[[DQ:.+]] = ampc.expand %[[DG2]] : tensor<2x4x1x1xf32> to tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[DP:.+]] = ampc.average_pool_grad %[[DQ]] {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT: %[[DR:.+]] = ampc.max_pool_grad %[[DP]], %[[IDX]] {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>) -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[DN:.+]] = ampc.relu_grad %[[DR]], %[[R]]
// CHECK-NEXT: %[[DC:.+]], %[[DSCALE:.+]], %[[DBIAS:.+]] = ampc.batch_norm_grad %[[DN]], %[[C]], %[[SCALE]], %[[SAVED]]#0, %[[SAVED]]#1 : (tensor<2x4x8x8xf32>, tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
// CHECK-NEXT: %[[DW:.+]] = ampc.conv_backward_weight %[[X]], %[[DC]] {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<2x4x8x8xf32>) -> tensor<4x3x3x3xf32>
// CHECK-NEXT: %[[DCB:.+]] = ampc.reduce_sum %[[DC]] {axes = array<i64: 0, 2, 3>, keepdims = 0 : i64} : (tensor<2x4x8x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %{{.+}}, %[[DW]], %[[DCB]], %[[DSCALE]], %[[DBIAS]], %[[DFW]]
// CHECK-NOT: conv_backward_data
ampc.parameter @conv.weight : tensor<4x3x3x3xf32> = dense<0.1> : tensor<4x3x3x3xf32>
ampc.parameter @conv.bias : tensor<4xf32> = dense<0.0> : tensor<4xf32>
ampc.parameter @bn.weight : tensor<4xf32> = dense<1.0> : tensor<4xf32>
ampc.parameter @bn.bias : tensor<4xf32> = dense<0.0> : tensor<4xf32>
ampc.parameter @bn.running_mean : tensor<4xf32> = dense<0.0> : tensor<4xf32>
ampc.parameter @bn.running_var : tensor<4xf32> = dense<1.0> : tensor<4xf32>
ampc.parameter @fc.weight : tensor<2x4xf32> = dense<0.5> : tensor<2x4xf32>
ampc.parameter @fc.bias {ampc.frozen} : tensor<2xf32> = dense<0.0> : tensor<2xf32>
func.func @forward(%x: tensor<2x3x8x8xf32>, %label: tensor<2xi64>) -> tensor<f32> {
  %w = ampc.load_parameter @conv.weight : tensor<4x3x3x3xf32>
  %cb = ampc.load_parameter @conv.bias : tensor<4xf32>
  %s = ampc.load_parameter @bn.weight : tensor<4xf32>
  %bb = ampc.load_parameter @bn.bias : tensor<4xf32>
  %m = ampc.load_parameter @bn.running_mean : tensor<4xf32>
  %v = ampc.load_parameter @bn.running_var : tensor<4xf32>
  %fw = ampc.load_parameter @fc.weight : tensor<2x4xf32>
  %fb = ampc.load_parameter @fc.bias : tensor<2xf32>
  %c = ampc.conv %x, %w, %cb {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x8x8xf32>
  %n, %rm, %rv = ampc.batch_normalization %c, %s, %bb, %m, %v {training_mode = 1 : i64} : (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x8x8xf32>, tensor<4xf32>, tensor<4xf32>)
  %r = ampc.relu %n : tensor<2x4x8x8xf32>
  %p, %idx = ampc.max_pool %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x4x8x8xf32>) -> (tensor<2x4x4x4xf32>, tensor<2x4x4x4xi64>)
  %q = ampc.average_pool %p {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<2x4x4x4xf32>) -> tensor<2x4x4x4xf32>
  %g = ampc.global_average_pool %q : (tensor<2x4x4x4xf32>) -> tensor<2x4x1x1xf32>
  %f = ampc.flatten %g : (tensor<2x4x1x1xf32>) -> tensor<2x4xf32>
  %logits = ampc.gemm %f, %fw, %fb {transB = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<2x2xf32>
  %loss, %logp = ampc.softmax_cross_entropy_loss %logits, %label : (tensor<2x2xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x2xf32>)
  return %loss : tensor<f32>
}

// -----

// Attention-like: an embedding Gather, LayerNormalization, batched MatMuls
// (one by a parameter matrix, folded into 2-D Gemms; one of two batched
// operands; one by a 1-D vector), a Transpose, a masked Where, Softmax, a
// residual Add, Gelu (tanh). The LayerNorm output y has three users, whose
// adjoints are added; the Gather input x has two (LayerNorm and the
// residual). The loss has one element but rank 1: the seed has its type and
// @train_step returns it as a rank-0 tensor.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<10x4xf32> {ampc.gradient_of = @emb}, tensor<4x4xf32> {ampc.gradient_of = @wq}, tensor<4xf32> {ampc.gradient_of = @g}, tensor<4xf32> {ampc.gradient_of = @v})
// CHECK: %[[X:.+]] = ampc.gather
// CHECK-NEXT: %[[Y:.+]], %[[MEAN:.+]], %[[RSTD:.+]] = ampc.layer_normalization %[[X]], %[[G:[^ ]+]] :
// CHECK-NEXT: %[[Q:.+]] = ampc.matmul %[[Y]], %[[WQ:[^ ]+]] :
// CHECK-NEXT: %[[KT:.+]] = ampc.transpose %[[Y]]
// CHECK-NEXT: %[[S:.+]] = ampc.matmul %[[Q]], %[[KT]]
// CHECK: %[[P:.+]] = ampc.softmax
// CHECK: %[[R:.+]] = ampc.add
// CHECK-NEXT: %[[H:.+]] = ampc.gelu %[[R]]
// CHECK: %[[L:.+]] = ampc.reshape %{{.+}} : tensor<1x1xf32> to tensor<1xf32>
// CHECK-NEXT: %[[SEED:.+]] = ampc.constant dense<1.000000e+00> : tensor<1xf32>
// The score MatMul by the vector v: [6, 4] x [4, 1] Gemms.
// CHECK: %[[VM:.+]] = ampc.reshape %[[V:.+]] : tensor<4xf32> to tensor<4x1xf32>
// CHECK: %[[HF:.+]] = ampc.reshape %[[H]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[GF:.+]] = ampc.reshape %{{.+}} : tensor<2x3x1xf32> to tensor<6x1xf32>
// CHECK-NEXT: %[[DHF:.+]] = ampc.gemm %[[GF]], %[[VM]] {transB = 1 : i64} : (tensor<6x1xf32>, tensor<4x1xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: %[[DH:.+]] = ampc.reshape %[[DHF]] : tensor<6x4xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DVM:.+]] = ampc.gemm %[[HF]], %[[GF]] {transA = 1 : i64} : (tensor<6x4xf32>, tensor<6x1xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[DV:.+]] = ampc.reshape %[[DVM]] : tensor<4x1xf32> to tensor<4xf32>
// CHECK-NEXT: %[[DR:.+]] = ampc.gelu_grad %[[DH]], %[[R]] {approximate = #ampc<approximate tanh>}
// p @ y, both batched: dp = dr @ y^T, dy = p^T @ dr.
// CHECK-NEXT: %[[YT:.+]] = ampc.transpose %[[Y]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %[[DP:.+]] = ampc.matmul %[[DR]], %[[YT]]
// CHECK-NEXT: %[[PT:.+]] = ampc.transpose %[[P]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %[[DY1:.+]] = ampc.matmul %[[PT]], %[[DR]]
// Softmax from its result, then the Where keeps the unmasked scores' adjoint.
// CHECK-NEXT: %[[DPP:.+]] = ampc.mul %[[DP]], %[[P]]
// CHECK-NEXT: %[[DOT:.+]] = ampc.reduce_sum %[[DPP]] {axes = array<i64: 2>}
// CHECK-NEXT: %[[DIFF:.+]] = ampc.sub %[[DP]], %[[DOT]]
// CHECK-NEXT: %[[DM:.+]] = ampc.mul %[[P]], %[[DIFF]]
// CHECK-NEXT: %[[ZERO:.+]] = ampc.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DS:.+]] = ampc.where %{{.+}}, %[[DM]], %[[ZERO]]
// q @ kt: dq = ds @ kt^T, dkt = q^T @ ds, and kt's adjoint transposed back.
// CHECK-NEXT: %[[KTT:.+]] = ampc.transpose %[[KT]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %[[DQ:.+]] = ampc.matmul %[[DS]], %[[KTT]]
// CHECK-NEXT: %[[QT:.+]] = ampc.transpose %[[Q]] {perm = array<i64: 0, 2, 1>}
// CHECK-NEXT: %[[DKT:.+]] = ampc.matmul %[[QT]], %[[DS]]
// CHECK-NEXT: %[[DY2:.+]] = ampc.transpose %[[DKT]] {perm = array<i64: 0, 2, 1>} : (tensor<2x4x3xf32>) -> tensor<2x3x4xf32>
// CHECK-NEXT: %[[DY12:.+]] = ampc.add %[[DY1]], %[[DY2]]
// y @ wq with the batch folded into the rows.
// CHECK-NEXT: %[[YF:.+]] = ampc.reshape %[[Y]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[DQF:.+]] = ampc.reshape %[[DQ]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[DYF:.+]] = ampc.gemm %[[DQF]], %[[WQ]] {transB = 1 : i64}
// CHECK-NEXT: %[[DY3:.+]] = ampc.reshape %[[DYF]] : tensor<6x4xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[DWQ:.+]] = ampc.gemm %[[YF]], %[[DQF]] {transA = 1 : i64} : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[DYALL:.+]] = ampc.add %[[DY12]], %[[DY3]]
// LayerNorm: layer_norm_grad for X, ReduceSums for Scale.
// CHECK-NEXT: %[[DXN:.+]] = ampc.layer_norm_grad %[[DYALL]], %[[X]], %[[G]], %[[MEAN]], %[[RSTD]]
// CHECK-NEXT: %[[XC:.+]] = ampc.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: %[[XHAT:.+]] = ampc.mul %[[XC]], %[[RSTD]]
// CHECK-NEXT: %[[DGX:.+]] = ampc.mul %[[DYALL]], %[[XHAT]]
// CHECK-NEXT: %[[DG:.+]] = ampc.reduce_sum %[[DGX]] {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[DX:.+]] = ampc.add %[[DR]], %[[DXN]]
// CHECK-NEXT: %[[DEMB:.+]] = ampc.gather_grad %[[DX]], %{{.+}} : (tensor<2x3x4xf32>, tensor<2x3xi64>) -> tensor<10x4xf32>
// CHECK-NEXT: %[[L0:.+]] = ampc.reshape %[[L]] : tensor<1xf32> to tensor<f32>
// CHECK-NEXT: return %[[L0]], %[[DEMB]], %[[DWQ]], %[[DG]], %[[DV]]
ampc.parameter @emb : tensor<10x4xf32> = dense<0.1> : tensor<10x4xf32>
ampc.parameter @wq : tensor<4x4xf32> = dense<0.2> : tensor<4x4xf32>
ampc.parameter @g : tensor<4xf32> = dense<1.0> : tensor<4xf32>
ampc.parameter @v : tensor<4xf32> = dense<0.3> : tensor<4xf32>
func.func @forward(%ids: tensor<2x3xi64>, %keep: tensor<2x3x3xi1>) -> tensor<1xf32> {
  %emb = ampc.load_parameter @emb : tensor<10x4xf32>
  %wq = ampc.load_parameter @wq : tensor<4x4xf32>
  %g = ampc.load_parameter @g : tensor<4xf32>
  %v = ampc.load_parameter @v : tensor<4xf32>
  %x = ampc.gather %emb, %ids {axis = 0 : i64} : (tensor<10x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %y, %mean, %rstd = ampc.layer_normalization %x, %g {axis = -1 : i64} : (tensor<2x3x4xf32>, tensor<4xf32>) -> (tensor<2x3x4xf32>, tensor<2x3x1xf32>, tensor<2x3x1xf32>)
  %q = ampc.matmul %y, %wq : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %kt = ampc.transpose %y {perm = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
  %s = ampc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
  %ninf = ampc.constant dense<-1.0e4> : tensor<f32>
  %masked = ampc.where %keep, %s, %ninf : (tensor<2x3x3xi1>, tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %p = ampc.softmax %masked {axis = -1 : i64} : tensor<2x3x3xf32>
  %o = ampc.matmul %p, %y : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %r = ampc.add %o, %x : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %h = ampc.gelu %r {approximate = #ampc<approximate tanh>} : tensor<2x3x4xf32>
  %score = ampc.matmul %h, %v : (tensor<2x3x4xf32>, tensor<4xf32>) -> tensor<2x3xf32>
  %loss = ampc.reduce_sum %score {axes = array<i64>} : (tensor<2x3xf32>) -> tensor<1x1xf32>
  %l1 = ampc.reshape %loss : tensor<1x1xf32> to tensor<1xf32>
  return %l1 : tensor<1xf32>
}

// -----

// Only values on a path from a trainable parameter to the loss get
// adjoints: exp(x) depends on no parameter (its rule is not called), and
// @idx reaches the loss only as integer Gather indices, so it gets no
// gradient. The table's adjoint is a scatter-add through the same indices.
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<4xf32> {ampc.gradient_of = @w}, tensor<3x4xf32> {ampc.gradient_of = @table})
// CHECK: %[[E:.+]] = ampc.exp
// CHECK-NEXT: %[[IDS:.+]] = ampc.cast %{{.+}} : tensor<2xf32> to tensor<2xi64>
// CHECK: %[[SEED:.+]] = ampc.constant dense<1.000000e+00>
// CHECK-NEXT: %[[S1:.+]] = ampc.reshape %[[SEED]] : tensor<f32> to tensor<1x1xf32>
// CHECK-NEXT: %[[DS:.+]] = ampc.expand %[[S1]] : tensor<1x1xf32> to tensor<2x4xf32>
// CHECK-NEXT: %[[DWM:.+]] = ampc.mul %[[DS]], %[[E]]
// CHECK-NEXT: %[[DW:.+]] = ampc.reduce_sum %[[DWM]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[DT:.+]] = ampc.gather_grad %[[DS]], %[[IDS]] : (tensor<2x4xf32>, tensor<2xi64>) -> tensor<3x4xf32>
// CHECK-NEXT: return %{{.+}}, %[[DW]], %[[DT]] : tensor<f32>, tensor<4xf32>, tensor<3x4xf32>
ampc.parameter @w : tensor<4xf32> = dense<0.5> : tensor<4xf32>
ampc.parameter @table : tensor<3x4xf32> = dense<0.5> : tensor<3x4xf32>
ampc.parameter @idx : tensor<2xf32> = dense<1.0> : tensor<2xf32>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<4xf32>
  %t = ampc.load_parameter @table : tensor<3x4xf32>
  %i = ampc.load_parameter @idx : tensor<2xf32>
  %e = ampc.exp %x : tensor<2x4xf32>
  %ids = ampc.cast %i : tensor<2xf32> to tensor<2xi64>
  %rows = ampc.gather %t, %ids {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %m = ampc.mul %e, %w : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %s = ampc.add %m, %rows : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %loss = ampc.reduce_sum %s {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
