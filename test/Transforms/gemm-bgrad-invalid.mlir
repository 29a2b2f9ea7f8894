// RUN: ampc-opt %s --split-input-file --verify-diagnostics

// The bias gradient is in the output's type (cuBLASLt's default bias type).
func.func @grad_type(%x: tensor<16x8xf16>, %dy: tensor<16x4xf16>) -> tensor<4xf16> {
  // expected-error @+1 {{writes the bias gradient in the output's type}}
  %g, %b = ampc.gemm %x, %dy {transA = 1 : i64, epilogue = #ampc<epilogue bgrad_b>} : (tensor<16x8xf16>, tensor<16x4xf16>) -> (tensor<8x4xf32>, tensor<4xf16>)
  return %b : tensor<4xf16>
}

// -----

func.func @alpha(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{epilogue 'bgrad_b' takes no C and alpha 1}}
  %g, %b = ampc.gemm %x, %dy {transA = 1 : i64, alpha = 2.0 : f32, epilogue = #ampc<epilogue bgrad_b>} : (tensor<16x8xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
  return %b : tensor<4xf32>
}
