// RUN: not ampc-opt %s -split-input-file 2>&1 | FileCheck %s --implicit-check-not='tensor<-'

// Shape rules must not compute sizes from ShapedType::kDynamic or overflow
// int64: each case is rejected with an error, and no message or printed type
// holds a negative dimension.

// The ops are documented as statically shaped, but a dynamic operand passes
// the ODS constraint.
// CHECK: error: {{.*}}'ampc.concat'
func.func @concat_dynamic(%a: tensor<?x4xf32>, %b: tensor<2x4xf32>) -> tensor<?x4xf32> {
  %0 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<?x4xf32>, tensor<2x4xf32>) -> tensor<?x4xf32>
  return %0 : tensor<?x4xf32>
}

// -----

// The window span (3 - 1) * dilation + 1 overflows int64; the window cannot
// fit an 8x8 input, so no result type is right.
// CHECK: error: {{.*}}ampc.conv
func.func @conv_dilation_overflow(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) -> tensor<1x4x10x6xf32> {
  %0 = ampc.conv %x, %w {dilations = array<i64: 9223372036854775807, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x10x6xf32>
  return %0 : tensor<1x4x10x6xf32>
}
