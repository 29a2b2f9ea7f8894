// RUN: ampc-opt %s --split-input-file --ampc-autodiff -verify-diagnostics

// ampc-autodiff's errors, at the location of the op concerned (the ONNX
// node, for imported models).

// expected-error @+1 {{ampc-autodiff: the module has no @forward function to differentiate}}
module {
  func.func @predict(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}

// -----

ampc.parameter @w : tensor<2x3xf32> = dense<1.0> : tensor<2x3xf32>
func.func @forward(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %w = ampc.load_parameter @w : tensor<2x3xf32>
  // expected-error @+1 {{ampc-autodiff: the loss (the first result of @forward) must be a float scalar, got 'tensor<2x3xf32>'; ampc-attach-loss (--loss) can add one}}
  %y = ampc.mul %x, %w : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
  return %y : tensor<2x3xf32>
}

// -----

func.func @forward(%x: tensor<i64>) -> tensor<i64> {
  // expected-error @+1 {{ampc-autodiff: the loss (the first result of @forward) must be a float scalar, got 'tensor<i64>'}}
  %y = ampc.neg %x : tensor<i64>
  return %y : tensor<i64>
}

// -----

// A backward op has no gradient rule of its own (no second derivatives):
// on the path from a parameter to the loss it is an error, not a zero.
ampc.parameter @w : tensor<1x2x2x2xf32> = dense<1.0> : tensor<1x2x2x2xf32>
func.func @forward(%i: tensor<1x2x2x2xi64>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<1x2x2x2xf32>
  // expected-error @+1 {{ampc-autodiff: 'ampc.max_pool_grad' has no gradient rule, and the loss depends on a trainable parameter through it}}
  %g = ampc.max_pool_grad %w, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>) -> tensor<1x2x4x4xf32>
  %loss = ampc.reduce_sum %g {axes = array<i64>, keepdims = 0 : i64} : (tensor<1x2x4x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// The same op off the gradient path (it only sees an input) is fine.
ampc.parameter @w : tensor<f32> = dense<1.0> : tensor<f32>
func.func @forward(%dy: tensor<1x2x2x2xf32>, %i: tensor<1x2x2x2xi64>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<f32>
  %g = ampc.max_pool_grad %dy, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>) -> tensor<1x2x4x4xf32>
  %s = ampc.reduce_sum %g {axes = array<i64>, keepdims = 0 : i64} : (tensor<1x2x4x4xf32>) -> tensor<f32>
  %loss = ampc.mul %s, %w : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// LayerNormalization's rule differentiates Y only.
ampc.parameter @g : tensor<4xf32> = dense<1.0> : tensor<4xf32>
func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
  %g = ampc.load_parameter @g : tensor<4xf32>
  %s = ampc.mul %x, %g : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  // expected-error @+1 {{ampc-autodiff: the loss depends on result #1 of 'ampc.layer_normalization', which its gradient rule does not differentiate}}
  %y, %mean, %rstd = ampc.layer_normalization %s, %g : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  %loss = ampc.reduce_sum %mean {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x1xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// Every parameter frozen: a warning, and a @train_step with the loss only.
ampc.parameter @w {ampc.frozen} : tensor<4xf32> = dense<1.0> : tensor<4xf32>
func.func @forward(%x: tensor<4xf32>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<4xf32>
  %y = ampc.mul %x, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  // expected-warning @+1 {{ampc-autodiff: the loss depends on no trainable parameter; @train_step returns no gradient}}
  %loss = ampc.reduce_sum %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}

// -----

// expected-error @+1 {{ampc-autodiff: the module already has a @train_step}}
module {
  func.func @forward(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
  func.func @train_step(%x: tensor<f32>) -> tensor<f32> {
    return %x : tensor<f32>
  }
}
