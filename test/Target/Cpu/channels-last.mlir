// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | not ampc-translate --ampc-to-cpp 2>&1 | FileCheck %s

// The CPU target's convolutions and pools take NCHW images: a channels-last
// one (ampc-channels-last, the CUDA target's layout) is refused by name.
// CHECK: error: {{.*}}the CPU target takes NCHW images: channels_last is the CUDA target's layout (--channels-last=off)
func.func @forward(%x: tensor<1x4x4x2xf32>, %w: tensor<3x1x1x2xf32>) -> tensor<1x4x4x3xf32> {
  %y = ampc.conv %x, %w {channels_last} : (tensor<1x4x4x2xf32>, tensor<3x1x1x2xf32>) -> tensor<1x4x4x3xf32>
  return %y : tensor<1x4x4x3xf32>
}
