// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-lower-matmul --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Gemm and MatMul (an ampc.batched_gemm: ampc-lower-matmul) on the CPU
// target: 16-bit operands are widened to FP32
// (ampc::cpu::widen with their codec) into the op's scratch block, the
// product accumulates in FP32 in `acc`, also scratch (ampc::cpu::gemm:
// transA, transB, M, N, K, alpha, A, B, beta, C), and the result is
// rounded once when stored. C is broadcast into `acc` times beta first,
// then the GEMM adds with beta 1.

// Gemm transB with a bias row in f16: the bias is broadcast along rows
// (strides {0, 1}); 4x16 times (8x16)^T; the Relu after it is folded into
// the Gemm (ampc-fuse-epilogues: relu_bias), so the store loop clamps
// before it rounds and no Relu loop follows.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *w_in0 = reinterpret_cast<float *>(state + 128); ampc::cpu::widen<ampc::cpu::AsF16>(in0, 64LL, w_in0);
// CHECK-NEXT:      float *w_in1 = reinterpret_cast<float *>(state + 384); ampc::cpu::widen<ampc::cpu::AsF16>(in1, 128LL, w_in1);
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 960);
// CHECK-NEXT:      float *w_in2 = reinterpret_cast<float *>(state + 896); ampc::cpu::widen<ampc::cpu::AsF16>(in2, 8LL, w_in2);
// CHECK-NEXT:      { static const int64_t dims[] = {4LL, 8LL}; static const int64_t s0[] = {0LL, 1LL}; const int64_t *strides[] = {s0};
// CHECK-NEXT:        ampc::cpu::parallelForEach<1>(2, dims, strides, [&](int64_t o, int64_t i0) { acc[o] = float(1.000000000e+00) * w_in2[i0]; }); }
// CHECK-NEXT:      ampc::cpu::gemm<float>(false, true, 4LL, 8LL, 16LL, float(1.000000000e+00), w_in0, w_in1, float(1), acc);
// CHECK-NEXT:      for (int64_t i = 0; i < 32LL; ++i) [[Y]][i] = ampc::cpu::storeF16((!(acc[i] <= 0) ? acc[i] : float(0)));
// CHECK-NEXT:    }
// CHECK-NEXT:    std::memcpy(outputs[0], [[Y]], 64ULL);
func.func @forward(%x: tensor<4x16xf16>, %w: tensor<8x16xf16>, %b: tensor<8xf16>) -> tensor<4x8xf16> {
  %0 = ampc.gemm %x, %w, %b {transB = 1 : i64} : (tensor<4x16xf16>, tensor<8x16xf16>, tensor<8xf16>) -> tensor<4x8xf16>
  %1 = ampc.relu %0 : tensor<4x8xf16>
  return %1 : tensor<4x8xf16>
}

// -----

// transA, alpha and beta, a column C (strides {1, 0}) in f32: read in
// place, no widening copies; M, N, K = 3, 4, 5.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      const float *w_in0 = in0;
// CHECK-NEXT:      const float *w_in1 = in1;
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:      const float *w_in2 = in2;
// CHECK-NEXT:      { static const int64_t dims[] = {3LL, 4LL}; static const int64_t s0[] = {1LL, 0LL}; const int64_t *strides[] = {s0};
// CHECK-NEXT:        ampc::cpu::parallelForEach<1>(2, dims, strides, [&](int64_t o, int64_t i0) { acc[o] = float(-2.000000000e+00) * w_in2[i0]; }); }
// CHECK-NEXT:      ampc::cpu::gemm<float>(true, false, 3LL, 4LL, 5LL, float(5.000000000e-01), w_in0, w_in1, float(1), acc);
// CHECK-NEXT:      for (int64_t i = 0; i < 12LL; ++i) [[Y]][i] = static_cast<float>(acc[i]);
func.func @forward(%a: tensor<5x3xf32>, %b: tensor<5x4xf32>, %c: tensor<3x1xf32>) -> tensor<3x4xf32> {
  %0 = ampc.gemm %a, %b, %c {transA = 1 : i64, alpha = 0.5 : f32, beta = -2.0 : f32} : (tensor<5x3xf32>, tensor<5x4xf32>, tensor<3x1xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Batched MatMul in f16 (an ampc.batched_gemm: ampc-lower-matmul): one
// 3x6x5 GEMM per batch, A stepping 15 and B 30 elements, each writing 18
// elements of `acc`; no C (beta 0).
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *acc = reinterpret_cast<float *>(state + 1024);
// CHECK-NEXT:    for (int64_t p = 0; p < 4LL; ++p) ampc::cpu::gemm<float>(false, false, 3LL, 6LL, 5LL, float(1.000000000e+00), w_in0 + p * 15LL, 5LL, w_in1 + p * 30LL, 6LL, float(0), acc + p * 18LL, 6LL);
// CHECK-NEXT:    for (int64_t i = 0; i < 72LL; ++i) v0[i] = ampc::cpu::storeF16(acc[i]);
func.func @forward(%x: tensor<4x3x5xf16>, %y: tensor<4x5x6xf16>) -> tensor<4x3x6xf16> {
  %0 = ampc.matmul %x, %y : (tensor<4x3x5xf16>, tensor<4x5x6xf16>) -> tensor<4x3x6xf16>
  return %0 : tensor<4x3x6xf16>
}

// -----

// Batch dimensions broadcast (2x1 against 4): no one stride per operand
// describes them, so ampc-lower-matmul expands both to the 2x4 batch (two
// copies) and the GEMMs step 15 and 30 elements.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cpu::parallelForEach<1>(4, dims, strides
// CHECK:         ampc::cpu::parallelForEach<1>(4, dims, strides
// CHECK:         for (int64_t p = 0; p < 8LL; ++p) ampc::cpu::gemm<float>(false, false, 3LL, 6LL, 5LL, float(1.000000000e+00), w_v0 + p * 15LL, 5LL, w_v1 + p * 30LL, 6LL, float(0), acc + p * 18LL, 6LL);
func.func @forward(%x: tensor<2x1x3x5xf32>, %y: tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32> {
  %0 = ampc.matmul %x, %y : (tensor<2x1x3x5xf32>, tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32>
  return %0 : tensor<2x4x3x6xf32>
}

// -----

// A 1-D right operand in bf16 is a 5x1 matrix: one 3x1x5 GEMM, bf16 loads
// and a bf16 store.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *w_in0 = reinterpret_cast<float *>(state + 128); ampc::cpu::widen<ampc::cpu::AsBf16>(in0, 15LL, w_in0);
// CHECK-NEXT:    float *w_in1 = reinterpret_cast<float *>(state + 192); ampc::cpu::widen<ampc::cpu::AsBf16>(in1, 5LL, w_in1);
// CHECK:         for (int64_t p = 0; p < 1LL; ++p) ampc::cpu::gemm<float>(false, false, 3LL, 1LL, 5LL, float(1.000000000e+00), w_in0 + p * 0LL, 5LL, w_in1 + p * 0LL, 1LL, float(0), acc + p * 3LL, 1LL);
// CHECK:         for (int64_t i = 0; i < 3LL; ++i) v0[i] = ampc::cpu::storeBf16(acc[i]);
func.func @forward(%x: tensor<3x5xbf16>, %v: tensor<5xbf16>) -> tensor<3xbf16> {
  %0 = ampc.matmul %x, %v : (tensor<3x5xbf16>, tensor<5xbf16>) -> tensor<3xbf16>
  return %0 : tensor<3xbf16>
}

// -----

// ampc-fold-transposes: the heads [S, B*H, D] transposed to [B*H, S, D]
// and the attention output transposed back: one cblas GEMM per batch
// reading x with lda 32 from batch offset p * 16 and accumulating into
// acc, laid out as the result, with ldc 32 (no transpose copies).
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[O:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *w_in0 = reinterpret_cast<float *>(state + 320); ampc::cpu::widen<ampc::cpu::AsF16>(in0, 128LL, w_in0);
// CHECK-NEXT:      float *w_in1 = reinterpret_cast<float *>(state + 832); ampc::cpu::widen<ampc::cpu::AsF16>(in1, 512LL, w_in1);
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 2880);
// CHECK-NEXT:      for (int64_t p = 0; p < 2LL; ++p) ampc::cpu::gemm<float>(false, false, 4LL, 16LL, 16LL, float(1.000000000e+00), w_in0 + p * 16LL, 32LL, w_in1 + p * 256LL, 16LL, float(0), acc + p * 16LL, 32LL);
// CHECK-NEXT:      for (int64_t i = 0; i < 128LL; ++i) [[O]][i] = ampc::cpu::storeF16(acc[i]);
func.func @forward(%x: tensor<4x32xf16>, %p: tensor<2x16x16xf16>) -> tensor<4x32xf16> {
  %h = ampc.reshape %x : tensor<4x32xf16> to tensor<4x2x16xf16>
  %t = ampc.transpose %h {perm = array<i64: 1, 0, 2>} : (tensor<4x2x16xf16>) -> tensor<2x4x16xf16>
  %a = ampc.matmul %t, %p : (tensor<2x4x16xf16>, tensor<2x16x16xf16>) -> tensor<2x4x16xf16>
  %o = ampc.transpose %a {perm = array<i64: 1, 0, 2>} : (tensor<2x4x16xf16>) -> tensor<4x2x16xf16>
  %r = ampc.reshape %o : tensor<4x2x16xf16> to tensor<4x32xf16>
  return %r : tensor<4x32xf16>
}

// -----

// A transposed input of a Gemm with a bias: the bias goes into acc first
// (as a Gemm's C), then the GEMM adds with transA, lda 4.
// CHECK-LABEL: static int32_t infer(
// CHECK:         for (int64_t p = 0; p < 1LL; ++p) for (int64_t i = 0; i < 4LL; ++i) for (int64_t j = 0; j < 8LL; ++j) acc[p * 0LL + i * 8LL + j] = w_in2[j];
// CHECK-NEXT:    for (int64_t p = 0; p < 1LL; ++p) ampc::cpu::gemm<float>(true, true, 4LL, 8LL, 16LL, float(1.000000000e+00), w_in0 + p * 0LL, 4LL, w_in1 + p * 0LL, 16LL, float(1), acc + p * 0LL, 8LL);
func.func @forward(%x: tensor<16x4xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %t = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<16x4xf32>) -> tensor<4x16xf32>
  %g = ampc.gemm %t, %w, %b {transB = 1 : i64, epilogue = #ampc<epilogue bias>} : (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}
