// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Convolutions on the CUDA target: one cuDNN call per convolution and
// direction (ampc::cuda::convolution), its plan made at init from the
// library's table kConvolutions: {direction, data type, spatial rank, N, C,
// M, group, input size, output size, kernel, pads, strides, dilations,
// beta, channels-last, workspace slot}; a 1-D convolution is a 2-D one
// with H = 1. The only scratch is the call's workspace slot (here the
// 1 MiB floor: docs/design.md, "The convolutions' workspace in the memory
// plan"), no im2col: the only device work of a convolution is the cuDNN
// call (and the bias broadcast into Y before it).

// f32 with bias, pads 1 and strides 2: the bias broadcast per channel into
// the output first (strides {0, 1, 0, 0}), then the forward with beta 1.
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionForward, CUDNN_DATA_FLOAT, 2, 1, 3, 16, 1, {8, 8}, {4, 4}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 1.000000000e+00f, false, 1048576ULL},
// CHECK-NEXT:  };
// CHECK-NEXT:  static const char *const kConvolutionNodes[] = {
// CHECK-NEXT:    "ampc.conv",
// CHECK:         if (int32_t code = ampc::cuda::initConvolutions(ampc::cuda::context(raw), kConvolutions, 1, kConvolutionNodes)) return code;
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 2624);
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(256LL), ampc::cuda::kThreads, 0, ctx.stream, in2, [[Y]], 256LL, 0LL, ampc::cuda::Strided{4, {1LL, 16LL, 4LL, 4LL}, {0LL, 1LL, 0LL, 0LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.conv");
// CHECK-NEXT:    if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv", 0, in0, in1, [[Y]], reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
// CHECK-NOT:     im2col
func.func @forward(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x16x4x4xf32> {
  %0 = ampc.conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  return %0 : tensor<1x16x4x4xf32>
}

// -----

// 1-D, group 2, dilation 2, f16 without bias: a 2-D convolution with H = 1
// (input 1x7, kernel 1x3, dilations {1, 2}) of 2 groups, beta 0.
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionForward, CUDNN_DATA_HALF, 2, 2, 4, 4, 2, {1, 7}, {1, 3}, {1, 3}, {0, 0}, {1, 1}, {1, 2}, 0.000000000e+00f, false, 1048576ULL},
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 256);
// CHECK-NEXT:    if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv", 0, in0, in1, [[Y]], reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
func.func @forward(%x: tensor<2x4x7xf16>, %w: tensor<4x2x3xf16>) -> tensor<2x4x3xf16> {
  %0 = ampc.conv %x, %w {group = 2 : i64, dilations = array<i64: 2>} : (tensor<2x4x7xf16>, tensor<4x2x3xf16>) -> tensor<2x4x3xf16>
  return %0 : tensor<2x4x3xf16>
}

// -----

// The adjoints in f16: backward data (dy, W -> dx) and backward filter (x,
// dy -> dW), each one call with beta 0 (cuDNN accumulates in FP32 and
// rounds once into dx's and dW's type).
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionBackwardData, CUDNN_DATA_HALF, 2, 1, 3, 16, 1, {8, 8}, {4, 4}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 0.000000000e+00f, false, 1048576ULL},
// CHECK-NEXT:    {ampc::cuda::kConvolutionBackwardFilter, CUDNN_DATA_HALF, 2, 1, 3, 16, 1, {8, 8}, {4, 4}, {3, 3}, {1, 1}, {2, 2}, {1, 1}, 0.000000000e+00f, false, 1048576ULL},
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[DX:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1856);
// CHECK-NEXT:    if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv_backward_data", 0, in2, in1, [[DX]], reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
// CHECK-NEXT:    uint16_t *[[DW:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 448);
// CHECK-NEXT:    if (int32_t code = ampc::cuda::convolution(ctx, "ampc.conv_backward_weight", 1, in0, in2, [[DW]], reinterpret_cast<unsigned char *>(state + {{[0-9]+}}))) return code;
func.func @forward(%x: tensor<1x3x8x8xf16>, %w: tensor<16x3x3x3xf16>, %dy: tensor<1x16x4x4xf16>) -> (tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>) {
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
  %1 = ampc.conv_backward_weight %x, %dy {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
  return %0, %1 : tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>
}

// -----

// Pads that differ at the two ends (cuDNN's descriptors have one per
// dimension) keep im2col + cuBLASLt: no cuDNN plan.
// CHECK-NOT:   kConvolutions
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("im2col<float>", ampc::cuda::im2col<float>, ampc::cuda::blocks(432LL), ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + {{[0-9]+}}), 1LL, 3LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {0LL, 0LL}, {1LL, 1LL}, {1LL, 1LL}});
// CHECK:         ampc::cuda::gemm(ctx, "ampc.conv"
func.func @forward(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32> {
  %0 = ampc.conv %x, %w {pads = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<1x16x4x4xf32>
  return %0 : tensor<1x16x4x4xf32>
}

// -----

// 3-D (5-D tensors), f64: FP64 accumulation, CUDNN_DATA_DOUBLE.
// CHECK:       static const ampc::cuda::Convolution kConvolutions[] = {
// CHECK-NEXT:    {ampc::cuda::kConvolutionForward, CUDNN_DATA_DOUBLE, 3, 1, 2, 4, 1, {4, 4, 4}, {2, 2, 2}, {3, 3, 3}, {0, 0, 0}, {1, 1, 1}, {1, 1, 1}, 0.000000000e+00f, false, 1048576ULL},
func.func @forward(%x: tensor<1x2x4x4x4xf64>, %w: tensor<4x2x3x3x3xf64>) -> tensor<1x4x2x2x2xf64> {
  %0 = ampc.conv %x, %w : (tensor<1x2x4x4x4xf64>, tensor<4x2x3x3x3xf64>) -> tensor<1x4x2x2x2xf64>
  return %0 : tensor<1x4x2x2x2xf64>
}
