// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" | ampc-translate --ampc-to-cuda | FileCheck %s
// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | ampc-translate --ampc-to-cpp | FileCheck %s --check-prefix=CPU
// RUN: sed -e 's/@v.b : tensor<16xf16> = dense<0.0>/@v.b : tensor<16xf16> = dense<1.0>/' %s | ampc-opt --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | not ampc-translate --ampc-to-cpp 2>&1 | FileCheck %s --check-prefix=NONZERO

// What ampc-pack-qkv leaves, emitted (issue 37, item 3). The states of a
// packing are laid out one after the other with no padding, so the packed
// weight [48, 16] is a pointer to the first (0) and the packed bias
// follows it at 48 x 16 x 2 = 1536 bytes; the attention reads Q, K and V
// from the one GEMM output with row stride 48 (3 heads of 16), K at +16
// and V at +32 elements; a subview is a pointer into its operand (256
// elements = 512 bytes in).
// CHECK: uint16_t *[[W:s[0-9]+]] = reinterpret_cast<uint16_t *>(state + 0);
// CHECK-NEXT: uint16_t *[[B:s[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1536);
// CHECK: ampc::cuda::gemm(ctx, "ampc.batched_gemm", g, in0, [[W]], [[Y:v[0-9]+]], [[B]])
// CHECK: attention::forward<__half, 16>(reinterpret_cast<__half *>([[Y]]), ampc::cuda::attention::Strides{384LL, 16LL, 48LL, 1LL}, (reinterpret_cast<__half *>([[Y]]) + 16), ampc::cuda::attention::Strides{384LL, 16LL, 48LL, 1LL}, (reinterpret_cast<__half *>([[Y]]) + 32), ampc::cuda::attention::Strides{384LL, 16LL, 48LL, 1LL},
// CHECK: uint16_t *v{{[0-9]+}} = reinterpret_cast<uint16_t *>(state + 512);
//
// The CPU kernels take the same pointers.
// CPU: uint16_t *[[W:s[0-9]+]] = reinterpret_cast<uint16_t *>(state + 0);
// CPU-NEXT: uint16_t *[[B:s[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1536);
// CPU: ampc::cpu::attention<float, ampc::cpu::AsF16, ampc::cpu::As<float>, ampc::cpu::As<float>>([[Y:v[0-9]+]], ([[Y]] + 16), ([[Y]] + 32), nullptr,
// CPU: uint16_t *v{{[0-9]+}} = reinterpret_cast<uint16_t *>(state + 512);
//
// Only states that start at zero (the weight copies) are laid out so.
// NONZERO: error: {{.*}}cannot lay out state 'v.b' packed: it must be a state that starts at zero, in one packing
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @q.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @k.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @v.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  func.func @forward(%x: tensor<8x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<16x16xf16>) {
    %w = ampc.load_packed_state [@q.w, @k.w, @v.w] : tensor<48x16xf16>
    %b = ampc.load_packed_state [@q.b, @k.b, @v.b] : tensor<48xf16>
    %y = ampc.batched_gemm %x, %w, %b {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 48 : i64, m = 8 : i64, n = 48 : i64, transB = true} : (tensor<8x16xf16>, tensor<48x16xf16>, tensor<48xf16>) -> tensor<8x48xf16>
    %p = ampc.reshape %y : tensor<8x48xf16> to tensor<1x8x3x16xf16>
    %o, %lse = ampc.attention %p, %p, %p {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, packed_qkv = true, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x3x16xf16>, tensor<1x8x3x16xf16>, tensor<1x8x3x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    %kw = ampc.subview %w {offset = 256 : i64} : tensor<48x16xf16> to tensor<16x16xf16>
    return %o, %kw : tensor<1x8x1x16xf16>, tensor<16x16xf16>
  }
}
