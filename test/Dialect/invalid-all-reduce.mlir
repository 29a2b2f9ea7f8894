// The verifiers of ampc.all_reduce_start and ampc.all_reduce_wait (issue 41).
// RUN: ampc-opt %s -split-input-file -verify-diagnostics

func.func @start_size(%g: tensor<3x8xf32>) {
  // expected-error @+1 {{packs 24 gradient elements, so its result is 1-D of that size, got 'tensor<20xf16>'}}
  %p = ampc.all_reduce_start %g {bucket = 0 : i64} : (tensor<3x8xf32>) -> tensor<20xf16>
  return
}

// -----

func.func @start_empty() {
  // expected-error @+1 {{needs at least one gradient}}
  %p = ampc.all_reduce_start {bucket = 0 : i64} : () -> tensor<0xf16>
  return
}

// -----

func.func @start_bucket(%g: tensor<4xf32>) {
  // expected-error @+1 {{bucket is -1, expected >= 0}}
  %p = ampc.all_reduce_start %g {bucket = -1 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  return
}

// -----

func.func @wait_not_started(%p: tensor<4xf16>, %g: tensor<4xf32>) {
  // expected-error @+1 {{waits for a value ampc.all_reduce_start produced}}
  %m = ampc.all_reduce_wait %p, %g : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @wait_other_gradients(%g: tensor<4xf32>, %h: tensor<4xf32>) {
  %p = ampc.all_reduce_start %g {bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  // expected-error @+1 {{takes the gradients of its ampc.all_reduce_start, in its order}}
  %m = ampc.all_reduce_wait %p, %h : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @wait_type(%g: tensor<4xf32>) {
  %p = ampc.all_reduce_start %g {bucket = 0 : i64} : (tensor<4xf32>) -> tensor<4xf16>
  // expected-error @+1 {{result type 'tensor<4xf16>' differs from its gradient's 'tensor<4xf32>'}}
  %m = ampc.all_reduce_wait %p, %g : (tensor<4xf16>, tensor<4xf32>) -> tensor<4xf16>
  return
}
