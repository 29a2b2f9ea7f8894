// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// ampc.resize's axes are read against its input (readResize,
// include/ampc/Dialect/Resize.h) by the op's shape rule: one invalid op per
// section, each with its message. The importer resolves and checks the
// node's scales, sizes and roi itself (its messages name the node:
// test/Import/errors/composed-resize-conv-transpose.test), so these are
// what a hand-written op, or a bug in the importer, gets.

func.func @resize_axes_twice(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'axes' [1, 1] must be distinct dimensions of the rank-2 input}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1, 1>, sizes = array<i64: 6, 6>, scales = [2.0, 2.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_axis_out_of_range(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'axes' [-1] must be distinct dimensions of the rank-2 input}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: -1>, sizes = array<i64: 6>, scales = [2.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_sizes_count(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'sizes' has 1 values for 2 axes}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0, 1>, sizes = array<i64: 6>, scales = [1.0, 2.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_scales_count(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'scales' has 1 values for 2 axes}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0, 1>, sizes = array<i64: 2, 6>, scales = [2.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_crop_roi_count(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'roi' has 2 values; tf_crop_and_resize needs 2 per axis (starts, then ends), other modes none}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates tf_crop_and_resize>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0, 1>, sizes = array<i64: 2, 6>, scales = [1.0, 2.0], roi = [0.0, 1.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_roi_without_crop(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'roi' has 2 values; tf_crop_and_resize needs 2 per axis (starts, then ends), other modes none}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 6>, scales = [2.0], roi = [0.0, 1.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_roi_f32_without_crop(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'roi_f32' without tf_crop_and_resize}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates half_pixel>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 6>, scales = [2.0], roi_f32} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_scale_not_positive(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'scales' must be positive and finite}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 6>, scales = [-2.0]} : (tensor<2x3xf32>) -> tensor<2x6xf32>
  return
}

// -----

func.func @resize_size_zero(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'sizes' value 0 for dim 1 of 3 must be between 1 and 2^24}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 0>, scales = [2.0]} : (tensor<2x3xf32>) -> tensor<2x0xf32>
  return
}

// -----

func.func @resize_size_huge(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'sizes' value 16777217 for dim 1 of 3 must be between 1 and 2^24}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 16777217>, scales = [2.0]} : (tensor<2x3xf32>) -> tensor<2x16777217xf32>
  return
}

// -----

func.func @resize_empty_dim_sized(%x: tensor<0x3xf32>) {
  // expected-error @+2 {{ampc.resize: 'sizes' value 2 for dim 0 of 0 must be 0}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 0>, sizes = array<i64: 2>, scales = [2.0]} : (tensor<0x3xf32>) -> tensor<2x3xf32>
  return
}

// -----

func.func @resize_linear_integer(%x: tensor<2x3xi64>) {
  // expected-error @+2 {{ampc.resize: 'linear' mode needs float data, got i64}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode linear>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 6>, scales = [2.0]} : (tensor<2x3xi64>) -> tensor<2x6xi64>
  return
}

// -----

func.func @resize_result_type(%x: tensor<2x3xf32>) {
  // expected-error @+2 {{'ampc.resize' op inferred type(s) 'tensor<2x6xf32>' are incompatible with return type(s) of operation 'tensor<2x5xf32>'}}
  // expected-error @+1 {{'ampc.resize' op failed to infer returned types}}
  %0 = ampc.resize %x {mode = #ampc<resize_mode nearest>, coordinate_transformation_mode = #ampc<coordinates asymmetric>, nearest_mode = #ampc<nearest floor>, axes = array<i64: 1>, sizes = array<i64: 6>, scales = [2.0]} : (tensor<2x3xf32>) -> tensor<2x5xf32>
  return
}
