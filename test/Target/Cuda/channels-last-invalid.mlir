// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | not ampc-translate --ampc-to-cuda 2>&1 | FileCheck %s

// A channels-last convolution cuDNN cannot take (pads that differ at the
// two ends): im2col, col2im and the GEMMs are NCHW only, so the CUDA
// target refuses it.
// CHECK: error: {{.*}}the CUDA target runs a channels_last convolution on cuDNN only
func.func @forward(%x: tensor<1x8x8x3xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<1x4x4x16xf32> {
  %0 = ampc.conv %x, %w {channels_last, pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x8x3xf32>, tensor<16x3x3x3xf32>) -> tensor<1x4x4x16xf32>
  return %0 : tensor<1x4x4x16xf32>
}
