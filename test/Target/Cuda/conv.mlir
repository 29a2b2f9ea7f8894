// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Convolutions on the CUDA target: an im2col kernel into the scratch region
// (the conv's scratch block, ampc.scratch), then cuBLASLt GEMMs (one per group, or one strided
// batch over the images); the window is ampc::cuda::Window = {spatial rank,
// input size, output size, kernel, strides, begin pads, end pads,
// dilations}. Gemm = {transA, transB, M, N, K, batch, strideA, strideB,
// strideD, operand type, result type, alpha, beta, epilogue}.

// f32 with bias, pads 1 and strides 2: im2col over 432 column entries
// (27 x 16), the bias broadcast per channel into the output first
// (strides {0, 1, 0, 0}), then W (16x27) times the columns (27x16) with
// beta 1.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 2624);
// CHECK-NEXT:    ampc::cuda::launch("im2col<float>", ampc::cuda::im2col<float>, ampc::cuda::blocks(432LL), ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + 3648), 1LL, 3LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.conv");
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(256LL), ampc::cuda::kThreads, 0, ctx.stream, in2, [[Y]], 256LL, 0LL, ampc::cuda::Strided{4, {1LL, 16LL, 4LL, 4LL}, {0LL, 1LL, 0LL, 0LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.conv");
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {false, false, 16LL, 16LL, 27LL, 1LL, 0LL, 432LL, 256LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 1.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.conv", g, in1 + 0, reinterpret_cast<float *>(state + 3648) + 0, [[Y]] + 0, nullptr)) return code; }
func.func @forward(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x16x4x4xf32> {
  %0 = ampc.conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  return %0 : tensor<1x16x4x4xf32>
}

// -----

// 1-D, group 2, dilation 2, f16 without bias: im2col on the f16 data, then
// one GEMM per group (2x3x6, batched over the 2 images: columns 36 and
// output 12 elements apart), the second group's weights 12 elements, its
// columns 18 and its output 6 further on.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("im2col<uint16_t>", ampc::cuda::im2col<uint16_t>, ampc::cuda::blocks(72LL), ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<uint16_t *>(state + 320), 2LL, 4LL, ampc::cuda::Window{1, {7LL}, {3LL}, {3LL}, {1LL}, {0LL}, {0LL}, {2LL}});
// CHECK:         { static const ampc::cuda::Gemm g = {false, false, 2LL, 3LL, 6LL, 2LL, 0LL, 36LL, 12LL, CUDA_R_16F, CUDA_R_16F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.conv", g, in1 + 0, reinterpret_cast<uint16_t *>(state + 320) + 0, v0 + 0, nullptr)) return code; }
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {false, false, 2LL, 3LL, 6LL, 2LL, 0LL, 36LL, 12LL, CUDA_R_16F, CUDA_R_16F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.conv", g, in1 + 12, reinterpret_cast<uint16_t *>(state + 320) + 18, v0 + 6, nullptr)) return code; }
func.func @forward(%x: tensor<2x4x7xf16>, %w: tensor<4x2x3xf16>) -> tensor<2x4x3xf16> {
  %0 = ampc.conv %x, %w {group = 2 : i64, dilations = array<i64: 2>} : (tensor<2x4x7xf16>, tensor<4x2x3xf16>) -> tensor<2x4x3xf16>
  return %0 : tensor<2x4x3xf16>
}

// -----

// The adjoints in f16, accumulated in FP32 scratch: the data gradient is
// W^T dy (27x16x16, FP32 result) folded back by col2im with an f16 store;
// the weight gradient is dy times im2col(x)^T into FP32, then converted to
// f16 at offset 384.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[DX:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1856);
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {true, false, 27LL, 16LL, 16LL, 1LL, 0LL, 256LL, 432LL, CUDA_R_16F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.conv_backward_data", g, in1 + 0, in2 + 0, reinterpret_cast<float *>(state + 2240) + 0, nullptr)) return code; }
// CHECK-NEXT:    ampc::cuda::launch("col2im<float, ampc::cuda::AsF16>", ampc::cuda::col2im<float, ampc::cuda::AsF16>, ampc::cuda::blocks(192LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + 2240), [[DX]], 1LL, 3LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.conv_backward_data");
// CHECK-NEXT:    uint16_t *[[DW:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 448);
// CHECK-NEXT:    ampc::cuda::launch("im2col<uint16_t>", ampc::cuda::im2col<uint16_t>, ampc::cuda::blocks(432LL), ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<uint16_t *>(state + 2240), 1LL, 3LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.conv_backward_weight");
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {false, true, 16LL, 27LL, 16LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_16F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.conv_backward_weight", g, in2 + (0) * 256 + 0, reinterpret_cast<uint16_t *>(state + 2240) + (0) * 432 + 0, reinterpret_cast<float *>(state + 3136) + 0, nullptr)) return code; }
// CHECK-NEXT:    ampc::cuda::launch("convert<float, ampc::cuda::AsF16>", ampc::cuda::convert<float, ampc::cuda::AsF16>, ampc::cuda::blocks(432LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + 3136), [[DW]], 432LL);
func.func @forward(%x: tensor<1x3x8x8xf16>, %w: tensor<16x3x3x3xf16>, %dy: tensor<1x16x4x4xf16>) -> (tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>) {
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
  %1 = ampc.conv_backward_weight %x, %dy {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
  return %0, %1 : tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>
}
