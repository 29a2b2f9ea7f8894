// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// The shape rules of the indexing ops imported 1:1 (ampc.gather_elements,
// ampc.scatter_elements, ampc.gather_nd, ampc.scatter_nd,
// ampc.reverse_sequence, ampc.one_hot, ampc.top_k_values): one invalid op
// per section. Each message is the one the importer reports for the node
// (include/ampc/Dialect/Indexing.h reads both; test/Import/errors/
// indexing-bad-input.test and friends), here after "ampc.<op>: ".

func.func @gather_elements_index_type(%d: tensor<3x4xf32>, %i: tensor<2x4xf32>) {
  // expected-error @+2 {{ampc.gather_elements: indices must be int32 or int64, got f32}}
  // expected-error @+1 {{'ampc.gather_elements' op failed to infer returned types}}
  %0 = ampc.gather_elements %d, %i {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_elements_rank0(%d: tensor<f32>, %i: tensor<i64>) {
  // expected-error @+2 {{ampc.gather_elements: data must have rank >= 1}}
  // expected-error @+1 {{'ampc.gather_elements' op failed to infer returned types}}
  %0 = ampc.gather_elements %d, %i : (tensor<f32>, tensor<i64>) -> tensor<f32>
  return
}

// -----

func.func @gather_elements_rank(%d: tensor<3x4xf32>, %i: tensor<2xi64>) {
  // expected-error @+2 {{ampc.gather_elements: indices [2] must have the rank of data [3, 4]}}
  // expected-error @+1 {{'ampc.gather_elements' op failed to infer returned types}}
  %0 = ampc.gather_elements %d, %i : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gather_elements_axis(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>) {
  // expected-error @+2 {{ampc.gather_elements: axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.gather_elements' op failed to infer returned types}}
  %0 = ampc.gather_elements %d, %i {axis = 2 : i64} : (tensor<3x4xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_elements_longer(%d: tensor<3x4xf32>, %i: tensor<2x5xi64>) {
  // expected-error @+2 {{ampc.gather_elements: indices [2, 5] are longer than data [3, 4] along dimension 1 (not the axis)}}
  // expected-error @+1 {{'ampc.gather_elements' op failed to infer returned types}}
  %0 = ampc.gather_elements %d, %i : (tensor<3x4xf32>, tensor<2x5xi64>) -> tensor<2x5xf32>
  return
}

// -----

func.func @scatter_elements_updates(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.scatter_elements: updates [2, 3] must have the shape of indices [2, 4]}}
  // expected-error @+1 {{'ampc.scatter_elements' op failed to infer returned types}}
  %0 = ampc.scatter_elements %d, %i, %u : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @scatter_elements_element_type(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf16>) {
  // expected-error @+2 {{ampc.scatter_elements: updates must have data's element type f32, got f16}}
  // expected-error @+1 {{'ampc.scatter_elements' op failed to infer returned types}}
  %0 = ampc.scatter_elements %d, %i, %u : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf16>) -> tensor<3x4xf32>
  return
}

// -----

func.func @scatter_elements_reduction(%d: tensor<3x4xf32>, %i: tensor<2x4xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+2 {{ampc.scatter_elements: 'reduction' must be none, add, mul, max or min, got 'sub'}}
  // expected-error @+1 {{'ampc.scatter_elements' op failed to infer returned types}}
  %0 = ampc.scatter_elements %d, %i, %u {reduction = "sub"} : (tensor<3x4xf32>, tensor<2x4xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @gather_nd_index_type(%d: tensor<3x4xf32>, %i: tensor<2x1xi8>) {
  // expected-error @+2 {{ampc.gather_nd: indices must be int32 or int64, got i8}}
  // expected-error @+1 {{'ampc.gather_nd' op failed to infer returned types}}
  %0 = ampc.gather_nd %d, %i : (tensor<3x4xf32>, tensor<2x1xi8>) -> tensor<2x4xf32>
  return
}

// -----

func.func @gather_nd_rank0(%d: tensor<3x4xf32>, %i: tensor<i64>) {
  // expected-error @+2 {{ampc.gather_nd: data [3, 4] and indices [] must have rank >= 1}}
  // expected-error @+1 {{'ampc.gather_nd' op failed to infer returned types}}
  %0 = ampc.gather_nd %d, %i : (tensor<3x4xf32>, tensor<i64>) -> tensor<4xf32>
  return
}

// -----

func.func @gather_nd_batch_dims(%d: tensor<3x4xf32>, %i: tensor<3x1xi64>) {
  // expected-error @+2 {{ampc.gather_nd: batch_dims 2 must be at least 0 and less than the ranks of data (2) and indices (2)}}
  // expected-error @+1 {{'ampc.gather_nd' op failed to infer returned types}}
  %0 = ampc.gather_nd %d, %i {batch_dims = 2 : i64} : (tensor<3x4xf32>, tensor<3x1xi64>) -> tensor<3xf32>
  return
}

// -----

func.func @gather_nd_tuple(%d: tensor<3x4xf32>, %i: tensor<2x3xi64>) {
  // expected-error @+2 {{ampc.gather_nd: indices [2, 3] hold index tuples of 3 elements, but data [3, 4] takes tuples of 1 to 2}}
  // expected-error @+1 {{'ampc.gather_nd' op failed to infer returned types}}
  %0 = ampc.gather_nd %d, %i : (tensor<3x4xf32>, tensor<2x3xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @gather_nd_batch(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>) {
  // expected-error @+2 {{ampc.gather_nd: indices [2, 1] and data [3, 4] must agree on the first 1 (batch) dimensions}}
  // expected-error @+1 {{'ampc.gather_nd' op failed to infer returned types}}
  %0 = ampc.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<3x4xf32>, tensor<2x1xi64>) -> tensor<2xf32>
  return
}

// -----

func.func @scatter_nd_updates(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x3xf32>) {
  // expected-error @+2 {{ampc.scatter_nd: updates [2, 3] must have shape [2, 4] (indices' but the last, then data's after the first 1)}}
  // expected-error @+1 {{'ampc.scatter_nd' op failed to infer returned types}}
  %0 = ampc.scatter_nd %d, %i, %u : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @scatter_nd_element_type(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf64>) {
  // expected-error @+2 {{ampc.scatter_nd: updates must have data's element type f32, got f64}}
  // expected-error @+1 {{'ampc.scatter_nd' op failed to infer returned types}}
  %0 = ampc.scatter_nd %d, %i, %u : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf64>) -> tensor<3x4xf32>
  return
}

// -----

func.func @scatter_nd_reduction(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) {
  // expected-error @+2 {{ampc.scatter_nd: 'reduction' must be none, add, mul, max or min, got 'mean'}}
  // expected-error @+1 {{'ampc.scatter_nd' op failed to infer returned types}}
  %0 = ampc.scatter_nd %d, %i, %u {reduction = "mean"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @reverse_sequence_rank(%x: tensor<4xf32>, %l: tensor<4xi64>) {
  // expected-error @+2 {{ampc.reverse_sequence: input must have rank 2 or more}}
  // expected-error @+1 {{'ampc.reverse_sequence' op failed to infer returned types}}
  %0 = ampc.reverse_sequence %x, %l : (tensor<4xf32>, tensor<4xi64>) -> tensor<4xf32>
  return
}

// -----

func.func @reverse_sequence_axes(%x: tensor<4x3x2xf32>, %l: tensor<2xi64>) {
  // expected-error @+2 {{ampc.reverse_sequence: time_axis and batch_axis must be 0 and 1 in some order, got 0 and 2}}
  // expected-error @+1 {{'ampc.reverse_sequence' op failed to infer returned types}}
  %0 = ampc.reverse_sequence %x, %l {batch_axis = 2 : i64} : (tensor<4x3x2xf32>, tensor<2xi64>) -> tensor<4x3x2xf32>
  return
}

// -----

func.func @reverse_sequence_lens(%x: tensor<4x3xf32>, %l: tensor<2xi64>) {
  // expected-error @+2 {{ampc.reverse_sequence: sequence_lens must be int64 [3] (one length per batch entry), got [2]}}
  // expected-error @+1 {{'ampc.reverse_sequence' op failed to infer returned types}}
  %0 = ampc.reverse_sequence %x, %l : (tensor<4x3xf32>, tensor<2xi64>) -> tensor<4x3xf32>
  return
}

// -----

func.func @one_hot_values(%i: tensor<3xi64>, %v: tensor<3xf32>) {
  // expected-error @+2 {{ampc.one_hot: input 2 (values) must be [off_value, on_value], got [3]}}
  // expected-error @+1 {{'ampc.one_hot' op failed to infer returned types}}
  %0 = ampc.one_hot %i, %v {depth = 4 : i64} : (tensor<3xi64>, tensor<3xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @one_hot_axis(%i: tensor<3xi64>, %v: tensor<2xf32>) {
  // expected-error @+2 {{ampc.one_hot: axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.one_hot' op failed to infer returned types}}
  %0 = ampc.one_hot %i, %v {axis = 2 : i64, depth = 4 : i64} : (tensor<3xi64>, tensor<2xf32>) -> tensor<3x4xf32>
  return
}

// -----

func.func @one_hot_depth(%i: tensor<3xi64>, %v: tensor<2xf32>) {
  // expected-error @+2 {{ampc.one_hot: depth 0 must be at least 1}}
  // expected-error @+1 {{'ampc.one_hot' op failed to infer returned types}}
  %0 = ampc.one_hot %i, %v {depth = 0 : i64} : (tensor<3xi64>, tensor<2xf32>) -> tensor<3x0xf32>
  return
}

// -----

func.func @top_k_values_rank(%x: tensor<f32>) {
  // expected-error @+2 {{ampc.top_k_values: input must have rank >= 1}}
  // expected-error @+1 {{'ampc.top_k_values' op failed to infer returned types}}
  %0:2 = ampc.top_k_values %x {k = 1 : i64} : (tensor<f32>) -> (tensor<f32>, tensor<i64>)
  return
}

// -----

func.func @top_k_values_axis(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.top_k_values: axis 2 is out of range for rank 2}}
  // expected-error @+1 {{'ampc.top_k_values' op failed to infer returned types}}
  %0:2 = ampc.top_k_values %x {axis = 2 : i64, k = 1 : i64} : (tensor<3x4xf32>) -> (tensor<3x1xf32>, tensor<3x1xi64>)
  return
}

// -----

func.func @top_k_values_k(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.top_k_values: K 5 must be between 0 and 4, the size of axis 1}}
  // expected-error @+1 {{'ampc.top_k_values' op failed to infer returned types}}
  %0:2 = ampc.top_k_values %x {k = 5 : i64} : (tensor<3x4xf32>) -> (tensor<3x5xf32>, tensor<3x5xi64>)
  return
}

// -----

func.func @top_k_values_largest(%x: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.top_k_values: 'largest' must be 0 or 1, got 2}}
  // expected-error @+1 {{'ampc.top_k_values' op failed to infer returned types}}
  %0:2 = ampc.top_k_values %x {k = 2 : i64, largest = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  return
}
