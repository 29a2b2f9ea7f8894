// Channel counts for Tensor Cores (issue 39, item 3): ampc-pad-channels
// pads a channels-last FP16/BF16 convolution of one group to multiples of
// 8: C with zero channels on X's and the weight's last axis (4, not 8, for
// a stride-2 layer of at most 4 channels: a network's first), M with zero
// filters, zero bias and a slice back for every reader; the decision, and
// why a convolution is not padded, is `ampc.gemm_shape`.
// RUN: ampc-opt %s --ampc-pad-channels | FileCheck %s

// CHECK-LABEL: func.func @first_layer
// CHECK: %[[Z:.+]] = ampc.constant dense<0.000000e+00> : tensor<1x1x1x1xf16>
// CHECK: %[[ZX:.+]] = ampc.expand %[[Z]] : tensor<1x1x1x1xf16> to tensor<2x32x32x1xf16>
// CHECK: %[[PX:.+]] = ampc.concat %arg0, %[[ZX]] {ampc.padding, axis = 3 : i64} : (tensor<2x32x32x3xf16>, tensor<2x32x32x1xf16>) -> tensor<2x32x32x4xf16>
// CHECK: %[[ZW:.+]] = ampc.expand %{{.+}} : tensor<1x1x1x1xf16> to tensor<64x7x7x1xf16>
// CHECK: %[[PW:.+]] = ampc.concat %arg1, %[[ZW]] {ampc.padding, axis = 3 : i64} : (tensor<64x7x7x3xf16>, tensor<64x7x7x1xf16>) -> tensor<64x7x7x4xf16>
// CHECK: %[[Y:.+]] = ampc.conv %[[PX]], %[[PW]] {ampc.gemm_shape = "node 'conv1' (ampc.conv) (f16, needs 8): C 3, M 64; C 3 padded to 4 (X and the weight's copy with 1 zero channels; 4, not 8: a stride-2 layer of at most 4 channels, which cuDNN's C = 4 kernels take)", channels_last, {{.*}}} : (tensor<2x32x32x4xf16>, tensor<64x7x7x4xf16>) -> tensor<2x16x16x64xf16>
// CHECK: return %[[Y]]
func.func @first_layer(%x: tensor<2x32x32x3xf16>, %w: tensor<64x7x7x3xf16>) -> tensor<2x16x16x64xf16> {
  %y = ampc.conv %x, %w {channels_last, pads = array<i64: 3, 3, 3, 3>, strides = array<i64: 2, 2>} : (tensor<2x32x32x3xf16>, tensor<64x7x7x3xf16>) -> tensor<2x16x16x64xf16> loc("conv1")
  return %y : tensor<2x16x16x64xf16>
}

// C 2 (stride 1) and M 3 both go to 8; the bias gets 5 zeros; the readers
// (here the return and a ReLU) read the first 3 channels.
// CHECK-LABEL: func.func @both
// CHECK: %[[PX:.+]] = ampc.concat %arg0, %{{.+}} {ampc.padding, axis = 3 : i64} : (tensor<2x6x6x2xbf16>, tensor<2x6x6x6xbf16>) -> tensor<2x6x6x8xbf16>
// CHECK: %[[PWC:.+]] = ampc.concat %arg1, %{{.+}} {ampc.padding, axis = 3 : i64} : (tensor<3x3x3x2xbf16>, tensor<3x3x3x6xbf16>) -> tensor<3x3x3x8xbf16>
// CHECK: %[[PW:.+]] = ampc.concat %[[PWC]], %{{.+}} {ampc.padding, axis = 0 : i64} : (tensor<3x3x3x8xbf16>, tensor<5x3x3x8xbf16>) -> tensor<8x3x3x8xbf16>
// CHECK: %[[PB:.+]] = ampc.concat %arg2, %{{.+}} {ampc.padding, axis = 0 : i64} : (tensor<3xbf16>, tensor<5xbf16>) -> tensor<8xbf16>
// CHECK: %[[Y:.+]] = ampc.conv %[[PX]], %[[PW]], %[[PB]] {ampc.gemm_shape = "node 'conv2' (ampc.conv) (bf16, needs 8): C 2, M 3; C 2 padded to 8 (X and the weight's copy with 6 zero channels); M 3 padded to 8 (the weight's copy with 5 zero filters, Y sliced back to 3 channels for every reader)", channels_last} : (tensor<2x6x6x8xbf16>, tensor<8x3x3x8xbf16>, tensor<8xbf16>) -> tensor<2x4x4x8xbf16>
// CHECK: %[[S:.+]] = ampc.slice %[[Y]] {ampc.padding, axes = array<i64: 3>, ends = array<i64: 3>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x4x4x8xbf16>) -> tensor<2x4x4x3xbf16>
// CHECK: %[[R:.+]] = ampc.relu %[[S]] : tensor<2x4x4x3xbf16>
// CHECK: return %[[S]], %[[R]]
func.func @both(%x: tensor<2x6x6x2xbf16>, %w: tensor<3x3x3x2xbf16>, %b: tensor<3xbf16>) -> (tensor<2x4x4x3xbf16>, tensor<2x4x4x3xbf16>) {
  %y = ampc.conv %x, %w, %b {channels_last} : (tensor<2x6x6x2xbf16>, tensor<3x3x3x2xbf16>, tensor<3xbf16>) -> tensor<2x4x4x3xbf16> loc("conv2")
  %r = ampc.relu %y : tensor<2x4x4x3xbf16>
  return %y, %r : tensor<2x4x4x3xbf16>, tensor<2x4x4x3xbf16>
}

// Not padded, and why: groups, depthwise, FP32 (no Tensor Cores; nothing
// to say), already aligned (nothing to say), and an NCHW convolution (not
// this pass's: no decision).
// CHECK-LABEL: func.func @unpadded
// CHECK-NOT: ampc.concat
// CHECK: ampc.conv {{.*}}ampc.gemm_shape = "ampc.conv (f16, needs 8): C 12, M 12; not padded: 2 groups (each group's channels would be padded; not done)"
// CHECK: ampc.conv {{.*}}ampc.gemm_shape = "ampc.conv (f16, needs 8): C 6, M 6; not padded: depthwise (one channel a group; cuDNN's depthwise kernels do not use Tensor Cores)"
// CHECK: ampc.conv {{.*}}ampc.gemm_shape = "ampc.conv (f32, needs 1): C 3, M 5"
// CHECK: ampc.conv {{.*}}ampc.gemm_shape = "ampc.conv (f16, needs 8): C 8, M 16"
// CHECK: ampc.conv
// CHECK-NOT: ampc.gemm_shape
// CHECK-NOT: ampc.concat
// CHECK: return
func.func @unpadded(%x1: tensor<1x4x4x12xf16>, %w1: tensor<12x3x3x6xf16>, %x2: tensor<1x4x4x6xf16>, %w2: tensor<6x3x3x1xf16>, %x3: tensor<1x4x4x3xf32>, %w3: tensor<5x3x3x3xf32>, %x4: tensor<1x4x4x8xf16>, %w4: tensor<16x3x3x8xf16>, %x5: tensor<1x3x4x4xf16>, %w5: tensor<5x3x3x3xf16>) -> (tensor<1x4x4x12xf16>, tensor<1x4x4x6xf16>, tensor<1x4x4x5xf32>, tensor<1x4x4x16xf16>, tensor<1x5x4x4xf16>) {
  %y1 = ampc.conv %x1, %w1 {channels_last, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x12xf16>, tensor<12x3x3x6xf16>) -> tensor<1x4x4x12xf16>
  %y2 = ampc.conv %x2, %w2 {channels_last, group = 6 : i64, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x6xf16>, tensor<6x3x3x1xf16>) -> tensor<1x4x4x6xf16>
  %y3 = ampc.conv %x3, %w3 {channels_last, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x3xf32>, tensor<5x3x3x3xf32>) -> tensor<1x4x4x5xf32>
  %y4 = ampc.conv %x4, %w4 {channels_last, pads = array<i64: 1, 1, 1, 1>} : (tensor<1x4x4x8xf16>, tensor<16x3x3x8xf16>) -> tensor<1x4x4x16xf16>
  %y5 = ampc.conv %x5, %w5 {pads = array<i64: 1, 1, 1, 1>} : (tensor<1x3x4x4xf16>, tensor<5x3x3x3xf16>) -> tensor<1x5x4x4xf16>
  return %y1, %y2, %y3, %y4, %y5 : tensor<1x4x4x12xf16>, tensor<1x4x4x6xf16>, tensor<1x4x4x5xf32>, tensor<1x4x4x16xf16>, tensor<1x5x4x4xf16>
}
