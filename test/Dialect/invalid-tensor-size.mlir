// RUN: ampc-opt %s -verify-diagnostics

// Every ampc op holds its tensors to 2^48 bytes (include/ampc/Dialect/
// TensorSize.h), whatever produced the IR, so no size computed from them
// overflows.
func.func @huge(%x: tensor<1125899906842625x256xf32>) -> tensor<1125899906842625x256xf32> {
  // expected-error @+1 {{'ampc.relu' op tensor too large: tensor<1125899906842625x256xf32> has 1152921504606848000 bytes, more than the limit of 281474976710656 bytes}}
  %y = ampc.relu %x : tensor<1125899906842625x256xf32>
  return %y : tensor<1125899906842625x256xf32>
}
