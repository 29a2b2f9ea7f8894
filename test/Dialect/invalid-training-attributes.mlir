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
