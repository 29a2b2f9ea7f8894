// RUN: ampc-opt %s --split-input-file --canonicalize | FileCheck %s

// Dropout outside training mode, or with a ratio of 0, is the identity with
// an all-true mask: canonicalization (the kernel part's first step) folds
// it to its input and a constant, so no target sees such a Dropout (issue
// 40, item 4).

// CHECK-LABEL: func.func @eval_mode
// CHECK-NOT: ampc.dropout
// CHECK: %[[M:.+]] = ampc.constant dense<true> : tensor<4x8xi1>
// CHECK: return %arg0, %[[M]]
func.func @eval_mode(%x: tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>) {
  %y, %mask = ampc.dropout %x {ratio = 3.000000e-01 : f32} : (tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xi1>)
  return %y, %mask : tensor<4x8xf16>, tensor<4x8xi1>
}

// -----

// CHECK-LABEL: func.func @ratio_zero
// CHECK-NOT: ampc.dropout
// CHECK: return %arg0
func.func @ratio_zero(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y, %mask = ampc.dropout %x {ratio = 0.000000e+00 : f32, training_mode = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return %y : tensor<4x8xf32>
}

// -----

// In training mode with a ratio above 0 it stays: its masks are random.
// CHECK-LABEL: func.func @training
// CHECK: %[[Y:.+]], %[[M:.+]] = ampc.dropout %arg0 {ratio = 1.000000e-01 : f32, training_mode = 1 : i64}
// CHECK: return %[[Y]], %[[M]]
func.func @training(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>) {
  %y, %mask = ampc.dropout %x {ratio = 1.000000e-01 : f32, training_mode = 1 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return %y, %mask : tensor<4x8xf32>, tensor<4x8xi1>
}
