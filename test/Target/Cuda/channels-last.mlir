// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// channels_last on the CUDA target: NHWC tensors and OHWI weights. A
// convolution's plan in kConvolutions has the NCHW sizes (N, C, M, in,
// out, kernel read from X (n, h, w, c), W (m, kh, kw, c/group), Y (n, oh,
// ow, m)) and `true` last (NHWC descriptors, a KRSC filter); the pools
// pass C as `channels`; a BatchNorm is (N·H·W, C, 1).

// The forward with bias (broadcast along the last axis first, beta 1),
// pads 1, strides 2, 2 groups: X 2x9x7x4, W 6x3x3x2, Y 2x5x4x6.
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionForward, CUDNN_DATA_FLOAT, 2, 2, 4, 6, 2, {9, 7}, {5, 4}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1.000000000e+00f, true, 1048576ULL},
// CHECK-NEXT:  };
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(240LL), ampc::cuda::kThreads, 0, ctx.stream, in2, [[Y:v[0-9]+]], 240LL, 0LL, ampc::cuda::Strided{4, {2LL, 5LL, 4LL, 6LL}, {0LL, 0LL, 0LL, 1LL}});
// CHECK:         if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv", 0, in0, in1, [[Y]], reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
func.func @forward(%x: tensor<2x9x7x4xf32>, %w: tensor<6x3x3x2xf32>, %b: tensor<6xf32>) -> tensor<2x5x4x6xf32> {
  %0 = ampc.conv %x, %w, %b {channels_last, group = 2 : i64, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x9x7x4xf32>, tensor<6x3x3x2xf32>, tensor<6xf32>) -> tensor<2x5x4x6xf32>
  return %0 : tensor<2x5x4x6xf32>
}

// -----

// The adjoints in f16: each its NHWC plan, beta 0.
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionBackwardData, CUDNN_DATA_HALF, 2, 1, 3, 16, 1, {8, 6}, {4, 3}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 0.000000000e+00f, true, 1048576ULL},
// CHECK-NEXT:    {ampc::cuda::kConvolutionBackwardFilter, CUDNN_DATA_HALF, 2, 1, 3, 16, 1, {8, 6}, {4, 3}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 0.000000000e+00f, true, 1048576ULL},
// CHECK-LABEL: static int32_t infer(
// CHECK:         if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv_backward_data", 0, in2, in1, {{v[0-9]+}}, reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
// CHECK:         if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv_backward_weight", 1, in0, in2, {{v[0-9]+}}, reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
func.func @forward(%x: tensor<1x8x6x3xf16>, %w: tensor<16x3x3x3xf16>, %dy: tensor<1x4x3x16xf16>) -> (tensor<1x8x6x3xf16>, tensor<16x3x3x3xf16>) {
  %0 = ampc.conv_backward_data %dy, %w {channels_last, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x3x16xf16>, tensor<16x3x3x3xf16>) -> tensor<1x8x6x3xf16>
  %1 = ampc.conv_backward_weight %x, %dy {channels_last, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x6x3xf16>, tensor<1x4x3x16xf16>) -> tensor<16x3x3x3xf16>
  return %0, %1 : tensor<1x8x6x3xf16>, tensor<16x3x3x3xf16>
}

// -----

// Pools: the window over H, W of 1x8x8x4 (planes N·C = 4), `channels` 4.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("maxPool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, in0, [[M:v[0-9]+]], [[I:v[0-9]+]], 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}}, false, 4LL);
// CHECK:         ampc::cuda::launch("averagePool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, in0, {{v[0-9]+}}, 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {7LL, 7LL}, {3LL, 3LL}, {1LL, 1LL}, {1LL, 0LL}, {0LL, 1LL}, {1LL, 1LL}}, true, 4LL);
// CHECK:         ampc::cuda::launch("maxPoolGrad<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, [[M]], [[I]], {{v[0-9]+}}, 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}}, false, 4LL);
// CHECK:         ampc::cuda::launch("averagePoolGrad<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {7LL, 7LL}, {3LL, 3LL}, {1LL, 1LL}, {1LL, 0LL}, {0LL, 1LL}, {1LL, 1LL}}, true, 4LL);
func.func @forward(%img: tensor<1x8x8x4xf32>, %ga: tensor<1x7x7x4xf32>) -> (tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>) {
  %0:2 = ampc.max_pool %img {channels_last, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x8x4xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
  %1 = ampc.average_pool %img {channels_last, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 0, 1>, count_include_pad = 1 : i64} : (tensor<1x8x8x4xf32>) -> tensor<1x7x7x4xf32>
  %2 = ampc.max_pool_grad %0#0, %0#1 {channels_last, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>) -> tensor<1x8x8x4xf32>
  %3 = ampc.average_pool_grad %ga {channels_last, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 0, 1>, count_include_pad = 1 : i64} : (tensor<1x7x7x4xf32>) -> tensor<1x8x8x4xf32>
  return %2, %3 : tensor<1x8x8x4xf32>, tensor<1x8x8x4xf32>
}

// -----

// BatchNorm in training mode and its adjoint over 2x4x4x8 (C = 8 last):
// n = N·H·W = 32, c = 8, inner = 1.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::batchNormTrain<{{.*}}>, {{.*}}, in0, {{v[0-9]+}}, 32LL, 8LL, 1LL,
// CHECK:         ampc::cuda::batchNormGrad<{{.*}}>, {{.*}}, 32LL, 8LL, 1LL,
func.func @forward(%x: tensor<2x4x4x8xf32>, %s: tensor<8xf32>, %bias: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %dy: tensor<2x4x4x8xf32>) -> (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %t:5 = ampc.batch_normalization %x, %s, %bias, %m, %v {channels_last, epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics} : (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %g:3 = ampc.batch_norm_grad %dy, %x, %s, %t#3, %t#4 {channels_last, training_mode = 1 : i64} : (tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %t#0, %g#0, %g#1, %g#2 : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<8xf32>, tensor<8xf32>
}
