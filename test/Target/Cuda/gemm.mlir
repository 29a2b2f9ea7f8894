// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-lower-matmul --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Gemm and MatMul (an ampc.batched_gemm: ampc-lower-matmul) on the CUDA
// target: one cuBLASLt matmul per ampc::cuda::Gemm = {transA, transB, M,
// N, K, batch, strideA, strideB, strideD, operand type, result type,
// alpha, beta, epilogue[, lda, ldb, ldd]}, FP32
// compute, called with (A, B, D, bias).

// A Gemm with a bias row whose only user is a Relu: ampc-fuse-epilogues
// folds the Relu into the Gemm (relu_bias), whose result the plan keeps
// apart from the operands (offset 0; the inputs are staged from 128); the
// RELU_BIAS epilogue writes it and no Relu kernel is launched. FP16
// operands and result.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[R:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 512);
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {false, true, 4LL, 8LL, 16LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_16F, CUDA_R_16F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_RELU_BIAS};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.gemm", g, in0, in1, [[R]], in2)) return code; }
// CHECK-NOT:     launch(
// CHECK:         cudaMemcpyAsync(outputs[0], [[R]], 64ULL,
func.func @forward(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<8xf16>) -> tensor<4x8xf16> {
  %0 = ampc.gemm %x, %w, %b {transB = 1 : i64} : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  %1 = ampc.relu %0 : tensor<4x8xf16>
  return %1 : tensor<4x8xf16>
}

// -----

// A column C is no bias epilogue: it is broadcast into D (strides {1, 0})
// by a strided copy, then cuBLASLt computes alpha op(A) B + beta D with
// transA, alpha 0.5 and beta -2, in FP32.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 320);
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(12LL), ampc::cuda::kThreads, 0, ctx.stream, in2, [[Y]], 12LL, 0LL, ampc::cuda::Strided{2, {3LL, 4LL}, {1LL, 0LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gemm");
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {true, false, 3LL, 4LL, 5LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_32F, CUDA_R_32F, 5.000000000e-01f, -2.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.gemm", g, in0, in1, [[Y]], nullptr)) return code; }
func.func @forward(%a: tensor<5x3xf32>, %b: tensor<5x4xf32>, %c: tensor<3x1xf32>) -> tensor<3x4xf32> {
  %0 = ampc.gemm %a, %b, %c {transA = 1 : i64, alpha = 0.5 : f32, beta = -2.0 : f32} : (tensor<5x3xf32>, tensor<5x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// A batched MatMul whose batches are evenly spaced is one strided-batch
// call: 4 batches, A, B and D stepping 15, 30 and 18 elements.
// CHECK-LABEL: static int32_t infer(
// CHECK:         { static const ampc::cuda::Gemm g = {false, false, 3LL, 6LL, 5LL, 4LL, 15LL, 30LL, 18LL, CUDA_R_16F, CUDA_R_16F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT, 5LL, 6LL, 6LL};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.batched_gemm", g, in0, in1, v0, nullptr)) return code; }
// CHECK-NOT:     ampc::cuda::gemm(
// CHECK:         return ampc::cuda::synchronize(ctx);
func.func @forward(%x: tensor<4x3x5xf16>, %y: tensor<4x5x6xf16>) -> tensor<4x3x6xf16> {
  %0 = ampc.matmul %x, %y : (tensor<4x3x5xf16>, tensor<4x5x6xf16>) -> tensor<4x3x6xf16>
  return %0 : tensor<4x3x6xf16>
}

// -----

// Broadcast batch dimensions (2x1 against 4) are not evenly spaced:
// ampc-lower-matmul expands both operands to the 2x4 batch (a kernel
// each; one call per batch before), then one strided-batch call of 8.
// CHECK-LABEL: static int32_t infer(
// CHECK:         AMPC_LAUNCHED(ctx, "ampc.expand");
// CHECK:         AMPC_LAUNCHED(ctx, "ampc.expand");
// CHECK:         { static const ampc::cuda::Gemm g = {false, false, 3LL, 6LL, 5LL, 8LL, 15LL, 30LL, 18LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT, 5LL, 6LL, 6LL};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.batched_gemm", g, v0, v1, v2, nullptr)) return code; }
// CHECK-NOT:     ampc::cuda::gemm(
func.func @forward(%x: tensor<2x1x3x5xf32>, %y: tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32> {
  %0 = ampc.matmul %x, %y : (tensor<2x1x3x5xf32>, tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32>
  return %0 : tensor<2x4x3x6xf32>
}

// -----

// A 1-D right operand in bf16: a 3x1x5 product, BF16 operands and result.
// CHECK-LABEL: static int32_t infer(
// CHECK:         { static const ampc::cuda::Gemm g = {false, false, 3LL, 1LL, 5LL, 1LL, 0LL, 0LL, 3LL, CUDA_R_16BF, CUDA_R_16BF, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT, 5LL, 1LL, 1LL};
func.func @forward(%x: tensor<3x5xbf16>, %v: tensor<5xbf16>) -> tensor<3xbf16> {
  %0 = ampc.matmul %x, %v : (tensor<3x5xbf16>, tensor<5xbf16>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}

// -----

// ampc-fold-transposes: the heads [S, B*H, D] transposed to [B*H, S, D]
// and the attention output transposed back are no copies: one batched
// GEMM reads x with lda 32 (rows B*H*D apart) and batch stride 16, and
// writes the transposed result with ldd 32 and batch stride 16; the
// leading dimensions (A, B, D) end the Gemm description.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[O:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1344);
// CHECK-NEXT:    { static const ampc::cuda::Gemm g = {false, false, 4LL, 16LL, 16LL, 2LL, 16LL, 256LL, 16LL, CUDA_R_16F, CUDA_R_16F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DEFAULT, 32LL, 16LL, 32LL};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.batched_gemm", g, in0, in1, [[O]], nullptr)) return code; }
// CHECK-NOT:     stridedCopy
// CHECK:         cudaMemcpyAsync(outputs[0], [[O]], 256ULL,
func.func @forward(%x: tensor<4x32xf16>, %p: tensor<2x16x16xf16>) -> tensor<4x32xf16> {
  %h = ampc.reshape %x : tensor<4x32xf16> to tensor<4x2x16xf16>
  %t = ampc.transpose %h {perm = array<i64: 1, 0, 2>} : (tensor<4x2x16xf16>) -> tensor<2x4x16xf16>
  %a = ampc.matmul %t, %p : (tensor<2x4x16xf16>, tensor<2x16x16xf16>) -> tensor<2x4x16xf16>
  %o = ampc.transpose %a {perm = array<i64: 1, 0, 2>} : (tensor<2x4x16xf16>) -> tensor<4x2x16xf16>
  %r = ampc.reshape %o : tensor<4x2x16xf16> to tensor<4x32xf16>
  return %r : tensor<4x32xf16>
}

// -----

// A transposed input of a Gemm with a bias: transA, A read as stored
// (16 x 4, lda 4), the bias epilogue kept.
// CHECK-LABEL: static int32_t infer(
// CHECK:         { static const ampc::cuda::Gemm g = {true, true, 4LL, 8LL, 16LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_BIAS, 4LL, 16LL, 8LL};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.batched_gemm", g, in0, in1, {{v[0-9]+}}, in2)) return code; }
func.func @forward(%x: tensor<16x4xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %t = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
  %g = ampc.gemm %t, %w, %b {transB = 1 : i64, epilogue = #ampc<epilogue bias>} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
