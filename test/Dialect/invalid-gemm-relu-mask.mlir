// RUN: ampc-opt %s --split-input-file --verify-diagnostics

// The ReLU mask epilogues (issue 37, item 3): the mask's type follows the
// result ([m, n rounded up to 128 bits / 8] of i8), only drelu /
// drelu_bgrad read one, and they need it.
func.func @mask_type(%dy: tensor<8x3xf32>, %w: tensor<3x16xf32>, %m: tensor<8x2xi8>) -> tensor<8x16xf32> {
  // expected-error @+1 {{needs the ReLU mask of its 'tensor<8x16xf32>' result, 'tensor<8x16xi8>', got 'tensor<8x2xi8>'}}
  %d = ampc.gemm %dy, %w relu_mask %m {epilogue = #ampc<epilogue drelu>} : (tensor<8x3xf32>, tensor<3x16xf32>, tensor<8x2xi8>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

func.func @mask_without_drelu(%dy: tensor<8x3xf32>, %w: tensor<3x16xf32>, %m: tensor<8x16xi8>) -> tensor<8x16xf32> {
  // expected-error @+1 {{takes a ReLU mask only with epilogue 'drelu' or 'drelu_bgrad'}}
  %d = ampc.gemm %dy, %w relu_mask %m : (tensor<8x3xf32>, tensor<3x16xf32>, tensor<8x16xi8>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

func.func @drelu_without_mask(%dy: tensor<8x3xf32>, %w: tensor<3x16xf32>) -> tensor<8x16xf32> {
  // expected-error @+1 {{epilogue 'drelu' needs a ReLU mask}}
  %d = ampc.gemm %dy, %w {epilogue = #ampc<epilogue drelu>} : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

func.func @drelu_alpha(%dy: tensor<8x3xf32>, %w: tensor<3x16xf32>, %m: tensor<8x16xi8>) -> tensor<8x16xf32> {
  // expected-error @+1 {{epilogue 'drelu' takes no C and alpha 1}}
  %d = ampc.gemm %dy, %w relu_mask %m {alpha = 2.0 : f32, epilogue = #ampc<epilogue drelu>} : (tensor<8x3xf32>, tensor<3x16xf32>, tensor<8x16xi8>) -> tensor<8x16xf32>
  return %d : tensor<8x16xf32>
}

// -----

// relu_aux_bias writes the mask as its second result (inferred: 200
// columns are 256 bits, 32 bytes a row).
func.func @mask_result(%x: tensor<4x8xf32>, %w: tensor<200x8xf32>, %b: tensor<200xf32>) -> tensor<4x25xi8> {
  // expected-error @+2 {{failed to infer returned types}}
  // expected-error @+1 {{inferred type(s) 'tensor<4x200xf32>', 'tensor<4x32xi8>' are incompatible}}
  %h, %m = ampc.gemm %x, %w, %b {transB = 1 : i64, epilogue = #ampc<epilogue relu_aux_bias>} : (tensor<4x8xf32>, tensor<200x8xf32>, tensor<200xf32>) -> (tensor<4x200xf32>, tensor<4x25xi8>)
  return %m : tensor<4x25xi8>
}
