// RUN: ampc-opt %s --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s
// RUN: ampc-opt %s --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --ampc-to-cpp | FileCheck %s --check-prefix=CPU

// A Linear's backward (issue 37, item 3): one cuBLASLt GEMM, FP16
// operands, FP32 D (the weight gradient, no cast kernel), dYᵀ X with the
// bias gradient from op(A) = dYᵀ: the runtime hands cuBLASLt row-major B
// as its A, so op(A)'s bias gradient is cuBLASLt's BGRADB, written through
// the bias pointer (the Gemm's second result). No reduce, no convert.
// CHECK-NOT: ampc::cuda::reduce
// CHECK: static const ampc::cuda::Gemm g = {true, false, 32LL, 16LL, 16LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_16F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_BGRADB};
// CHECK-NEXT: ampc::cuda::gemm(ctx, "ampc.gemm", g, [[DY:in[0-9]+]], [[X:in[0-9]+]], [[W:v[0-9]+]], [[B:v[0-9]+]])
// CHECK-NOT: ampc::cuda::reduce
// CHECK-NOT: convert
//
// The CPU target (the reference) computes the same op: the FP32 product,
// and op(A)'s rows summed over k in ReduceSum's pairwise order.
// CPU: ampc::cpu::gemm<float>(true, false, 32LL, 16LL, 16LL, float(1.000000000e+00), w_[[DY:in[0-9]+]], w_[[X:in[0-9]+]], float(0), acc);
// CPU: for (int64_t i = 0; i < 32LL; ++i) v{{[0-9]+}}[i] = static_cast<float>(ampc::cpu::pairwiseSum<float>(0, 16LL, [&](int64_t kk) { return w_[[DY]][kk * 32LL + i]; }));
func.func @forward(%x: tensor<2x8x16xf16>, %dy: tensor<2x8x32xf16>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf16>) -> tensor<32xf16>
  %db = ampc.cast %s {ampc.autocast} : tensor<32xf16> to tensor<32xf32>
  %x2 = ampc.reshape %x : tensor<2x8x16xf16> to tensor<16x16xf16>
  %dy2 = ampc.reshape %dy : tensor<2x8x32xf16> to tensor<16x32xf16>
  %g = ampc.gemm %x2, %dy2 {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x32xf16>) -> tensor<16x32xf16>
  %w = ampc.cast %g {ampc.autocast} : tensor<16x32xf16> to tensor<16x32xf32>
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  return %t, %db : tensor<32x16xf32>, tensor<32xf32>
}
