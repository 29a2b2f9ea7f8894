// Channels-last images (issue 39, item 3): ampc-channels-last gives a
// CNN's convolutions, BatchNorms and pools `channels_last`, the
// elementwise ops between them compute on (N, H, W, C) images, and a
// transpose (marked ampc.layout) is inserted only where an image enters
// the region (the model's input, each convolution's weight) or leaves it
// (the pooled (N, 1, 1, C) features: a reshape, the same bytes). The
// function's signature is unchanged.
// RUN: ampc-opt %s --ampc-channels-last | FileCheck %s
// CHECK: func.func @forward(%[[X:.+]]: tensor<2x3x8x8xf32>, %[[W1:.+]]: tensor<8x3x3x3xf32>, %[[S:.+]]: tensor<8xf32>, %[[B:.+]]: tensor<8xf32>, %[[W2:.+]]: tensor<8x8x3x3xf32>) -> tensor<2x8xf32>
// CHECK-DAG: %[[XL:.+]] = ampc.transpose %[[X]] {ampc.layout = "X of node 'conv1' (ampc.conv) to channels-last", perm = array<i64: 0, 2, 3, 1>} : (tensor<2x3x8x8xf32>) -> tensor<2x8x8x3xf32>
// CHECK-DAG: %[[W1L:.+]] = ampc.transpose %[[W1]] {ampc.layout = "W of node 'conv1' (ampc.conv) to channels-last", perm = array<i64: 0, 2, 3, 1>} : (tensor<8x3x3x3xf32>) -> tensor<8x3x3x3xf32>
// CHECK-DAG: %[[W2L:.+]] = ampc.transpose %[[W2]] {ampc.layout = "W of node 'conv2' (ampc.conv) to channels-last", perm = array<i64: 0, 2, 3, 1>} : (tensor<8x8x3x3xf32>) -> tensor<8x3x3x8xf32>
// CHECK: %[[C1:.+]] = ampc.conv %[[XL]], %[[W1L]] {channels_last, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x8x3xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32>
// CHECK: %[[Y:.+]], %{{.+}}, %{{.+}} = ampc.batch_normalization %[[C1]], %[[S]], %[[B]], %[[S]], %[[B]] {channels_last, training_mode = 1 : i64} : (tensor<2x8x8x8xf32>, {{.*}}) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
// CHECK: %[[R:.+]] = ampc.relu %[[Y]] : tensor<2x8x8x8xf32>
// CHECK: %[[P:.+]], %{{.+}} = ampc.max_pool %[[R]] {channels_last, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x8x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x8xi64>)
// CHECK: %[[C2:.+]] = ampc.conv %[[P]], %[[W2L]] {channels_last, pads = array<i64: 1, 1, 1, 1>} : (tensor<2x4x4x8xf32>, tensor<8x3x3x8xf32>) -> tensor<2x4x4x8xf32>
// CHECK: %[[A:.+]] = ampc.add %[[C2]], %[[P]] : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>) -> tensor<2x4x4x8xf32>
// CHECK: %[[M:.+]] = ampc.reduce_mean %[[A]] {axes = array<i64: 1, 2>} : (tensor<2x4x4x8xf32>) -> tensor<2x1x1x8xf32>
// CHECK: %[[MF:.+]] = ampc.reshape %[[M]] {ampc.layout = "back to NCHW for node 'flat' (ampc.flatten) (a reshape)"} : tensor<2x1x1x8xf32> to tensor<2x8x1x1xf32>
// CHECK: %[[F:.+]] = ampc.flatten %[[MF]]
// CHECK: return %[[F]] : tensor<2x8xf32>
func.func @forward(%x: tensor<2x3x8x8xf32>, %w1: tensor<8x3x3x3xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %w2: tensor<8x8x3x3xf32>) -> tensor<2x8xf32> {
  %c1 = ampc.conv %x, %w1 {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<2x8x8x8xf32> loc("conv1")
  %y, %rm, %rv = ampc.batch_normalization %c1, %s, %b, %s, %b {training_mode = 1 : i64} : (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x8x8xf32>, tensor<8xf32>, tensor<8xf32>)
  %r = ampc.relu %y : tensor<2x8x8x8xf32>
  %p, %i = ampc.max_pool %r {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<2x8x8x8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xi64>)
  %c2 = ampc.conv %p, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x8x4x4xf32>, tensor<8x8x3x3xf32>) -> tensor<2x8x4x4xf32> loc("conv2")
  %a = ampc.add %c2, %p : (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>) -> tensor<2x8x4x4xf32>
  %m = ampc.global_average_pool %a : (tensor<2x8x4x4xf32>) -> tensor<2x8x1x1xf32>
  %f = ampc.flatten %m {axis = 1 : i64} : (tensor<2x8x1x1xf32>) -> tensor<2x8xf32> loc("flat")
  return %f : tensor<2x8xf32>
}

// A MaxPool whose Indices the function returns keeps NCHW (its indices
// are ONNX's), and its input goes back to NCHW for it; a one-channel
// image and a 1x1 weight cross the layout as reshapes (only unit
// dimensions move); a function without a 2-D convolution is left alone.
// CHECK-LABEL: func.func @indices
// CHECK-DAG: ampc.reshape %{{.+}} {ampc.layout = "W of ampc.conv to channels-last (a reshape)"} : tensor<2x1x1x1xf32> to tensor<2x1x1x1xf32>
// CHECK-DAG: ampc.reshape %{{.+}} {ampc.layout = "X of ampc.conv to channels-last (a reshape)"} : tensor<1x1x4x4xf32> to tensor<1x4x4x1xf32>
// CHECK: ampc.conv {{.*}}channels_last
// CHECK: %[[BACK:.+]] = ampc.transpose %{{.+}} {ampc.layout = "back to NCHW for ampc.max_pool", perm = array<i64: 0, 3, 1, 2>} : (tensor<1x4x4x2xf32>) -> tensor<1x2x4x4xf32>
// CHECK: ampc.max_pool %[[BACK]] {kernel_shape
func.func @indices(%x: tensor<1x1x4x4xf32>, %w: tensor<2x1x1x1xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>) {
  %c = ampc.conv %x, %w : (tensor<1x1x4x4xf32>, tensor<2x1x1x1xf32>) -> tensor<1x2x4x4xf32>
  %p, %i = ampc.max_pool %c {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> (tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>)
  return %p, %i : tensor<1x2x2x2xf32>, tensor<1x2x2x2xi64>
}

// CHECK-LABEL: func.func @no_conv
// CHECK-NOT: channels_last
// CHECK-NOT: ampc.transpose
// CHECK: return
func.func @no_conv(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %p = ampc.average_pool %x {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32>
  return %p : tensor<1x2x2x2xf32>
}

// A convolution the CUDA target cannot run on cuDNN (pads uneven at the
// two ends: its im2col path is NCHW only) keeps NCHW.
// CHECK-LABEL: func.func @uneven
// CHECK-NOT: channels_last
// CHECK-NOT: ampc.transpose
// CHECK: return
func.func @uneven(%x: tensor<1x2x4x4xf32>, %w: tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32> {
  %y = ampc.conv %x, %w {pads = array<i64: 0, 0, 1, 1>} : (tensor<1x2x4x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x3x3xf32>
  return %y : tensor<1x3x3x3xf32>
}
