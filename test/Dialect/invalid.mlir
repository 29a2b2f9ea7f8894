// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// One invalid op per section. Shape-rule violations are reported by the op's
// inferReturnTypes as "ampc.<op>: <message>", followed by MLIR's generic
// "failed to infer returned types"; verifier errors use emitOpError wording;
// operand type constraints use the ODS wording.

//===----------------------------------------------------------------------===//
// Constants and parameters
//===----------------------------------------------------------------------===//

// expected-error @+1 {{'ampc.parameter' op initial value has type 'tensor<3xf32>', expected 'tensor<2xf32>'}}
ampc.parameter @w : tensor<2xf32> = dense<1.0> : tensor<3xf32>

// -----

// expected-error @+1 {{'ampc.parameter' op initial value has type 'tensor<2xf16>', expected 'tensor<2xf32>'}}
ampc.parameter @w : tensor<2xf32> = dense<1.0> : tensor<2xf16>

// -----

// expected-error @+1 {{'ampc.parameter' op attribute 'type' failed to satisfy constraint: type attribute of statically shaped tensor of floating-point values}}
ampc.parameter @step : tensor<i64> = dense<0> : tensor<i64>

// -----

func.func @load_unknown_symbol() -> tensor<2xf32> {
  // expected-error @+1 {{'ampc.load_parameter' op 'missing' is not an ampc.parameter}}
  %0 = ampc.load_parameter @missing : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @not_a_parameter() {
  return
}

func.func @load_function_symbol() -> tensor<2xf32> {
  // expected-error @+1 {{'ampc.load_parameter' op 'not_a_parameter' is not an ampc.parameter}}
  %0 = ampc.load_parameter @not_a_parameter : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

ampc.parameter @w : tensor<2xf32> = dense<1.0> : tensor<2xf32>

func.func @load_wrong_type() -> tensor<3xf32> {
  // expected-error @+1 {{'ampc.load_parameter' op result type 'tensor<3xf32>' does not match parameter type 'tensor<2xf32>'}}
  %0 = ampc.load_parameter @w : tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

ampc.parameter @w : tensor<2xf32> = dense<1.0> : tensor<2xf32>

func.func @load_wrong_element_type() -> tensor<2xf16> {
  // expected-error @+1 {{'ampc.load_parameter' op result type 'tensor<2xf16>' does not match parameter type 'tensor<2xf32>'}}
  %0 = ampc.load_parameter @w : tensor<2xf16>
  return %0 : tensor<2xf16>
}

// -----

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

func.func @sqrt_of_integers(%x: tensor<4xi64>) {
  // expected-error @+1 {{'ampc.sqrt' op operand #0 must be statically shaped tensor of floating-point values, but got 'tensor<4xi64>'}}
  %0 = ampc.sqrt %x : tensor<4xi64>
  return
}

// -----

// Enum attributes: the attribute parser knows the words, the op the enum.
func.func @gelu_bad_approximate(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{expected ::ampc::GeluApproximate to be one of: none, tanh}}
  // expected-error @+1 {{failed to parse AMPC_GeluApproximateAttr parameter 'value'}}
  %0 = ampc.gelu %x {approximate = #ampc<approximate fast>} : tensor<4x8xf32>
  return
}

// -----

// The string form of the attribute, before it was an enum.
func.func @gelu_approximate_string(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'ampc.gelu' op attribute 'approximate' failed to satisfy constraint: a Gelu approximation}}
  %0 = ampc.gelu %x {approximate = "tanh"} : tensor<4x8xf32>
  return
}

// -----

func.func @add_no_broadcast(%a: tensor<4x8xf32>, %b: tensor<3x8xf32>) {
  // expected-error @+2 {{ampc.add: shapes [4, 8] and [3, 8] do not broadcast}}
  // expected-error @+1 {{'ampc.add' op failed to infer returned types}}
  %0 = ampc.add %a, %b : (tensor<4x8xf32>, tensor<3x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @mul_element_types_differ(%a: tensor<4xf32>, %b: tensor<4xf16>) {
  // expected-error @+2 {{ampc.mul: operand element types differ: f32 vs f16}}
  // expected-error @+1 {{'ampc.mul' op failed to infer returned types}}
  %0 = ampc.mul %a, %b : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @add_wrong_result_type(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+2 {{'ampc.add' op inferred type(s) 'tensor<4x8xf32>' are incompatible with return type(s) of operation 'tensor<9x9xf32>'}}
  // expected-error @+1 {{'ampc.add' op failed to infer returned types}}
  %0 = ampc.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<9x9xf32>
  return
}

// -----

func.func @equal_wrong_result_element(%a: tensor<4xi64>, %b: tensor<i64>) {
  // expected-error @+2 {{'ampc.equal' op inferred type(s) 'tensor<4xi1>' are incompatible with return type(s) of operation 'tensor<4xi64>'}}
  // expected-error @+1 {{'ampc.equal' op failed to infer returned types}}
  %0 = ampc.equal %a, %b : (tensor<4xi64>, tensor<i64>) -> tensor<4xi64>
  return
}

// -----

func.func @pow_no_broadcast(%a: tensor<4xf32>, %b: tensor<3xi32>) {
  // expected-error @+2 {{ampc.pow: shapes [4] and [3] do not broadcast}}
  // expected-error @+1 {{'ampc.pow' op failed to infer returned types}}
  %0 = ampc.pow %a, %b : (tensor<4xf32>, tensor<3xi32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_element_types_differ(%c: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf16>) {
  // expected-error @+2 {{ampc.where: x and y element types differ: f32 vs f16}}
  // expected-error @+1 {{'ampc.where' op failed to infer returned types}}
  %0 = ampc.where %c, %x, %y : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  return
}

// -----

func.func @where_no_broadcast(%c: tensor<3xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>) {
  // expected-error @+2 {{ampc.where: shapes [3] and [4] and [4] do not broadcast}}
  // expected-error @+1 {{'ampc.where' op failed to infer returned types}}
  %0 = ampc.where %c, %x, %y : (tensor<3xi1>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @where_condition_not_bool(%c: tensor<4xi8>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.where' op operand #0 must be statically shaped tensor of 1-bit signless integer values, but got 'tensor<4xi8>'}}
  %0 = ampc.where %c, %x, %x : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @cast_shape_change(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'ampc.cast' op result shape [16] differs from operand shape [2, 8]}}
  %0 = ampc.cast %a : tensor<2x8xf32> to tensor<16xf16>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Contractions
//===----------------------------------------------------------------------===//

func.func @matmul_inner_mismatch(%a: tensor<4x8xf32>, %b: tensor<9x4xf32>) {
  // expected-error @+2 {{ampc.matmul: inner dimensions differ: [4, 8] x [9, 4]}}
  // expected-error @+1 {{'ampc.matmul' op failed to infer returned types}}
  %0 = ampc.matmul %a, %b : (tensor<4x8xf32>, tensor<9x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @matmul_batch_mismatch(%a: tensor<2x4x8xf32>, %b: tensor<3x8x4xf32>) {
  // expected-error @+2 {{ampc.matmul: batch dimensions of [2, 4, 8] and [3, 8, 4] do not broadcast}}
  // expected-error @+1 {{'ampc.matmul' op failed to infer returned types}}
  %0 = ampc.matmul %a, %b : (tensor<2x4x8xf32>, tensor<3x8x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

func.func @matmul_scalar(%a: tensor<f32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{ampc.matmul: operands must have rank >= 1}}
  // expected-error @+1 {{'ampc.matmul' op failed to infer returned types}}
  %0 = ampc.matmul %a, %b : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @matmul_element_types_differ(%a: tensor<4x8xf32>, %b: tensor<8x4xf16>) {
  // expected-error @+2 {{ampc.matmul: operand element types differ: f32 vs f16}}
  // expected-error @+1 {{'ampc.matmul' op failed to infer returned types}}
  %0 = ampc.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf16>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_trans_a_out_of_range(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{ampc.gemm: 'transA' must be 0 or 1, got 3}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b {transA = 3 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_trans_b_out_of_range(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{ampc.gemm: 'transB' must be 0 or 1, got -1}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b {transB = -1 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_not_matrices(%a: tensor<2x4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{ampc.gemm: A and B must be matrices, got shapes [2, 4, 8] and [8, 4]}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_inner_mismatch(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.gemm: inner dimensions differ: op(A) is [4, 8], op(B) is [4, 8]}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @gemm_element_types_differ(%a: tensor<4x8xf32>, %b: tensor<8x4xf16>) {
  // expected-error @+2 {{ampc.gemm: A and B element types differ}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b : (tensor<4x8xf32>, tensor<8x4xf16>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_bias_no_broadcast(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<4xf32>) {
  // expected-error @+2 {{ampc.gemm: C of shape [4] does not broadcast to [4, 16]}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b, %c : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<4xf32>) -> tensor<4x16xf32>
  return
}

// -----

func.func @gemm_bias_element_type(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>, %c: tensor<16xf16>) {
  // expected-error @+2 {{ampc.gemm: C element type differs from A's}}
  // expected-error @+1 {{'ampc.gemm' op failed to infer returned types}}
  %0 = ampc.gemm %a, %b, %c : (tensor<4x8xf32>, tensor<8x16xf32>, tensor<16xf16>) -> tensor<4x16xf32>
  return
}

// -----

func.func @conv_group_channel_mismatch(%x: tensor<1x6x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: W of shape [4, 4, 3, 3] does not match 6 input channels in 2 group(s)}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {group = 2 : i64} : (tensor<1x6x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_channel_mismatch(%x: tensor<1x3x8x8xf32>, %w: tensor<4x2x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: W of shape [4, 2, 3, 3] does not match 3 input channels in 1 group(s)}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x2x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_group_zero(%x: tensor<1x4x8x8xf32>, %w: tensor<4x4x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: 'group' must be >= 1, got 0}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {group = 0 : i64} : (tensor<1x4x8x8xf32>, tensor<4x4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_bad_pads_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: 'pads' has 2 values, expected 4}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {pads = array<i64: 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  return
}

// -----

func.func @conv_negative_pads(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: 'pads' values must be >= 0, got [1, -1, 1, 1]}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {pads = array<i64: 1, -1, 1, 1>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x6xf32>
  return
}

// -----

func.func @conv_zero_stride(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: 'strides' values must be >= 1, got [1, 0]}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {strides = array<i64: 1, 0>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_bad_dilations_length(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: 'dilations' has 1 values, expected 2}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w {dilations = array<i64: 2>} : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  return
}

// -----

func.func @conv_rank_too_small(%x: tensor<3x8xf32>, %w: tensor<4x3xf32>) {
  // expected-error @+2 {{ampc.conv: X must be (N, C, spatial...), got shape [3, 8]}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w : (tensor<3x8xf32>, tensor<4x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @conv_rank_mismatch(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: W rank 3 differs from X rank 4}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_element_types_differ(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf16>) {
  // expected-error @+2 {{ampc.conv: X and W element types differ}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf16>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_bias_shape(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{ampc.conv: B must have shape [4], got [3]}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  return
}

// -----

func.func @conv_kernel_too_large(%x: tensor<1x3x2x2xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: window [3, 3] does not fit input spatial shape [2, 2]}}
  // expected-error @+1 {{'ampc.conv' op failed to infer returned types}}
  %0 = ampc.conv %x, %w : (tensor<1x3x2x2xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x1x1xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

func.func @softmax_axis_out_of_range(%x: tensor<4x10xf32>) {
  // expected-error @+2 {{ampc.softmax: 'axis' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.softmax' op failed to infer returned types}}
  %0 = ampc.softmax %x {axis = 2 : i64} : tensor<4x10xf32>
  return
}

// -----

func.func @log_softmax_axis_out_of_range(%x: tensor<4x10xf32>) {
  // expected-error @+2 {{ampc.log_softmax: 'axis' -3 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.log_softmax' op failed to infer returned types}}
  %0 = ampc.log_softmax %x {axis = -3 : i64} : tensor<4x10xf32>
  return
}

// -----

func.func @layer_norm_bad_stash_type(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{ampc.layer_normalization: 'stash_type' must name a float type (1, 10, 11 or 16), got 7}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g {stash_type = 7 : i64} : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

// Y may be f16/bf16 only where X is FP32 (ampc-fold-casts), never wider.
func.func @layer_norm_wide_y(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{'ampc.layer_normalization' op inferred type(s) 'tensor<2x16x64xf32>', 'tensor<2x16x1xf32>', 'tensor<2x16x1xf32>' are incompatible with return type(s) of operation 'tensor<2x16x64xf64>', 'tensor<2x16x1xf32>', 'tensor<2x16x1xf32>'}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf64>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

func.func @layer_norm_wrong_stat_type(%x: tensor<2x16x64xf16>, %g: tensor<64xf16>) {
  // expected-error @+2 {{'ampc.layer_normalization' op inferred type(s) 'tensor<2x16x64xf16>', 'tensor<2x16x1xf32>', 'tensor<2x16x1xf32>' are incompatible with return type(s) of operation 'tensor<2x16x64xf16>', 'tensor<2x16x1xf16>', 'tensor<2x16x1xf16>'}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g : (tensor<2x16x64xf16>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf16>, tensor<2x16x1xf16>)
  return
}

// -----

func.func @layer_norm_axis_out_of_range(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{ampc.layer_normalization: 'axis' 3 is out of range for rank 3}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g {axis = 3 : i64} : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

func.func @layer_norm_negative_epsilon(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>) {
  // expected-error @+2 {{ampc.layer_normalization: 'epsilon' must be >= 0}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g {epsilon = -1.0 : f32} : (tensor<2x16x64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

func.func @layer_norm_scale_shape(%x: tensor<2x16x64xf32>, %g: tensor<32xf32>) {
  // expected-error @+2 {{ampc.layer_normalization: Scale of shape [32] does not broadcast to the normalised shape [64]}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g : (tensor<2x16x64xf32>, tensor<32xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

func.func @layer_norm_bias_shape(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<16x64xf32>) {
  // expected-error @+2 {{ampc.layer_normalization: B of shape [16, 64] does not broadcast to the normalised shape [64]}}
  // expected-error @+1 {{'ampc.layer_normalization' op failed to infer returned types}}
  %0:3 = ampc.layer_normalization %x, %g, %b : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<16x64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return
}

// -----

func.func @batch_norm_wrong_stat_shape(%x: tensor<2x16x8x8xf32>, %s: tensor<16xf32>, %m: tensor<8xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: input_mean must have shape [16], got [8]}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:3 = ampc.batch_normalization %x, %s, %s, %m, %s : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<8xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<8xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_residual_type(%x: tensor<2x16x8x8xf16>, %s: tensor<16xf32>, %r: tensor<2x16x8x8xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: residual must have X's type tensor<2x16x8x8xf16>, got tensor<2x16x8x8xf32>}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:3 = ampc.batch_normalization %x, %s, %s, %s, %s residual %r {relu} : (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_grad_relu_output_type(%g: tensor<2x16x8x8xf16>, %s: tensor<16xf32>, %y: tensor<2x16x8x8xf32>) {
  // expected-error @+2 {{ampc.batch_norm_grad: relu_output type tensor<2x16x8x8xf32> differs from input type tensor<2x16x8x8xf16>}}
  // expected-error @+1 {{'ampc.batch_norm_grad' op failed to infer returned types}}
  %0:3 = ampc.batch_norm_grad %g, %g, %s, %s, %s relu_output %y : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<2x16x8x8xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_wrong_scale_shape(%x: tensor<2x16x8x8xf32>, %s: tensor<16xf32>, %g: tensor<1x16xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: scale must have shape [16], got [1, 16]}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:3 = ampc.batch_normalization %x, %g, %s, %s, %s : (tensor<2x16x8x8xf32>, tensor<1x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_training_mode(%x: tensor<2x16x8x8xf32>, %s: tensor<16xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: 'training_mode' must be 0 or 1, got 2}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:3 = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 2 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_rank_too_small(%x: tensor<16xf32>, %s: tensor<16xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: X must be (N, C, ...), got shape [16]}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:3 = ampc.batch_normalization %x, %s, %s, %s, %s : (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @dropout_ratio_one(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.dropout: 'ratio' must be in [0, 1), got 1.000000}}
  // expected-error @+1 {{'ampc.dropout' op failed to infer returned types}}
  %0:2 = ampc.dropout %x {ratio = 1.0 : f32} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return
}

// -----

func.func @dropout_ratio_negative(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.dropout: 'ratio' must be in [0, 1), got -0.100000}}
  // expected-error @+1 {{'ampc.dropout' op failed to infer returned types}}
  %0:2 = ampc.dropout %x {ratio = -0.1 : f32} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return
}

// -----

func.func @dropout_training_mode(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.dropout: 'training_mode' must be 0 or 1, got 5}}
  // expected-error @+1 {{'ampc.dropout' op failed to infer returned types}}
  %0:2 = ampc.dropout %x {training_mode = 5 : i64} : (tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xi1>)
  return
}

// -----

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

func.func @reshape_element_count(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'ampc.reshape' op cannot reshape [2, 8] (16 elements) to [3, 5] (15 elements)}}
  %0 = ampc.reshape %a : tensor<2x8xf32> to tensor<3x5xf32>
  return
}

// -----

func.func @reshape_element_type(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'ampc.reshape' op result element type differs from the operand's}}
  %0 = ampc.reshape %a : tensor<2x8xf32> to tensor<16xf16>
  return
}

// -----

func.func @reshape_dynamic(%a: tensor<?x8xf32>) {
  // expected-error @+1 {{'ampc.reshape' op operand #0 must be statically shaped tensor of any type values, but got 'tensor<?x8xf32>'}}
  %0 = ampc.reshape %a : tensor<?x8xf32> to tensor<16xf32>
  return
}

// -----

func.func @expand_not_broadcastable(%a: tensor<2x8xf32>) {
  // expected-error @+1 {{'ampc.expand' op cannot expand [2, 8] to [3, 8]}}
  %0 = ampc.expand %a : tensor<2x8xf32> to tensor<3x8xf32>
  return
}

// -----

func.func @expand_to_smaller_rank(%a: tensor<1x8xf32>) {
  // expected-error @+1 {{'ampc.expand' op cannot expand [1, 8] to [8]}}
  %0 = ampc.expand %a : tensor<1x8xf32> to tensor<8xf32>
  return
}

// -----

func.func @expand_element_type(%a: tensor<1x8xf32>) {
  // expected-error @+1 {{'ampc.expand' op result element type differs from the operand's}}
  %0 = ampc.expand %a : tensor<1x8xf32> to tensor<4x8xf16>
  return
}

// -----

func.func @transpose_bad_perm(%x: tensor<4x8x2xf32>) {
  // expected-error @+2 {{ampc.transpose: 'perm' [0, 0, 1] is not a permutation of rank 3}}
  // expected-error @+1 {{'ampc.transpose' op failed to infer returned types}}
  %0 = ampc.transpose %x {perm = array<i64: 0, 0, 1>} : (tensor<4x8x2xf32>) -> tensor<4x4x8xf32>
  return
}

// -----

func.func @transpose_perm_length(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.transpose: 'perm' [1, 0, 2] is not a permutation of rank 2}}
  // expected-error @+1 {{'ampc.transpose' op failed to infer returned types}}
  %0 = ampc.transpose %x {perm = array<i64: 1, 0, 2>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @flatten_axis_out_of_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.flatten: 'axis' 3 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.flatten' op failed to infer returned types}}
  %0 = ampc.flatten %x {axis = 3 : i64} : (tensor<4x8xf32>) -> tensor<32x1xf32>
  return
}

// -----

func.func @squeeze_non_one_dim(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{ampc.squeeze: cannot squeeze dimension 1 of size 8}}
  // expected-error @+1 {{'ampc.squeeze' op failed to infer returned types}}
  %0 = ampc.squeeze %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @squeeze_axis_out_of_range(%x: tensor<1x8xf32>) {
  // expected-error @+2 {{ampc.squeeze: 'axes' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.squeeze' op failed to infer returned types}}
  %0 = ampc.squeeze %x {axes = array<i64: 2>} : (tensor<1x8xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @unsqueeze_duplicate_axes(%x: tensor<8xf32>) {
  // expected-error @+2 {{ampc.unsqueeze: 'axes' [0, -3] names dimension 0 twice}}
  // expected-error @+1 {{'ampc.unsqueeze' op failed to infer returned types}}
  %0 = ampc.unsqueeze %x {axes = array<i64: 0, -3>} : (tensor<8xf32>) -> tensor<1x1x8xf32>
  return
}

// -----

func.func @unsqueeze_axis_out_of_range(%x: tensor<8xf32>) {
  // expected-error @+2 {{ampc.unsqueeze: 'axes' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.unsqueeze' op failed to infer returned types}}
  %0 = ampc.unsqueeze %x {axes = array<i64: 2>} : (tensor<8xf32>) -> tensor<8x1xf32>
  return
}

// -----

func.func @concat_mismatched_dims(%a: tensor<2x8xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.concat: input shapes [2, 8] and [3, 4] differ outside axis 0}}
  // expected-error @+1 {{'ampc.concat' op failed to infer returned types}}
  %0 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf32>, tensor<3x4xf32>) -> tensor<5x8xf32>
  return
}

// -----

func.func @concat_mismatched_ranks(%a: tensor<2x8xf32>, %b: tensor<8xf32>) {
  // expected-error @+2 {{ampc.concat: input shapes [2, 8] and [8] differ outside axis 0}}
  // expected-error @+1 {{'ampc.concat' op failed to infer returned types}}
  %0 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<3x8xf32>
  return
}

// -----

func.func @concat_element_types_differ(%a: tensor<2x8xf32>, %b: tensor<2x8xf16>) {
  // expected-error @+2 {{ampc.concat: input element types differ}}
  // expected-error @+1 {{'ampc.concat' op failed to infer returned types}}
  %0 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf32>, tensor<2x8xf16>) -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_axis_out_of_range(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.concat: 'axis' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.concat' op failed to infer returned types}}
  %0 = ampc.concat %a, %a {axis = 2 : i64} : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x16xf32>
  return
}

// -----

func.func @concat_no_inputs() {
  // expected-error @+2 {{ampc.concat: needs at least one input}}
  // expected-error @+1 {{'ampc.concat' op failed to infer returned types}}
  %0 = ampc.concat {axis = 0 : i64} : () -> tensor<0xf32>
  return
}

// -----

func.func @slice_zero_step(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.slice: 'steps' must not contain 0}}
  // expected-error @+1 {{'ampc.slice' op failed to infer returned types}}
  %0 = ampc.slice %a {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 0>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_length_mismatch(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.slice: 'starts', 'ends', 'axes' and 'steps' must have the same length}}
  // expected-error @+1 {{'ampc.slice' op failed to infer returned types}}
  %0 = ampc.slice %a {axes = array<i64: 1>, ends = array<i64: 4, 2>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @slice_duplicate_axes(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.slice: 'axes' [1, -1] names dimension 1 twice}}
  // expected-error @+1 {{'ampc.slice' op failed to infer returned types}}
  %0 = ampc.slice %a {axes = array<i64: 1, -1>, ends = array<i64: 4, 4>, starts = array<i64: 0, 0>, steps = array<i64: 1, 1>} : (tensor<2x8xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_axis_out_of_range(%t: tensor<10x4xf32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{ampc.gather: 'axis' -3 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.gather' op failed to infer returned types}}
  %0 = ampc.gather %t, %i {axis = -3 : i64} : (tensor<10x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_scalar_data(%t: tensor<f32>, %i: tensor<3xi64>) {
  // expected-error @+2 {{ampc.gather: data must have rank >= 1}}
  // expected-error @+1 {{'ampc.gather' op failed to infer returned types}}
  %0 = ampc.gather %t, %i : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_float_indices(%t: tensor<10x4xf32>, %i: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.gather' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values, but got 'tensor<3xf32>'}}
  %0 = ampc.gather %t, %i : (tensor<10x4xf32>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @shape_wrong_result(%x: tensor<2x16x64xf32>) {
  // expected-error @+2 {{'ampc.shape' op inferred type(s) 'tensor<3xi64>' are incompatible with return type(s) of operation 'tensor<2xi64>'}}
  // expected-error @+1 {{'ampc.shape' op failed to infer returned types}}
  %0 = ampc.shape %x : (tensor<2x16x64xf32>) -> tensor<2xi64>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Reductions and pooling
//===----------------------------------------------------------------------===//

// A sum of FP16/BF16 may write FP32 (its accumulator); no other type
// change, and no other reduction widens.
func.func @reduce_sum_narrowed(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{'ampc.reduce_sum' op inferred type(s) 'tensor<2xf32>' are incompatible with return type(s) of operation 'tensor<2xf16>'}}
  // expected-error @+1 {{'ampc.reduce_sum' op failed to infer returned types}}
  %0 = ampc.reduce_sum %a {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x8xf32>) -> tensor<2xf16>
  return
}

// -----

func.func @reduce_max_widened(%a: tensor<2x8xf16>) {
  // expected-error @+2 {{'ampc.reduce_max' op inferred type(s) 'tensor<2xf16>' are incompatible with return type(s) of operation 'tensor<2xf32>'}}
  // expected-error @+1 {{'ampc.reduce_max' op failed to infer returned types}}
  %0 = ampc.reduce_max %a {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x8xf16>) -> tensor<2xf32>
  return
}

// -----

func.func @reduce_axes_out_of_range(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.reduce_sum: 'axes' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.reduce_sum' op failed to infer returned types}}
  %0 = ampc.reduce_sum %a {axes = array<i64: 2>} : (tensor<2x8xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @reduce_duplicate_axes(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.reduce_mean: 'axes' [1, -1] names dimension 1 twice}}
  // expected-error @+1 {{'ampc.reduce_mean' op failed to infer returned types}}
  %0 = ampc.reduce_mean %a {axes = array<i64: 1, -1>} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @reduce_keepdims(%a: tensor<2x8xf32>) {
  // expected-error @+2 {{ampc.reduce_max: 'keepdims' must be 0 or 1, got 2}}
  // expected-error @+1 {{'ampc.reduce_max' op failed to infer returned types}}
  %0 = ampc.reduce_max %a {axes = array<i64: 1>, keepdims = 2 : i64} : (tensor<2x8xf32>) -> tensor<2x1xf32>
  return
}

// -----

func.func @average_pool_window_too_large(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.average_pool: window [5, 5] does not fit input spatial shape [4, 4]}}
  // expected-error @+1 {{'ampc.average_pool' op failed to infer returned types}}
  %0 = ampc.average_pool %x {kernel_shape = array<i64: 5, 5>} : (tensor<1x3x4x4xf32>) -> tensor<1x3x1x1xf32>
  return
}

// -----

func.func @max_pool_window_too_large(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: window [3, 5] does not fit input spatial shape [4, 4]}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 3, 5>} : (tensor<1x3x4x4xf32>) -> (tensor<1x3x2x1xf32>, tensor<1x3x2x1xi64>)
  return
}

// -----

func.func @max_pool_kernel_length(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: 'kernel_shape' has 1 values, expected 2}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 2>} : (tensor<1x3x4x4xf32>) -> (tensor<1x3x3x3xf32>, tensor<1x3x3x3xi64>)
  return
}

// -----

func.func @max_pool_kernel_zero(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: 'kernel_shape' values must be >= 1, got [0, 2]}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 0, 2>} : (tensor<1x3x4x4xf32>) -> (tensor<1x3x3x3xf32>, tensor<1x3x3x3xi64>)
  return
}

// -----

func.func @max_pool_storage_order(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: 'storage_order' must be 0 or 1, got 2}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 2, 2>, storage_order = 2 : i64} : (tensor<1x3x4x4xf32>) -> (tensor<1x3x3x3xf32>, tensor<1x3x3x3xi64>)
  return
}

// -----

func.func @max_pool_ceil_mode(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: 'ceil_mode' must be 0 or 1, got -1}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 2, 2>, ceil_mode = -1 : i64} : (tensor<1x3x4x4xf32>) -> (tensor<1x3x3x3xf32>, tensor<1x3x3x3xi64>)
  return
}

// -----

func.func @max_pool_rank_too_small(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.max_pool: X must be (N, C, spatial...), got shape [3, 4]}}
  // expected-error @+1 {{'ampc.max_pool' op failed to infer returned types}}
  %0:2 = ampc.max_pool %x {kernel_shape = array<i64: 2>} : (tensor<3x4xf32>) -> (tensor<3x3xf32>, tensor<3x3xi64>)
  return
}

// -----

func.func @average_pool_count_include_pad(%x: tensor<1x3x4x4xf32>) {
  // expected-error @+2 {{ampc.average_pool: 'count_include_pad' must be 0 or 1, got 3}}
  // expected-error @+1 {{'ampc.average_pool' op failed to infer returned types}}
  %0 = ampc.average_pool %x {kernel_shape = array<i64: 2, 2>, count_include_pad = 3 : i64} : (tensor<1x3x4x4xf32>) -> tensor<1x3x3x3xf32>
  return
}

// -----

func.func @global_average_pool_rank(%x: tensor<2x512xf32>) {
  // expected-error @+2 {{ampc.global_average_pool: X must be (N, C, spatial...), got shape [2, 512]}}
  // expected-error @+1 {{'ampc.global_average_pool' op failed to infer returned types}}
  %0 = ampc.global_average_pool %x : (tensor<2x512xf32>) -> tensor<2x512xf32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

func.func @loss_bad_reduction(%s: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{expected ::ampc::Reduction to be one of: none, sum, mean}}
  // expected-error @+1 {{failed to parse AMPC_ReductionAttr parameter 'value'}}
  %0:2 = ampc.softmax_cross_entropy_loss %s, %l {reduction = #ampc<reduction avg>} : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @nll_reduction_string(%s: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+1 {{'ampc.negative_log_likelihood_loss' op attribute 'reduction' failed to satisfy constraint: a loss reduction}}
  %0 = ampc.negative_log_likelihood_loss %s, %l {reduction = "mean"} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

func.func @labels_shape_mismatch(%s: tensor<4x10xf32>, %l: tensor<5xi64>) {
  // expected-error @+2 {{ampc.negative_log_likelihood_loss: labels of shape [5] do not match scores of shape [4, 10] (expected [4])}}
  // expected-error @+1 {{'ampc.negative_log_likelihood_loss' op failed to infer returned types}}
  %0 = ampc.negative_log_likelihood_loss %s, %l : (tensor<4x10xf32>, tensor<5xi64>) -> tensor<f32>
  return
}

// -----

func.func @labels_spatial_mismatch(%s: tensor<2x10x5xf32>, %l: tensor<2x4xi64>) {
  // expected-error @+2 {{ampc.softmax_cross_entropy_loss: labels of shape [2, 4] do not match scores of shape [2, 10, 5] (expected [2, 5])}}
  // expected-error @+1 {{'ampc.softmax_cross_entropy_loss' op failed to infer returned types}}
  %0:2 = ampc.softmax_cross_entropy_loss %s, %l : (tensor<2x10x5xf32>, tensor<2x4xi64>) -> (tensor<f32>, tensor<2x10x5xf32>)
  return
}

// -----

func.func @loss_scores_rank(%s: tensor<10xf32>, %l: tensor<10xi64>) {
  // expected-error @+2 {{ampc.softmax_cross_entropy_loss: scores must be (N, C, ...), got shape [10]}}
  // expected-error @+1 {{'ampc.softmax_cross_entropy_loss' op failed to infer returned types}}
  %0:2 = ampc.softmax_cross_entropy_loss %s, %l : (tensor<10xf32>, tensor<10xi64>) -> (tensor<f32>, tensor<10xf32>)
  return
}

// -----

func.func @loss_weights_shape(%s: tensor<4x10xf32>, %l: tensor<4xi64>, %w: tensor<4xf32>) {
  // expected-error @+2 {{ampc.softmax_cross_entropy_loss: weights must have shape [10], got [4]}}
  // expected-error @+1 {{'ampc.softmax_cross_entropy_loss' op failed to infer returned types}}
  %0:2 = ampc.softmax_cross_entropy_loss %s, %l, %w : (tensor<4x10xf32>, tensor<4xi64>, tensor<4xf32>) -> (tensor<f32>, tensor<4x10xf32>)
  return
}

// -----

func.func @loss_none_reduction_result(%s: tensor<4x10xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{'ampc.negative_log_likelihood_loss' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<f32>'}}
  // expected-error @+1 {{'ampc.negative_log_likelihood_loss' op failed to infer returned types}}
  %0 = ampc.negative_log_likelihood_loss %s, %l {reduction = #ampc<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  return
}

// -----

//===----------------------------------------------------------------------===//
// Backward ops
//===----------------------------------------------------------------------===//

func.func @relu_grad_types(%dy: tensor<4xf16>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.relu_grad' op failed to verify that all of {grad, input, output} have same type}}
  %0 = "ampc.relu_grad"(%dy, %x) : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

// An enum attribute of another enum.
func.func @gelu_grad_approximate(%dy: tensor<4xf32>, %x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.gelu_grad' op attribute 'approximate' failed to satisfy constraint: a Gelu approximation}}
  %0 = ampc.gelu_grad %dy, %x {approximate = #ampc<reduction sum>} : tensor<4xf32>
  return
}

// -----

func.func @conv_backward_data_shape(%dy: tensor<1x16x4x4xf16>, %w: tensor<16x3x3x3xf16>) {
  // expected-error @+1 {{'ampc.conv_backward_data' op grad has type 'tensor<1x16x4x4xf16>', but a Conv by the weight on 'tensor<1x3x9x9xf16>' gives 'tensor<1x16x5x5xf16>'}}
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x9x9xf16>
  return
}

// -----

func.func @conv_backward_data_dtype(%dy: tensor<1x16x4x4xf16>, %w: tensor<16x3x3x3xf32>) {
  // expected-error @+1 {{ampc.conv_backward_data: X and W element types differ}}
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf32>) -> tensor<1x3x8x8xf16>
  return
}

// -----

func.func @conv_backward_weight_groups(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x16x6x6xf32>) {
  // expected-error @+1 {{ampc.conv_backward_weight: W of shape [16, 2, 3, 3] does not match 3 input channels in 1 group(s)}}
  %0 = ampc.conv_backward_weight %x, %dy : (tensor<1x3x8x8xf32>, tensor<1x16x6x6xf32>) -> tensor<16x2x3x3xf32>
  return
}

// -----

func.func @conv_backward_weight_kernel(%x: tensor<1x3x8x8xf32>, %dy: tensor<1x16x6x6xf32>) {
  // expected-error @+1 {{'ampc.conv_backward_weight' op grad has type 'tensor<1x16x6x6xf32>', but a Conv of the input on 'tensor<16x3x5x5xf32>' gives 'tensor<1x16x4x4xf32>'}}
  %0 = ampc.conv_backward_weight %x, %dy : (tensor<1x3x8x8xf32>, tensor<1x16x6x6xf32>) -> tensor<16x3x5x5xf32>
  return
}

// -----

func.func @max_pool_grad_indices(%dy: tensor<1x8x4x4xf32>, %i: tensor<1x8x4x5xi64>) {
  // expected-error @+1 {{'ampc.max_pool_grad' op grad shape [1, 8, 4, 4] differs from indices shape [1, 8, 4, 5]}}
  %0 = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf32>, tensor<1x8x4x5xi64>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @max_pool_grad_element_type(%dy: tensor<1x8x4x4xf32>, %i: tensor<1x8x4x4xi64>) {
  // expected-error @+1 {{'ampc.max_pool_grad' op result element type differs from grad's}}
  %0 = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf16>
  return
}

// -----

func.func @max_pool_grad_channels(%dy: tensor<1x8x4x4xf32>, %i: tensor<1x8x4x4xi64>) {
  // expected-error @+1 {{'ampc.max_pool_grad' op grad has type 'tensor<1x8x4x4xf32>', but MaxPool on 'tensor<1x4x8x8xf32>' gives 'tensor<1x4x4x4xf32>'}}
  %0 = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xi64>) -> tensor<1x4x8x8xf32>
  return
}

// -----

// The window is the forward MaxPool's: a 3x3 stride-1 window over 8x8
// gives 6x6, not the gradient's 4x4.
func.func @max_pool_grad_window(%dy: tensor<1x8x4x4xf32>, %i: tensor<1x8x4x4xi64>) {
  // expected-error @+1 {{'ampc.max_pool_grad' op grad has type 'tensor<1x8x4x4xf32>', but MaxPool on 'tensor<1x8x8x8xf32>' gives 'tensor<1x8x6x6xf32>'}}
  %0 = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 3, 3>} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @max_pool_grad_storage_order(%dy: tensor<1x8x4x4xf32>, %i: tensor<1x8x4x4xi64>) {
  // expected-error @+1 {{ampc.max_pool_grad: 'storage_order' must be 0 or 1, got 2}}
  %0 = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, storage_order = 2 : i64} : (tensor<1x8x4x4xf32>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @average_pool_grad_shape(%dy: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{'ampc.average_pool_grad' op grad has type 'tensor<1x8x4x4xf32>', but AveragePool on 'tensor<1x8x8x8xf32>' gives 'tensor<1x8x3x3xf32>'}}
  %0 = ampc.average_pool_grad %dy {kernel_shape = array<i64: 3, 3>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @average_pool_grad_flag(%dy: tensor<1x8x4x4xf32>) {
  // expected-error @+1 {{ampc.average_pool_grad: 'count_include_pad' must be 0 or 1, got 3}}
  %0 = ampc.average_pool_grad %dy {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, count_include_pad = 3 : i64} : (tensor<1x8x4x4xf32>) -> tensor<1x8x8x8xf32>
  return
}

// -----

func.func @batch_norm_grad_scale(%dy: tensor<2x16x8x8xf16>, %x: tensor<2x16x8x8xf16>, %s: tensor<8xf32>) {
  // expected-error @+2 {{ampc.batch_norm_grad: scale must have shape [16], got [8]}}
  // expected-error @+1 {{'ampc.batch_norm_grad' op failed to infer returned types}}
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %s, %s : (tensor<2x16x8x8xf16>, tensor<2x16x8x8xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x16x8x8xf16>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

func.func @batch_norm_grad_grad_type(%dy: tensor<2x16x8x8xf32>, %x: tensor<2x16x8x8xf16>, %s: tensor<16xf32>) {
  // expected-error @+2 {{ampc.batch_norm_grad: grad type tensor<2x16x8x8xf32> differs from input type tensor<2x16x8x8xf16>}}
  // expected-error @+1 {{'ampc.batch_norm_grad' op failed to infer returned types}}
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %s, %s : (tensor<2x16x8x8xf32>, tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_grad_statistics_type(%dy: tensor<2x16xf32>, %x: tensor<2x16xf32>, %s: tensor<16xf32>, %m: tensor<16xf16>) {
  // expected-error @+2 {{ampc.batch_norm_grad: mean and inv_std_dev must be tensor<16xf32> (the forward's saved statistics), got tensor<16xf16>}}
  // expected-error @+1 {{'ampc.batch_norm_grad' op failed to infer returned types}}
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %s, %m : (tensor<2x16xf32>, tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf16>) -> (tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_grad_training_mode(%dy: tensor<2x16xf32>, %x: tensor<2x16xf32>, %s: tensor<16xf32>) {
  // expected-error @+2 {{ampc.batch_norm_grad: 'training_mode' must be 0 or 1, got 3}}
  // expected-error @+1 {{'ampc.batch_norm_grad' op failed to infer returned types}}
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %s, %s {training_mode = 3 : i64} : (tensor<2x16xf32>, tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16xf32>, tensor<16xf32>, tensor<16xf32>)
  return
}

// -----

func.func @batch_norm_saved_statistics_type(%x: tensor<2x16x8x8xf16>, %s: tensor<16xf32>) {
  // expected-error @+2 {{'ampc.batch_normalization' op inferred type(s) 'tensor<2x16x8x8xf16>', 'tensor<16xf32>', 'tensor<16xf32>', 'tensor<16xf32>', 'tensor<16xf32>' are incompatible}}
  // expected-error @+1 {{'ampc.batch_normalization' op failed to infer returned types}}
  %0:5 = ampc.batch_normalization %x, %s, %s, %s, %s {saved_statistics, training_mode = 1 : i64} : (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf16>, tensor<16xf16>)
  return
}

// -----

func.func @layer_norm_grad_stats(%dy: tensor<2x16x64xf32>, %g: tensor<64xf32>, %m: tensor<2x16x64xf32>, %r: tensor<2x16x1xf32>) {
  // expected-error @+2 {{ampc.layer_norm_grad: mean must have shape [2, 16, 1], got [2, 16, 64]}}
  // expected-error @+1 {{'ampc.layer_norm_grad' op failed to infer returned types}}
  %0 = ampc.layer_norm_grad %dy, %dy, %g, %m, %r : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x64xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// dY may be f16/bf16 only beside an FP32 X (ampc-fold-casts).
func.func @layer_norm_grad_f16_dy_f64_x(%dy: tensor<2x16x64xf16>, %x: tensor<2x16x64xf64>, %g: tensor<64xf64>, %m: tensor<2x16x1xf64>) {
  // expected-error @+2 {{ampc.layer_norm_grad: grad type tensor<2x16x64xf16> differs from input type tensor<2x16x64xf64>}}
  // expected-error @+1 {{'ampc.layer_norm_grad' op failed to infer returned types}}
  %0 = ampc.layer_norm_grad %dy, %x, %g, %m, %m : (tensor<2x16x64xf16>, tensor<2x16x64xf64>, tensor<64xf64>, tensor<2x16x1xf64>, tensor<2x16x1xf64>) -> tensor<2x16x64xf64>
  return
}

// -----

func.func @layer_norm_grad_scale(%dy: tensor<2x16x64xf32>, %g: tensor<32xf32>, %m: tensor<2x16x1xf32>) {
  // expected-error @+2 {{ampc.layer_norm_grad: scale of shape [32] does not broadcast to the normalised shape [64]}}
  // expected-error @+1 {{'ampc.layer_norm_grad' op failed to infer returned types}}
  %0 = ampc.layer_norm_grad %dy, %dy, %g, %m, %m : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<32xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  return
}

// -----

// With log_prob: log_prob has the result's shape, and the result is in
// its type or in 16 bits of an FP32 log_prob.
func.func @nll_loss_grad_log_prob_shape(%d: tensor<f32>, %t: tensor<4xi64>, %lp: tensor<4x9xf32>) {
  // expected-error @+1 {{'ampc.nll_loss_grad' op log_prob shape [4, 9] differs from the result's [4, 10]}}
  %0 = ampc.nll_loss_grad %d, %t log_prob(%lp) : (tensor<f32>, tensor<4xi64>, tensor<4x9xf32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @nll_loss_grad_log_prob_type(%d: tensor<f64>, %t: tensor<4xi64>, %lp: tensor<4x10xf64>) {
  // expected-error @+1 {{'ampc.nll_loss_grad' op result element type must be log_prob's or a 16-bit type of an f32 log_prob, got 'f16' and 'f64'}}
  %0 = ampc.nll_loss_grad %d, %t log_prob(%lp) : (tensor<f64>, tensor<4xi64>, tensor<4x10xf64>) -> tensor<4x10xf16>
  return
}

// -----

// 16-bit scores give results in their type or in FP32, not FP64.
func.func @softmax_cross_entropy_loss_result_type(%s: tensor<4x10xf16>, %t: tensor<4xi64>) {
  // expected-error @+2 {{'ampc.softmax_cross_entropy_loss' op inferred type(s) 'tensor<f16>', 'tensor<4x10xf16>' are incompatible with return type(s) of operation 'tensor<f64>', 'tensor<4x10xf64>'}}
  // expected-error @+1 {{'ampc.softmax_cross_entropy_loss' op failed to infer returned types}}
  %0:2 = ampc.softmax_cross_entropy_loss %s, %t : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f64>, tensor<4x10xf64>)
  return
}

// -----

func.func @nll_loss_grad_reduction(%d: tensor<f32>, %t: tensor<4xi64>) {
  // expected-error @+1 {{'ampc.nll_loss_grad' op grad has type 'tensor<f32>', but NegativeLogLikelihoodLoss on 'tensor<4x10xf32>' gives 'tensor<4xf32>'}}
  %0 = ampc.nll_loss_grad %d, %t {reduction = #ampc<reduction none>} : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  return
}

// -----

func.func @nll_loss_grad_weight(%d: tensor<f32>, %t: tensor<4xi64>, %w: tensor<10xf16>) {
  // expected-error @+1 {{'ampc.nll_loss_grad' op weight element type differs from the result's}}
  %0 = ampc.nll_loss_grad %d, %t, %w : (tensor<f32>, tensor<4xi64>, tensor<10xf16>) -> tensor<4x10xf32>
  return
}

// -----

func.func @nll_loss_grad_target(%d: tensor<f32>, %t: tensor<5xi64>) {
  // expected-error @+1 {{ampc.nll_loss_grad: labels of shape [5] do not match scores of shape [4, 10] (expected [4])}}
  %0 = ampc.nll_loss_grad %d, %t : (tensor<f32>, tensor<5xi64>) -> tensor<4x10xf32>
  return
}

// -----

func.func @gather_grad_shape(%dy: tensor<4x16x64xf32>, %ids: tensor<4x16xi64>) {
  // expected-error @+1 {{'ampc.gather_grad' op grad has type 'tensor<4x16x64xf32>', but Gather on 'tensor<100x32xf32>' gives 'tensor<4x16x32xf32>'}}
  %0 = ampc.gather_grad %dy, %ids : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<100x32xf32>
  return
}

// -----

func.func @slice_grad_shape(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{'ampc.slice_grad' op grad has type 'tensor<2x4xf32>', but Slice on 'tensor<2x8xf32>' gives 'tensor<2x3xf32>'}}
  %0 = ampc.slice_grad %dy {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 1>, steps = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @slice_grad_steps(%dy: tensor<2x4xf32>) {
  // expected-error @+1 {{ampc.slice_grad: 'steps' must not contain 0}}
  %0 = ampc.slice_grad %dy {axes = array<i64: 1>, ends = array<i64: 4>, starts = array<i64: 0>, steps = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return
}

// -----

func.func @fusion_non_elementwise(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'ampc.fusion' op body holds 'ampc.matmul', which is not an elementwise op}}
  %0 = ampc.fusion(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8x8xf32>):
    %m = ampc.matmul %a, %b : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    ampc.yield %m : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_smaller_value(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'ampc.fusion' op body value of type 'tensor<8xf32>' does not have the result's shape}}
  %0 = ampc.fusion(%x, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf32>, %c: tensor<8xf32>):
    %e = ampc.exp %c : tensor<8xf32>
    %s = ampc.add %a, %e : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    ampc.yield %s : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

func.func @fusion_yield_type(%x: tensor<4x8xf32>) -> tensor<4x8xf16> {
  // expected-error @+1 {{'ampc.fusion' op yields 'tensor<4x8xf32>' but returns 'tensor<4x8xf16>'}}
  %0 = ampc.fusion(%x) : (tensor<4x8xf32>) -> tensor<4x8xf16> {
  ^bb0(%a: tensor<4x8xf32>):
    %e = ampc.exp %a : tensor<4x8xf32>
    ampc.yield %e : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf16>
}

// -----

// A fusion that yields several values gives them one shape.
func.func @fusion_output_shapes(%x: tensor<4x8xf32>, %y: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  // expected-error @+1 {{'ampc.fusion' op returns values of different shapes: 'tensor<4x8xf32>' and 'tensor<8xf32>'}}
  %0:2 = ampc.fusion(%x, %y) : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8xf32>) {
  ^bb0(%a: tensor<4x8xf32>, %b: tensor<8xf32>):
    %e = ampc.exp %a : tensor<4x8xf32>
    %f = ampc.exp %b : tensor<8xf32>
    ampc.yield %e, %f : tensor<4x8xf32>, tensor<8xf32>
  }
  return %0#0, %0#1 : tensor<4x8xf32>, tensor<8xf32>
}

// -----

func.func @fusion_no_outputs(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.fusion' op must return at least one value}}
  ampc.fusion(%x) : (tensor<4xf32>) -> () {
  ^bb0(%a: tensor<4xf32>):
    ampc.yield
  }
  return
}

// -----

func.func @fusion_yield_count(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  // expected-error @+1 {{'ampc.fusion' op yields 'tensor<4xf32>' but returns 'tensor<4xf32>', 'tensor<4xf32>'}}
  %0:2 = ampc.fusion(%x) : (tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  ^bb0(%a: tensor<4xf32>):
    %e = ampc.exp %a : tensor<4xf32>
    ampc.yield %e : tensor<4xf32>
  }
  return %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
}

// -----

func.func @fusion_no_yield(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'ampc.fusion' op body must end in ampc.yield}}
  %0 = ampc.fusion(%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = ampc.exp %a : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

func.func @fusion_argument_type(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @+1 {{'ampc.fusion' op operand 0 has type 'tensor<4x8xf32>' but block argument 0 has type 'tensor<4x8xf16>'}}
  %0 = ampc.fusion(%x) : (tensor<4x8xf32>) -> tensor<4x8xf32> {
  ^bb0(%a: tensor<4x8xf16>):
    %e = ampc.cast %a : tensor<4x8xf16> to tensor<4x8xf32>
    ampc.yield %e : tensor<4x8xf32>
  }
  return %0 : tensor<4x8xf32>
}

// -----

// expected-error @+1 {{'ampc.state' op initial value has type 'tensor<2xf32>', expected 'tensor<3xf32>'}}
ampc.state @s : tensor<3xf32> = dense<0.0> : tensor<2xf32>

// -----

func.func @load_missing_state() -> tensor<f32> {
  // expected-error @+1 {{'ampc.load_state' op 'nothing' is not an ampc.state}}
  %0 = ampc.load_state @nothing : tensor<f32>
  return %0 : tensor<f32>
}

// -----

ampc.state @s : tensor<f32> = dense<0.0> : tensor<f32>
func.func @store_wrong_type(%x: tensor<2xf32>) {
  // expected-error @+1 {{'ampc.store' op value type 'tensor<2xf32>' does not match 'tensor<f32>'}}
  ampc.store @s, %x : tensor<2xf32>
  return
}

// -----

func.func @unscale_vector_scale(%s: tensor<2xf32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.unscale' op the scale must be a scalar}}
  %u, %f = ampc.unscale %s, %g : (tensor<2xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<i1>)
  return
}

// -----

func.func @clip_negative(%g: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.clip_grad_norm' op 'max_norm' must be positive}}
  %c = ampc.clip_grad_norm %g {max_norm = -1.0 : f32} : (tensor<3xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @adam_one_moment(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>, %m: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.optimizer_update' op 'adam' keeps 2 moment(s), got 1}}
  %np, %nm = ampc.optimizer_update %p, %g, %lr, %step moments %m {kind = #ampc<optimizer adam>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @unknown_optimizer(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+2 {{expected ::ampc::OptimizerKind to be one of: sgd, adam, adamw, none}}
  // expected-error @+1 {{failed to parse AMPC_OptimizerKindAttr parameter 'value'}}
  %np = ampc.optimizer_update %p, %g, %lr, %step {kind = #ampc<optimizer lion>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  return
}

// -----

// `none` is a choice of ampc-attach-optimizer (no optimizer), not an update.
func.func @optimizer_none(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'ampc.optimizer_update' op 'kind' must be sgd, adam or adamw, got 'none'}}
  %np = ampc.optimizer_update %p, %g, %lr, %step {kind = #ampc<optimizer none>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  return
}

// -----

ampc.state @s : tensor<f32> = dense<0.0> : tensor<f32>
func.func @load_state_wrong_type() -> tensor<2xf32> {
  // expected-error @+1 {{'ampc.load_state' op result type 'tensor<2xf32>' does not match state type 'tensor<f32>'}}
  %0 = ampc.load_state @s : tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

func.func @store_unknown_target(%x: tensor<f32>) {
  // expected-error @+1 {{'ampc.store' op 'nowhere' is not an ampc.parameter or ampc.state}}
  ampc.store @nowhere, %x : tensor<f32>
  return
}

// -----

func.func @unscale_result_count(%s: tensor<f32>, %g0: tensor<3xf32>, %g1: tensor<2xf32>) {
  // expected-error @+1 {{'ampc.unscale' op expects one result per gradient, got 1 for 2}}
  %u, %f = ampc.unscale %s, %g0, %g1 : (tensor<f32>, tensor<3xf32>, tensor<2xf32>) -> (tensor<3xf32>, tensor<i1>)
  return
}

// -----

func.func @unscale_result_type(%s: tensor<f32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.unscale' op result type 'tensor<3xf16>' does not match gradient type 'tensor<3xf32>' (nor widens it from f16/bf16 to f32)}}
  %u, %f = ampc.unscale %s, %g : (tensor<f32>, tensor<3xf32>) -> (tensor<3xf16>, tensor<i1>)
  return
}

// -----

// A 16-bit gradient widens to an FP32 result of its shape only.
func.func @unscale_widening_shape(%s: tensor<f32>, %g: tensor<3xf16>) {
  // expected-error @+1 {{'ampc.unscale' op result type 'tensor<4xf32>' does not match gradient type 'tensor<3xf16>' (nor widens it from f16/bf16 to f32)}}
  %u, %f = ampc.unscale %s, %g : (tensor<f32>, tensor<3xf16>) -> (tensor<4xf32>, tensor<i1>)
  return
}

// -----

func.func @unscale_found_inf_vector(%s: tensor<f32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.unscale' op found_inf must be a scalar}}
  %u, %f = ampc.unscale %s, %g : (tensor<f32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xi1>)
  return
}

// -----

func.func @clip_result_count(%g0: tensor<3xf32>, %g1: tensor<2xf32>) {
  // expected-error @+1 {{'ampc.clip_grad_norm' op expects one result per gradient}}
  %c = ampc.clip_grad_norm %g0, %g1 {max_norm = 1.0 : f32} : (tensor<3xf32>, tensor<2xf32>) -> tensor<3xf32>
  return
}

// -----

func.func @clip_result_type(%g: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.clip_grad_norm' op result type 'tensor<3xf64>' does not match gradient type 'tensor<3xf32>'}}
  %c = ampc.clip_grad_norm %g {max_norm = 1.0 : f32} : (tensor<3xf32>) -> tensor<3xf64>
  return
}

// -----

func.func @sgd_momentum_without_buffer(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'ampc.optimizer_update' op 'sgd' keeps 1 moment(s), got 0}}
  %np = ampc.optimizer_update %p, %g, %lr, %step {kind = #ampc<optimizer sgd>, momentum = 0.9 : f32} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  return
}

// -----

func.func @optimizer_gradient_type(%p: tensor<3xf32>, %g: tensor<3xf16>, %lr: tensor<f32>, %step: tensor<i64>) {
  // expected-error @+1 {{'ampc.optimizer_update' op gradient type 'tensor<3xf16>' does not match parameter 'tensor<3xf32>'}}
  %np = ampc.optimizer_update %p, %g, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf16>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  return
}

// -----

func.func @optimizer_moment_type(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>, %m: tensor<3xf32>, %v: tensor<2xf32>) {
  // expected-error @+1 {{'ampc.optimizer_update' op moment type 'tensor<2xf32>' does not match parameter 'tensor<3xf32>'}}
  %np, %nm, %nv = ampc.optimizer_update %p, %g, %lr, %step moments %m, %v {kind = #ampc<optimizer adamw>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<3xf32>, tensor<2xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<2xf32>)
  return
}

// -----

func.func @optimizer_results(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>, %m: tensor<3xf32>, %v: tensor<3xf32>) {
  // expected-error @+1 {{'ampc.optimizer_update' op results must be the new parameter and moments}}
  %np, %nm = ampc.optimizer_update %p, %g, %lr, %step moments %m, %v {kind = #ampc<optimizer adamw>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
  return
}

// -----

func.func @optimizer_vector_lr(%p: tensor<3xf32>, %g: tensor<3xf32>, %lr: tensor<3xf32>, %step: tensor<i64>) {
  // expected-error @+1 {{'ampc.optimizer_update' op lr, step and found_inf must be scalars}}
  %np = ampc.optimizer_update %p, %g, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<i64>) -> tensor<3xf32>
  return
}

// -----

func.func @gemm_bias_epilogue_not_row(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4x4xf32>) {
  // expected-error @+1 {{'ampc.gemm' op epilogue 'bias' needs C as a row vector of 4 elements of 'f32'}}
  %0 = ampc.gemm %a, %b, %c {epilogue = #ampc<epilogue bias>} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_bias_epilogue_no_c(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.gemm' op epilogue 'relu_bias' needs C as a row vector of 4 elements of 'f32'}}
  %0 = ampc.gemm %a, %b {epilogue = #ampc<epilogue relu_bias>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_bias_epilogue_beta(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.gemm' op epilogue 'bias' needs beta 1, got 5.000000e-01}}
  %0 = ampc.gemm %a, %b, %c {beta = 0.5 : f32, epilogue = #ampc<epilogue bias>} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @gemm_unknown_epilogue(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{expected ::ampc::GemmEpilogue to be one of: none, bias, relu, relu_bias}}
  // expected-error @+1 {{failed to parse AMPC_GemmEpilogueAttr parameter 'value'}}
  %0 = ampc.gemm %a, %b {epilogue = #ampc<epilogue gelu>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

// ampc.batched_gemm: every access inside its operand, D written once.

func.func @batched_gemm_ld_too_small(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op lda 4 is less than the 8 columns A is stored with}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, lda = 4 : i64, ldb = 4 : i64, ldd = 4 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_gemm_past_operand(%a: tensor<2x4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op A's layout reaches element 71, past its 64 elements}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, batch = 2 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64, strideA = 40 : i64, strideD = 16 : i64} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

func.func @batched_gemm_transposed_past_operand(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // transB reads B as 4 x 8 rows of ldb 8: 32 elements, B has them, but
  // ldb 9 runs past.
  // expected-error @+1 {{'ampc.batched_gemm' op B's layout reaches element 34, past its 32 elements}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, transB = true, lda = 8 : i64, ldb = 9 : i64, ldd = 4 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_gemm_d_overlaps(%a: tensor<2x4x8xf32>, %b: tensor<8x4xf32>) {
  // Batches 4 elements apart with rows 4 apart write each other's rows.
  // expected-error @+1 {{'ampc.batched_gemm' op D's layout (ldd 4, strideD 4) writes some elements more than once}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, batch = 2 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64, strideA = 32 : i64, strideD = 4 : i64} : (tensor<2x4x8xf32>, tensor<8x4xf32>) -> tensor<2x4x4xf32>
  return
}

// -----

func.func @batched_gemm_d_size(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op writes 1 x 4 x 4 elements, but the result has 32}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @batched_gemm_bias_without_epilogue(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op epilogue 'none' takes no bias operand}}
  %0 = ampc.batched_gemm %a, %b, %c {m = 4 : i64, n = 4 : i64, k = 8 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_gemm_no_batch(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op needs m, n, k >= 0 and batch >= 1, got m 4, n 4, k 8, batch 0}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, batch = 0 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_gemm_mixed_types(%a: tensor<4x8xf16>, %b: tensor<8x4xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op needs A and B of one element type, got 'f16' and 'f32'}}
  %0 = ampc.batched_gemm %a, %b {m = 4 : i64, n = 4 : i64, k = 8 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64} : (tensor<4x8xf16>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @batched_gemm_bias_length(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>, %c: tensor<8xf32>) {
  // expected-error @+1 {{'ampc.batched_gemm' op the bias must be 4 elements of 'f32', got 'tensor<8xf32>'}}
  %0 = ampc.batched_gemm %a, %b, %c {m = 4 : i64, n = 4 : i64, k = 8 : i64, lda = 8 : i64, ldb = 4 : i64, ldd = 4 : i64, epilogue = #ampc<epilogue bias>} : (tensor<4x8xf32>, tensor<8x4xf32>, tensor<8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @mod_fmod_two(%a: tensor<4xi64>, %b: tensor<4xi64>) {
  // expected-error @+1 {{'ampc.mod' op fmod must be 0 or 1, got 2}}
  %0 = ampc.mod %a, %b {fmod = 2 : i64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return
}

// -----

func.func @mod_float_sign_of_divisor(%a: tensor<4xf32>, %b: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.mod' op fmod 0 (the divisor's sign) is defined on integers only; floats need fmod 1}}
  %0 = ampc.mod %a, %b : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @celu_alpha_zero(%x: tensor<4xf32>) {
  // expected-error @+1 {{'ampc.celu' op alpha must not be 0 (Celu divides by it)}}
  %0 = ampc.celu %x {alpha = 0.0 : f32} : tensor<4xf32>
  return
}

// -----

func.func @bit_shift_direction(%a: tensor<4xui8>, %b: tensor<4xui8>) {
  // expected-error @+1 {{'ampc.bit_shift' op left must be 0 or 1, got 2}}
  %0 = ampc.bit_shift %a, %b {left = 2 : i64} : (tensor<4xui8>, tensor<4xui8>) -> tensor<4xui8>
  return
}

// -----

func.func @bit_shift_signed(%a: tensor<4xi8>, %b: tensor<4xi8>) {
  // expected-error @+1 {{'ampc.bit_shift' op shifts unsigned integers only, got 'i8'}}
  %0 = ampc.bit_shift %a, %b : (tensor<4xi8>, tensor<4xi8>) -> tensor<4xi8>
  return
}

// -----

// ampc.add_layer_norm (ampc-fuse-residual-layer-norm): the sum has the
// input's type, the addend its shape; Y, Mean and InvStdDev as a
// LayerNorm of the sum has them.
func.func @add_layer_norm_sum_type(%x: tensor<4x8xf32>, %h: tensor<4x8xf16>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'ampc.add_layer_norm' op the sum must have the input's type 'tensor<4x8xf32>'}}
  %s, %y, %m, %r = ampc.add_layer_norm %x, %h, %g : (tensor<4x8xf32>, tensor<4x8xf16>, tensor<8xf32>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @add_layer_norm_addend(%x: tensor<4x8xf32>, %h: tensor<8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'ampc.add_layer_norm' op the addend's shape [8] must be the input's [4, 8]}}
  %s, %y, %m, %r = ampc.add_layer_norm %x, %h, %g : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @add_layer_norm_y(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'ampc.add_layer_norm' op Y's shape [8, 4] must be the input's [4, 8]}}
  %s, %y, %m, %r = ampc.add_layer_norm %x, %x, %g : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

func.func @add_layer_norm_stats(%x: tensor<4x8xf32>, %g: tensor<8xf32>) {
  // expected-error @+1 {{'ampc.add_layer_norm' op Mean and InvStdDev must have type 'tensor<4x1xf32>'}}
  %s, %y, %m, %r = ampc.add_layer_norm %x, %x, %g : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>)
  return
}

// -----

// The LayerNorm's own rule: a Scale that does not broadcast.
func.func @add_layer_norm_scale(%x: tensor<4x8xf32>, %g: tensor<3xf32>) {
  // expected-error @+1 {{ampc.layer_normalization: Scale}}
  %s, %y, %m, %r = ampc.add_layer_norm %x, %x, %g : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<3xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return
}

// -----

// channels_last (ampc-channels-last) is for 2-D images (N, H, W, C).
func.func @conv_channels_last_rank(%x: tensor<1x8x3xf32>, %w: tensor<4x3x3xf32>) {
  // expected-error @+2 {{ampc.conv: channels_last needs a rank-4 X (N, H, W, C), got shape [1, 8, 3]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y = ampc.conv %x, %w {channels_last} : (tensor<1x8x3xf32>, tensor<4x3x3xf32>) -> tensor<1x6x4xf32>
  return
}

// -----

// A channels-last weight is (M, kH, kW, C/group): an OIHW weight does not
// match the image's 3 channels.
func.func @conv_channels_last_weight(%x: tensor<1x8x8x3xf32>, %w: tensor<4x3x3x3xf32>, %v: tensor<4x3x3x5xf32>) {
  %ok = ampc.conv %x, %w {channels_last} : (tensor<1x8x8x3xf32>, tensor<4x3x3x3xf32>) -> tensor<1x6x6x4xf32>
  // expected-error @+2 {{ampc.conv: W of shape [4, 5, 3, 3] does not match 3 input channels in 1 group(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %bad = ampc.conv %x, %v {channels_last} : (tensor<1x8x8x3xf32>, tensor<4x3x3x5xf32>) -> tensor<1x6x6x4xf32>
  return
}

// -----

// A channels-last BatchNorm's channels are X's last dimension.
func.func @batch_norm_channels_last(%x: tensor<2x4x4x8xf32>, %s: tensor<4xf32>) {
  // expected-error @+2 {{ampc.batch_normalization: scale must have shape [8], got [4]}}
  // expected-error @+1 {{failed to infer returned types}}
  %y:3 = ampc.batch_normalization %x, %s, %s, %s, %s {channels_last} : (tensor<2x4x4x8xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x4x8xf32>, tensor<4xf32>, tensor<4xf32>)
  return
}

// -----

// A channels-last MaxPool's indices are flat NHWC indices: no storage_order.
func.func @max_pool_channels_last_order(%x: tensor<1x4x4x2xf32>) {
  // expected-error @+2 {{ampc.max_pool: channels_last takes no storage_order}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %i = ampc.max_pool %x {channels_last, kernel_shape = array<i64: 2, 2>, storage_order = 1 : i64} : (tensor<1x4x4x2xf32>) -> (tensor<1x3x3x2xf32>, tensor<1x3x3x2xi64>)
  return
}

// -----

// The backward convolution checks its written result with the same rule.
func.func @conv_backward_data_channels_last(%dy: tensor<1x4x4x16xf16>, %w: tensor<16x3x3x3xf16>) {
  %ok = ampc.conv_backward_data %dy, %w {channels_last, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x4x16xf16>, tensor<16x3x3x3xf16>) -> tensor<1x8x8x3xf16>
  // expected-error @+1 {{'ampc.conv_backward_data' op grad has type 'tensor<1x4x4x16xf16>', but a Conv by the weight on 'tensor<1x3x8x8xf16>' gives 'tensor<1x16x4x4xf16>'}}
  %bad = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x4x16xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
  return
}

// -----

// A channels-last weight copy is some weight's copy.
ampc.state @w.f16 {channels_last} : tensor<4x3x3x2xf16> = dense<0.0> : tensor<4x3x3x2xf16>
// expected-error @-1 {{'ampc.state' op channels_last is for the copy of a weight of rank 3 or more (derived_from)}}
