// RUN: ampc-opt %s --ampc-attach-optimizer | FileCheck %s

// Issue 37, item 6: a weight the forward reads transposed and cast (a
// Linear's W^T exports as Transpose, autocast casts the transposed value)
// reads the f16 copy too, transposed as the master was: the cast kernel
// that ran every step is gone and the copy is written by the update (a cast
// commutes with a transpose, so the GEMM reads the same bits). Before, only
// a cast of the load itself was matched and this cast stayed.
// CHECK-DAG: ampc.state @w.f16 {derived_from = @w} : tensor<3x2xf16>
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[W16:.+]] = ampc.load_state @w.f16 : tensor<3x2xf16>
// CHECK-NOT: ampc.cast %{{.+}} : tensor<2x3xf32> to tensor<2x3xf16>
// CHECK: %[[T:.+]] = ampc.transpose %[[W16]] {perm = array<i64: 1, 0>} : (tensor<3x2xf16>) -> tensor<2x3xf16>
// CHECK-NEXT: ampc.gemm %{{.+}}, %[[T]]
// CHECK: %[[NEW:.+]], %{{.+}}:2 = ampc.optimizer_update
// CHECK: %[[COPY:.+]] = ampc.cast %[[NEW]] : tensor<3x2xf32> to tensor<3x2xf16>
// CHECK-NEXT: ampc.store @w.f16, %[[COPY]]
module attributes {ampc.loss_scaling = #ampc<loss_scaling dynamic>} {
  ampc.parameter @w : tensor<3x2xf32> = dense<[[1.000000e-01, -2.000000e-01], [3.000000e-01, 4.000000e-01], [5.000000e-01, -6.000000e-01]]> : tensor<3x2xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32>
  func.func @train_step(%arg0: tensor<2x3xf16> {ampc.name = "x"}, %arg1: tensor<2x2xf32> {ampc.label, ampc.name = "label"}) -> (tensor<f32> {ampc.name = "loss"}, tensor<3x2xf32> {ampc.gradient_of = @w}) {
    %s = ampc.load_state @ampc.loss_scale : tensor<f32>
    %0 = ampc.load_parameter @w : tensor<3x2xf32>
    %t = ampc.transpose %0 {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
    %c = ampc.cast %t {ampc.autocast} : tensor<2x3xf32> to tensor<2x3xf16>
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
    %12 = ampc.transpose %11 {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
    %u, %f = ampc.unscale %s, %12 : (tensor<f32>, tensor<3x2xf32>) -> (tensor<3x2xf32>, tensor<i1>)
    return %5, %u : tensor<f32>, tensor<3x2xf32>
  }
}
