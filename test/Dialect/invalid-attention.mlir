// RUN: ampc-opt %s -split-input-file -verify-diagnostics

// ampc.attention and ampc.attention_grad (issue 38): the shape rule under
// the perms, reported by inferReturnTypes.

func.func @attention_bad_perm(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+2 {{ampc.attention: 'q_perm' must be a permutation of [0, 1, 2, 3], got [0, 1, 1, 3]}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %q, %q {scale = 1.0 : f32, q_perm = array<i64: 0, 1, 1, 3>} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_rank(%q: tensor<2x4x8xf32>) {
  // expected-error @+2 {{ampc.attention: Q must have rank 4, got tensor<2x4x8xf32>}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %q, %q {scale = 1.0 : f32} : (tensor<2x4x8xf32>, tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @attention_types(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf16>) {
  // expected-error @+2 {{ampc.attention: Q, K and V must have one element type, got tensor<1x2x4x8xf32>, tensor<1x2x4x8xf16> and tensor<1x2x4x8xf32>}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %k, %q {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf16>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// K is [B, S, H, D] but read with the default perm: its head dimension
// (logical 3) is 2, not Q's 8.
func.func @attention_k_shape(%q: tensor<1x2x4x8xf32>, %k: tensor<1x4x2x8xf32>) {
  // expected-error @+2 {{ampc.attention: K's logical shape [1, 4, 2, 8] must be [1, 2, Sk, 8] for Q's [1, 2, 4, 8]}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %k, %q {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x4x2x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_v_shape(%q: tensor<1x2x4x8xf32>, %v: tensor<1x2x5x8xf32>) {
  // expected-error @+2 {{ampc.attention: V's logical shape [1, 2, 5, 8] must be [1, 2, 4, Dv] for Q's [1, 2, 4, 8] and K's [1, 2, 4, 8]}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %q, %v {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x5x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_bias(%q: tensor<1x2x4x8xf32>, %b: tensor<3x4xf32>) {
  // expected-error @+2 {{ampc.attention: bias of shape [3, 4] does not broadcast to the scores' shape [1, 2, 4, 4]}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %q, %q, %b {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<3x4xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

func.func @attention_grad_lse(%q: tensor<1x2x4x8xf32>, %lse: tensor<1x2x4xf16>) {
  // expected-error @+2 {{ampc.attention_grad: LSE must have type tensor<1x2x4xf32>, got tensor<1x2x4xf16>}}
  // expected-error @+1 {{'ampc.attention_grad' op failed to infer returned types}}
  %d:3 = ampc.attention_grad %q, %q, %q, %q, %q, %lse {scale = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4xf16>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>)
  return
}

// -----

// Dropout's range: a ratio of 1 keeps nothing (and scales by 1 / 0).
func.func @attention_dropout_ratio(%q: tensor<1x2x4x8xf32>) {
  // expected-error @+2 {{ampc.attention: 'dropout_ratio' must be in [0, 1), got 1.000000}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %q, %q {scale = 1.0 : f32, dropout_ratio = 1.0 : f32} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> (tensor<1x2x4x8xf32>, tensor<1x2x4xf32>)
  return
}

// -----

// packed_qkv (ampc-pack-qkv): Q, K and V are one operand of 3 x H heads.
func.func @attention_packed_distinct(%q: tensor<1x4x3x8xf16>, %k: tensor<1x4x3x8xf16>) {
  // expected-error @+2 {{ampc.attention: with 'packed_qkv', Q, K and V must be one value with one perm}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %q, %k, %q {scale = 1.0 : f32, packed_qkv = true} : (tensor<1x4x3x8xf16>, tensor<1x4x3x8xf16>, tensor<1x4x3x8xf16>) -> (tensor<1x1x3x8xf16>, tensor<1x1x3xf32>)
  return
}

// -----

func.func @attention_packed_heads(%p: tensor<1x4x3x8xf16>) {
  // expected-error @+2 {{ampc.attention: with 'packed_qkv', the operand's heads dimension must hold 3 x H heads, got 4}}
  // expected-error @+1 {{'ampc.attention' op failed to infer returned types}}
  %o:2 = ampc.attention %p, %p, %p {scale = 1.0 : f32, packed_qkv = true} : (tensor<1x4x3x8xf16>, tensor<1x4x3x8xf16>, tensor<1x4x3x8xf16>) -> (tensor<1x1x3x8xf16>, tensor<1x1x3xf32>)
  return
}

// -----

// The adjoint of a packed attention has one result: dQ | dK | dV.
func.func @attention_grad_packed_results(%p: tensor<1x3x4x8xf16>, %o: tensor<1x1x4x8xf16>, %lse: tensor<1x1x4xf32>) {
  // expected-error @+2 {{'ampc.attention_grad' op inferred type(s) 'tensor<1x3x4x8xf16>' are incompatible with return type(s) of operation 'tensor<1x3x4x8xf16>', 'tensor<1x3x4x8xf16>', 'tensor<1x3x4x8xf16>'}}
  // expected-error @+1 {{'ampc.attention_grad' op failed to infer returned types}}
  %g:3 = ampc.attention_grad %o, %p, %p, %p, %o, %lse {scale = 1.0 : f32, packed_qkv = true} : (tensor<1x1x4x8xf16>, tensor<1x3x4x8xf16>, tensor<1x3x4x8xf16>, tensor<1x3x4x8xf16>, tensor<1x1x4x8xf16>, tensor<1x1x4xf32>) -> (tensor<1x3x4x8xf16>, tensor<1x3x4x8xf16>, tensor<1x3x4x8xf16>)
  return
}
