// RUN: ampc-opt %s -split-input-file --ampc-autodiff -verify-diagnostics

// Ops that ampc-autodiff refuses to differentiate, at the op (the gradient
// rules' own messages, lib/Dialect/Gradients.cpp).

// A Gemm whose epilogue is fused (kernel level) has no gradient rule.
ampc.parameter @w : tensor<3x3xf32> = dense<1.0> : tensor<3x3xf32>
func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<3x3xf32>
  // expected-error @+1 {{has a fused epilogue and no gradient rule: differentiate before ampc-fuse-epilogues}}
  %y = ampc.gemm %x, %w {epilogue = #ampc<epilogue relu>} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %l = ampc.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A GEMM reading its operands through matrix layouts (ampc-fold-transposes,
// kernel level) has no gradient rule: autodiff refuses it.
ampc.parameter @w : tensor<3x3xf32> = dense<1.0> : tensor<3x3xf32>
func.func @forward(%x: tensor<2x3xf32>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<3x3xf32>
  // expected-error @+1 {{ampc-autodiff: 'ampc.batched_gemm' has no gradient rule, and the loss depends on a trainable parameter through it}}
  %y = ampc.batched_gemm %x, %w {m = 2 : i64, n = 3 : i64, k = 3 : i64, transB = true, lda = 3 : i64, ldb = 3 : i64, ldd = 3 : i64} : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
  %l = ampc.reduce_sum %y {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An attention reading a packed Q|K|V (ampc-pack-qkv, kernel level) has no
// gradient rule.
ampc.parameter @w : tensor<1x4x3x8xf32> = dense<1.0> : tensor<1x4x3x8xf32>
func.func @forward() -> tensor<f32> {
  %p = ampc.load_parameter @w : tensor<1x4x3x8xf32>
  // expected-error @+1 {{with 'packed_qkv' (kernel level, after autodiff) has no gradient rule}}
  %o, %lse = ampc.attention %p, %p, %p {scale = 1.0 : f32, packed_qkv = true, q_perm = array<i64: 0, 2, 1, 3>, k_perm = array<i64: 0, 2, 1, 3>, v_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>, tensor<1x4x3x8xf32>) -> (tensor<1x4x1x8xf32>, tensor<1x1x4xf32>)
  %l = ampc.reduce_sum %o {axes = array<i64: 0, 1, 2, 3>, keepdims = 0 : i64} : (tensor<1x4x1x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
