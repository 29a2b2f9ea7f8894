// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// The shape rules of ampc.scatter, ampc.top_k and ampc.reduce_prod: one
// invalid op per section, reported as "ampc.<op>: <message>" by the op's
// inferReturnTypes.

func.func @scatter_updates_shape(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x5xf32>) {
  // expected-error @+2 {{ampc.scatter: updates must have type tensor<3x4xf32> (a Gather of data at the indices), got tensor<3x5xf32>}}
  // expected-error @+1 {{'ampc.scatter' op failed to infer returned types}}
  %0 = ampc.scatter %d, %i, %u : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x5xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @scatter_updates_type(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x4xf16>) {
  // expected-error @+2 {{ampc.scatter: updates must have type tensor<3x4xf32> (a Gather of data at the indices), got tensor<3x4xf16>}}
  // expected-error @+1 {{'ampc.scatter' op failed to infer returned types}}
  %0 = ampc.scatter %d, %i, %u : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf16>) -> tensor<8x4xf32>
  return
}

// -----

func.func @scatter_reduction(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.scatter: 'reduction' must be none, add, mul, max or min, got 'mean'}}
  // expected-error @+1 {{'ampc.scatter' op failed to infer returned types}}
  %0 = ampc.scatter %d, %i, %u {reduction = "mean"} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @scatter_axis(%d: tensor<8x4xf32>, %i: tensor<3xi64>, %u: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.scatter: 'axis' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.scatter' op failed to infer returned types}}
  %0 = ampc.scatter %d, %i, %u {axis = 2 : i64} : (tensor<8x4xf32>, tensor<3xi64>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return
}

// -----

func.func @top_k_too_many(%x: tensor<4x10xf32>) {
  // expected-error @+2 {{ampc.top_k: 'k' must be between 0 and the axis size 10, got 11}}
  // expected-error @+1 {{'ampc.top_k' op failed to infer returned types}}
  %0 = ampc.top_k %x {k = 11 : i64} : (tensor<4x10xf32>) -> tensor<4x11xi64>
  return
}

// -----

func.func @top_k_largest(%x: tensor<4x10xf32>) {
  // expected-error @+2 {{ampc.top_k: 'largest' must be 0 or 1, got 2}}
  // expected-error @+1 {{'ampc.top_k' op failed to infer returned types}}
  %0 = ampc.top_k %x {k = 1 : i64, largest = 2 : i64} : (tensor<4x10xf32>) -> tensor<4x1xi64>
  return
}

// -----

func.func @top_k_scalar(%x: tensor<f32>) {
  // expected-error @+2 {{ampc.top_k: input must have rank >= 1}}
  // expected-error @+1 {{'ampc.top_k' op failed to infer returned types}}
  %0 = ampc.top_k %x {k = 1 : i64} : (tensor<f32>) -> tensor<1xi64>
  return
}

// -----

func.func @reduce_prod_axes(%x: tensor<4x10xf32>) {
  // expected-error @+2 {{ampc.reduce_prod: 'axes' 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.reduce_prod' op failed to infer returned types}}
  %0 = ampc.reduce_prod %x {axes = array<i64: 2>} : (tensor<4x10xf32>) -> tensor<4x1xf32>
  return
}
