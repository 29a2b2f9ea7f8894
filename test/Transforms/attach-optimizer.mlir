// RUN: ampc-opt %s --split-input-file --ampc-attach-optimizer | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-attach-optimizer="kind=sgd lr=0.1 momentum=0.9 nesterov=true clip-grad-norm=1.0" | FileCheck %s --check-prefix=SGD
// RUN: ampc-opt %s --split-input-file --ampc-attach-optimizer="kind=none" | FileCheck %s --check-prefix=NONE
// RUN: not ampc-opt %s --split-input-file --ampc-attach-optimizer="kind=lion" 2>&1 | FileCheck %s --check-prefix=BADKIND --implicit-check-not="Cannot find option"
// RUN: not ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-attach-optimizer{kind=lion})" 2>&1 | FileCheck %s --check-prefix=BADKIND --implicit-check-not="Cannot find option"
// RUN: not ampc-opt %s --split-input-file --ampc-attach-optimizer="kind=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=BADNESTEROV

// AdamW (the default): the master weight is updated from the unscaled
// gradient, skipped on found_inf, its moments are state, the f16 copy the
// forward read is state written after the update, the step is counted
// unless skipped, and the step returns the loss only.
// CHECK: module attributes {ampc.hyperparameters = "lr=1.000000e-03 beta1=9.000000e-01 beta2=9.990000e-01 eps=1.000000e-08 weight_decay=0.01", ampc.loss_scaling = #ampc<loss_scaling dynamic>, ampc.optimizer = #ampc<optimizer adamw>}
// CHECK-DAG: ampc.state @ampc.lr : tensor<f32> = dense<1.000000e-03>
// CHECK-DAG: ampc.state @ampc.step : tensor<i64> = dense<0>
// CHECK-DAG: ampc.state @w.f16 {derived_from = @w} : tensor<2x3xf16>
// CHECK-DAG: ampc.state @w.exp_avg : tensor<2x3xf32>
// CHECK-DAG: ampc.state @w.exp_avg_sq : tensor<2x3xf32>
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"})
// CHECK-DAG: %[[V:.+]] = ampc.load_state @w.exp_avg_sq
// CHECK-DAG: %[[M:.+]] = ampc.load_state @w.exp_avg :
// CHECK-DAG: %[[W:.+]] = ampc.load_parameter @w
// CHECK-DAG: %[[W16:.+]] = ampc.load_state @w.f16
// CHECK-DAG: %[[STEP:.+]] = ampc.load_state @ampc.step
// CHECK-DAG: %[[LR:.+]] = ampc.load_state @ampc.lr
// CHECK-NOT: ampc.cast %{{.+}} : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK: ampc.gemm %{{.+}}, %[[W16]]
// CHECK: %[[U:.+]], %[[F:.+]] = ampc.unscale
// CHECK: %[[NEW:.+]], %[[MOM:.+]]:2 = ampc.optimizer_update %[[W]], %[[U]], %[[LR]], %[[STEP]] found_inf %[[F]] moments %[[M]], %[[V]] {kind = #ampc<optimizer adamw>, weight_decay = 0.00999999977 : f32}
// CHECK-NEXT: ampc.store @w, %[[NEW]]
// CHECK-NEXT: ampc.store @w.exp_avg, %[[MOM]]#0
// CHECK-NEXT: ampc.store @w.exp_avg_sq, %[[MOM]]#1
// CHECK-NEXT: %[[COPY:.+]] = ampc.cast %[[NEW]] : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK-NEXT: ampc.store @w.f16, %[[COPY]]
// CHECK: %[[COUNTED:.+]] = ampc.where %[[F]], %[[STEP]], %{{.+}}
// CHECK-NEXT: ampc.store @ampc.step, %[[COUNTED]]
// CHECK-NEXT: return %{{.+}} : tensor<f32>

// SGD with Nesterov momentum and clipping: one momentum buffer, the
// gradients clipped before the update.
// SGD: ampc.state @w.momentum_buffer : tensor<2x3xf32>
// SGD: %[[C:.+]] = ampc.clip_grad_norm %{{.+}} {max_norm = 1.000000e+00 : f32}
// SGD: ampc.optimizer_update %{{.+}}, %[[C]], {{.*}} moments %{{.+}} {kind = #ampc<optimizer sgd>, momentum = 0.899999976 : f32, nesterov = true}

// NONE-NOT: ampc.optimizer_update
// NONE: -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf32> {ampc.gradient_of = @w})

// BADKIND: error: ampc-attach-optimizer: kind must be sgd, adam, adamw or none, got 'lion'
// BADNESTEROV: error: ampc-attach-optimizer: expected {{.*}}nesterov only with momentum > 0 and dampening 0
module attributes {ampc.loss_scaling = #ampc<loss_scaling dynamic>} {
  ampc.parameter @w : tensor<2x3xf32> = dense<[[1.000000e-01, -2.000000e-01, 3.000000e-01], [4.000000e-01, 5.000000e-01, -6.000000e-01]]> : tensor<2x3xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32>
  func.func @train_step(%arg0: tensor<2x3xf16> {ampc.name = "x"}, %arg1: tensor<2x2xf32> {ampc.label, ampc.name = "label"}) -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf32> {ampc.gradient_of = @w}) {
    %s = ampc.load_state @ampc.loss_scale : tensor<f32>
    %0 = ampc.load_parameter @w : tensor<2x3xf32>
    %c = ampc.cast %0 {ampc.autocast} : tensor<2x3xf32> to tensor<2x3xf16>
    %1 = ampc.gemm %arg0, %c {transB = 1 : i64} : (tensor<2x3xf16>, tensor<2x3xf16>) -> tensor<2x2xf16>
    %2 = ampc.cast %1 : tensor<2x2xf16> to tensor<2x2xf32>
    %3 = ampc.sub %2, %arg1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %4 = ampc.mul %3, %3 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %5 = ampc.reduce_mean %4 {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
    %6 = ampc.reshape %s : tensor<f32> to tensor<1x1xf32>
    %7 = ampc.expand %6 : tensor<1x1xf32> to tensor<2x2xf32>
    %8 = ampc.mul %7, %3 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %9 = ampc.cast %8 : tensor<2x2xf32> to tensor<2x2xf16>
    %10 = ampc.gemm %9, %arg0 {transA = 1 : i64} : (tensor<2x2xf16>, tensor<2x3xf16>) -> tensor<2x3xf16>
    %11 = ampc.cast %10 : tensor<2x3xf16> to tensor<2x3xf32>
    %u, %f = ampc.unscale %s, %11 : (tensor<f32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<i1>)
    return %5, %u : tensor<f32>, tensor<2x3xf32>
  }
}
