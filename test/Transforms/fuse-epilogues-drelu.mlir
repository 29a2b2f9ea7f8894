// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues="fp32-weight-gradients=1" | FileCheck %s --check-prefix=CPU

// A Linear + ReLU and the next layer's input gradient as autodiff writes
// them (issue 37, item 3), FP32: with `backward` (the CUDA target) the
// forward Gemm also writes the ReLU's bit mask (relu_aux_bias: i8 rows of
// 16 columns rounded up to 128 bits), and the input-gradient Gemm masks
// its product by it and sums the masked rows into the bias gradient
// (drelu_bgrad): no relu_grad, no ReduceSum, and the weight gradient's
// Gemm has no bias gradient of its own left to take.
// CHECK-LABEL: func.func @mlp
// CHECK: %[[H:.+]], %[[M:.+]] = ampc.gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue relu_aux_bias>, transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> (tensor<8x16xf32>, tensor<8x16xi8>)
// CHECK: %[[DZ:.+]], %[[DB:.+]] = ampc.gemm %arg4, %arg3 relu_mask %[[M]] {epilogue = #ampc<epilogue drelu_bgrad>} : (tensor<8x3xf32>, tensor<3x16xf32>, tensor<8x16xi8>) -> (tensor<8x16xf32>, tensor<16xf32>)
// CHECK-NOT: ampc.relu_grad
// CHECK-NOT: ampc.reduce_sum
// CHECK: %[[DW:.+]] = ampc.gemm %[[DZ]], %arg0 {transA = 1 : i64} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
// CHECK: return %[[DW]], %[[DB]]
// The CPU target keeps the relu_grad and the ReduceSum.
// CPU-LABEL: func.func @mlp
// CPU: ampc.gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue relu_bias>, transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CPU: ampc.relu_grad
// CPU: ampc.reduce_sum
func.func @mlp(%x: tensor<8x4xf32>, %w1: tensor<16x4xf32>, %b1: tensor<16xf32>, %w2: tensor<3x16xf32>, %dy: tensor<8x3xf32>) -> (tensor<16x4xf32>, tensor<16xf32>, tensor<3x16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = ampc.relu %h0 : tensor<8x16xf32>
  %dw2 = ampc.gemm %dy, %h {transA = 1 : i64} : (tensor<8x3xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dz = ampc.relu_grad %dh, %h : tensor<8x16xf32>
  %db1 = ampc.reduce_sum %dz {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dw1 = ampc.gemm %dz, %x {transA = 1 : i64} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %dw1, %db1, %dw2 : tensor<16x4xf32>, tensor<16xf32>, tensor<3x16xf32>
}

// -----

// FP16 with FP32 gradients (the MLP under mixed precision): the bias
// gradient is an FP32 sum of the FP16 masked gradient, which DRELU_BGRAD
// would write in D's FP16. The input-gradient Gemm only masks (drelu),
// and the sum stays the weight gradient's FP32 bgrad_a.
// CHECK-LABEL: func.func @mixed
// CHECK: %[[H:.+]], %[[M:.+]] = ampc.gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue relu_aux_bias>, transB = 1 : i64} : (tensor<8x4xf16>, tensor<16x4xf16>, tensor<16xf16>) -> (tensor<8x16xf16>, tensor<8x16xi8>)
// CHECK: %[[DZ:.+]] = ampc.gemm %arg4, %arg3 relu_mask %[[M]] {epilogue = #ampc<epilogue drelu>} : (tensor<8x3xf16>, tensor<3x16xf16>, tensor<8x16xi8>) -> tensor<8x16xf16>
// CHECK-NOT: ampc.relu_grad
// CHECK-NOT: ampc.reduce_sum
// CHECK: %[[DW:.+]], %[[DB:.+]] = ampc.gemm %[[DZ]], %arg0 {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x4xf16>) -> (tensor<16x4xf32>, tensor<16xf32>)
// CHECK: return %[[DW]], %[[DB]]
func.func @mixed(%x: tensor<8x4xf16>, %w1: tensor<16x4xf16>, %b1: tensor<16xf16>, %w2: tensor<3x16xf16>, %dy: tensor<8x3xf16>) -> (tensor<16x4xf32>, tensor<16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf16>, tensor<16x4xf16>, tensor<16xf16>) -> tensor<8x16xf16>
  %h = ampc.relu %h0 : tensor<8x16xf16>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf16>, tensor<3x16xf16>) -> tensor<8x16xf16>
  %dz = ampc.relu_grad %dh, %h : tensor<8x16xf16>
  %s = ampc.reduce_sum %dz {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<8x16xf16>) -> tensor<16xf16>
  %db1 = ampc.cast %s {ampc.autocast} : tensor<16xf16> to tensor<16xf32>
  %g = ampc.gemm %dz, %x {transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x4xf16>) -> tensor<16x4xf16>
  %dw1 = ampc.cast %g {ampc.autocast} : tensor<16x4xf16> to tensor<16x4xf32>
  return %dw1, %db1 : tensor<16x4xf32>, tensor<16xf32>
}

// -----

// Not fused: the unmasked input gradient is read elsewhere (the Gemm's D
// would hold the masked one).
// CHECK-LABEL: func.func @unmasked_read
// CHECK: ampc.gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue relu_bias>, transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
// CHECK: ampc.gemm %arg4, %arg3 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
// CHECK: ampc.relu_grad
func.func @unmasked_read(%x: tensor<8x4xf32>, %w1: tensor<16x4xf32>, %b1: tensor<16xf32>, %w2: tensor<3x16xf32>, %dy: tensor<8x3xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = ampc.relu %h0 : tensor<8x16xf32>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dz = ampc.relu_grad %dh, %h : tensor<8x16xf32>
  return %dz, %dh : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Not fused: the Relu is not the forward Gemm's epilogue (the Gemm's own
// result is read elsewhere, so the Relu stays an op and there is no
// cuBLASLt mask to write).
// CHECK-LABEL: func.func @relu_not_folded
// CHECK: ampc.gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue bias>, transB = 1 : i64}
// CHECK: ampc.relu
// CHECK: ampc.gemm %arg4, %arg3 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
// CHECK: ampc.relu_grad
func.func @relu_not_folded(%x: tensor<8x4xf32>, %w1: tensor<16x4xf32>, %b1: tensor<16xf32>, %w2: tensor<3x16xf32>, %dy: tensor<8x3xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = ampc.relu %h0 : tensor<8x16xf32>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dz = ampc.relu_grad %dh, %h : tensor<8x16xf32>
  return %dz, %h0 : tensor<8x16xf32>, tensor<8x16xf32>
}

// -----

// Not fused: a LeakyRelu's gradient (alpha not 0) is not DRELU's, and an
// input gradient with a C added is not the plain product DRELU masks.
// CHECK-LABEL: func.func @not_relu
// CHECK-NOT: relu_aux
// CHECK-NOT: drelu
// CHECK: ampc.relu_grad {{.*}} {alpha = 1.000000e-01 : f32}
// CHECK: ampc.relu_grad
func.func @not_relu(%x: tensor<8x4xf32>, %w1: tensor<16x4xf32>, %b1: tensor<16xf32>, %w2: tensor<3x16xf32>, %dy: tensor<8x3xf32>, %c: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = ampc.relu %h0 : tensor<8x16xf32>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dz = ampc.relu_grad %dh, %h {alpha = 1.000000e-01 : f32} : tensor<8x16xf32>
  %dh2 = ampc.gemm %dy, %w2, %c : (tensor<8x3xf32>, tensor<3x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %dz2 = ampc.relu_grad %dh2, %h : tensor<8x16xf32>
  return %dz, %dz2 : tensor<8x16xf32>, tensor<8x16xf32>
}
