// RUN: ampc-opt %s --ampc-assign-accumulation | FileCheck %s

// The type each accumulating op sums in: f32 for 16-bit and 32-bit floats,
// f64 when a float operand or result is f64, i64 for a reduction of
// signed integers (exact where FP32 would round past 2^24), ui64 for
// unsigned ones.

// CHECK-LABEL: func.func @decisions
func.func @decisions(%h: tensor<4x8xf16>, %d: tensor<4x8xf64>, %n: tensor<4x8xi64>, %k: tensor<4x8xi32>) -> (tensor<4xf16>, tensor<4xf64>, tensor<4xi64>, tensor<4xi32>, tensor<4xi64>) {
  // CHECK: ampc.reduce_sum {{.*}}ampc.accumulate = f32
  %0 = ampc.reduce_sum %h {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<4xf16>
  // CHECK: ampc.reduce_mean {{.*}}ampc.accumulate = f64
  %1 = ampc.reduce_mean %d {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf64>) -> tensor<4xf64>
  // CHECK: ampc.reduce_sum {{.*}}ampc.accumulate = i64
  %2 = ampc.reduce_sum %n {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xi64>) -> tensor<4xi64>
  // CHECK: ampc.reduce_max {{.*}}ampc.accumulate = i64
  %3 = ampc.reduce_max %k {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xi32>) -> tensor<4xi32>
  // CHECK: ampc.reduce_prod {{.*}}ampc.accumulate = i64
  %4 = ampc.reduce_prod %n {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xi64>) -> tensor<4xi64>
  return %0, %1, %2, %3, %4 : tensor<4xf16>, tensor<4xf64>, tensor<4xi64>, tensor<4xi32>, tensor<4xi64>
}

// Unsigned integers accumulate in ui64: int64 would compare values past
// 2^63 as negative and take the wrong maximum.
// CHECK-LABEL: func.func @unsigned
func.func @unsigned(%u: tensor<4x8xui64>, %w: tensor<4x8xui16>) -> (tensor<4xui64>, tensor<4xui16>) {
  // CHECK: ampc.reduce_max {{.*}}ampc.accumulate = ui64
  %0 = ampc.reduce_max %u {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xui64>) -> tensor<4xui64>
  // CHECK: ampc.reduce_sum {{.*}}ampc.accumulate = ui64
  %1 = ampc.reduce_sum %w {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xui16>) -> tensor<4xui16>
  return %0, %1 : tensor<4xui64>, tensor<4xui16>
}
