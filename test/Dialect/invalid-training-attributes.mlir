// RUN: ampc-opt %s --split-input-file --verify-diagnostics

// The attributes of partial batches (issue 34) and the GEMM's bias-gradient
// result (issue 37, item 3), each misused once.

// expected-error @+1 {{'ampc.parameter' op 'ampc.batch_rows' must be a unit attribute on an ampc.constant}}
ampc.parameter @p {ampc.batch_rows} : tensor<2xf32> = dense<1.0> : tensor<2xf32>

// -----

// expected-error @+1 {{'ampc.partial_batches' must be a string on the module, got 1 : i64}}
module attributes {ampc.partial_batches = 1 : i64} {
}

// -----

func.func @grad_without_epilogue(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{has a bias gradient result without a bias gradient epilogue}}
  %g, %b = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<16x8xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  return %b : tensor<4xf32>
}

// -----

func.func @grad_type(%x: tensor<16x8xf16>, %dy: tensor<16x4xf16>) -> tensor<4xf16> {
  // expected-error @+1 {{writes the bias gradient in the output's type (as cuBLASLt does), got}}
  %g, %b = ampc.gemm %x, %dy {transA = 1 : i64, epilogue = #ampc<epilogue bgrad_b>} : (tensor<16x8xf16>, tensor<16x4xf16>) -> (tensor<8x4xf32>, tensor<4xf16>)
  return %b : tensor<4xf16>
}

// -----

// ampc.subview (ampc-pack-qkv): a contiguous range inside its operand.
func.func @subview_outside(%x: tensor<4x8xf32>) -> tensor<2x8xf32> {
  // expected-error @+1 {{'ampc.subview' op elements [24, 24 + 16) are not inside the operand's 32}}
  %0 = ampc.subview %x {offset = 24 : i64} : tensor<4x8xf32> to tensor<2x8xf32>
  return %0 : tensor<2x8xf32>
}

// -----

func.func @subview_element_type(%x: tensor<4x8xf32>) -> tensor<8xf16> {
  // expected-error @+1 {{'ampc.subview' op result element type differs from the operand's}}
  %0 = ampc.subview %x {offset = 0 : i64} : tensor<4x8xf32> to tensor<8xf16>
  return %0 : tensor<8xf16>
}

// -----

// ampc.load_packed_state: states of one element type and equal trailing
// dimensions, whose rows add up to the result's.
module {
  ampc.state @a : tensor<2x8xf16> = dense<0.0> : tensor<2x8xf16>
  ampc.state @b : tensor<2x4xf16> = dense<0.0> : tensor<2x4xf16>
  func.func @packed_trailing() -> tensor<4x8xf16> {
    // expected-error @+1 {{'ampc.load_packed_state' op state 'b' of type 'tensor<2x4xf16>' does not pack into 'tensor<4x8xf16>' (one element type, equal trailing dimensions)}}
    %0 = ampc.load_packed_state [@a, @b] : tensor<4x8xf16>
    return %0 : tensor<4x8xf16>
  }
}

// -----

module {
  ampc.state @a : tensor<2x8xf16> = dense<0.0> : tensor<2x8xf16>
  func.func @packed_rows() -> tensor<6x8xf16> {
    // expected-error @+1 {{'ampc.load_packed_state' op the states have 4 rows in all, the result 6}}
    %0 = ampc.load_packed_state [@a, @a] : tensor<6x8xf16>
    return %0 : tensor<6x8xf16>
  }
}

// -----

func.func @packed_missing() -> tensor<2x8xf16> {
  // expected-error @+1 {{'ampc.load_packed_state' op 'nothing' is not an ampc.state}}
  %0 = ampc.load_packed_state [@nothing] : tensor<2x8xf16>
  return %0 : tensor<2x8xf16>
}

// -----

func.func @packed_scalar() -> tensor<f16> {
  // expected-error @+1 {{'ampc.load_packed_state' op packs one or more states into a tensor of rank 1 or more}}
  %0 = ampc.load_packed_state [] : tensor<f16>
  return %0 : tensor<f16>
}

// -----

// ampc.unscale's channels_last: a listed gradient is read (M, k..., C)
// under an (M, C, k...) result.
func.func @unscale_channels_last(%s: tensor<f32>, %g: tensor<4x3x3x2xf16>) {
  %ok:2 = ampc.unscale %s, %g {channels_last = array<i64: 0>} : (tensor<f32>, tensor<4x3x3x2xf16>) -> (tensor<4x2x3x3xf32>, tensor<i1>)
  // expected-error @+1 {{'ampc.unscale' op result type 'tensor<4x3x3x2xf32>' does not match gradient type 'tensor<4x3x3x2xf16>' read channels-last (nor widens it from f16/bf16 to f32)}}
  %bad:2 = ampc.unscale %s, %g {channels_last = array<i64: 0>} : (tensor<f32>, tensor<4x3x3x2xf16>) -> (tensor<4x3x3x2xf32>, tensor<i1>)
  return
}

// -----

func.func @unscale_channels_last_index(%s: tensor<f32>, %g: tensor<4x3x3x2xf16>) {
  // expected-error @+1 {{'ampc.unscale' op channels_last lists gradient 1, which is not one of the 1 gradients or is listed twice}}
  %bad:2 = ampc.unscale %s, %g {channels_last = array<i64: 1>} : (tensor<f32>, tensor<4x3x3x2xf16>) -> (tensor<4x2x3x3xf32>, tensor<i1>)
  return
}

// -----

func.func @unscale_channels_last_rank(%s: tensor<f32>, %g: tensor<4x2xf32>) {
  // expected-error @+1 {{'ampc.unscale' op a channels-last gradient has rank 3 or more, got 'tensor<4x2xf32>'}}
  %bad:2 = ampc.unscale %s, %g {channels_last = array<i64: 0>} : (tensor<f32>, tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<i1>)
  return
}
