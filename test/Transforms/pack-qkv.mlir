// RUN: ampc-opt %s --split-input-file --ampc-pack-qkv | FileCheck %s

// ampc-pack-qkv (issue 37, item 3): an attention's Q, K and V projections
// (three Linear GEMMs of one input, their 16-bit weights and biases read
// from state) become one GEMM on the packed weight, the attention and its
// adjoint read and write Q | K | V in place (packed_qkv), the three dX
// GEMMs and their adds one GEMM over k = 3n, the three weight-gradient
// GEMMs one whose rows are the three gradients (ampc.subview).

// The training step's pattern, as ampc-fold-transposes leaves it.
// CHECK-LABEL: func.func @train
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x16xf16>, %[[DO:[^:]+]]: tensor<1x8x1x16xf16>)
// CHECK-NEXT: %[[W:.+]] = ampc.load_packed_state [@q.w, @k.w, @v.w] : tensor<48x16xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.load_packed_state [@q.b, @k.b, @v.b] : tensor<48xf16>
// CHECK-NEXT: %[[Y:.+]] = ampc.batched_gemm %[[X]], %[[W]], %[[B]] {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 48 : i64, m = 8 : i64, n = 48 : i64, transB = true} : (tensor<8x16xf16>, tensor<48x16xf16>, tensor<48xf16>) -> tensor<8x48xf16>
// CHECK-NEXT: %[[P:.+]] = ampc.reshape %[[Y]] : tensor<8x48xf16> to tensor<1x8x3x16xf16>
// CHECK-NEXT: %[[O:[^,]+]], %[[L:.+]] = ampc.attention %[[P]], %[[P]], %[[P]] {{{.*}}packed_qkv = true{{.*}}} : (tensor<1x8x3x16xf16>, tensor<1x8x3x16xf16>, tensor<1x8x3x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
// CHECK-NEXT: %[[G:.+]] = ampc.attention_grad %[[DO]], %[[P]], %[[P]], %[[P]], %[[O]], %[[L]] {{{.*}}packed_qkv = true{{.*}}} : {{.*}} -> tensor<1x8x3x16xf16>
// CHECK-NEXT: %[[GM:.+]] = ampc.reshape %[[G]] : tensor<1x8x3x16xf16> to tensor<8x48xf16>
// CHECK-NEXT: %[[DX:.+]] = ampc.batched_gemm %[[GM]], %[[W]] {k = 48 : i64, lda = 48 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x48xf16>, tensor<48x16xf16>) -> tensor<8x16xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[DX]] : tensor<8x16xf16> to tensor<8x16xf32>
// CHECK-NEXT: %[[DW:[^,]+]], %[[DB:.+]] = ampc.gemm %[[GM]], %[[X]] {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x48xf16>, tensor<8x16xf16>) -> (tensor<48x16xf32>, tensor<48xf32>)
// CHECK-NEXT: %[[DWQ:.+]] = ampc.subview %[[DW]] {offset = 0 : i64} : tensor<48x16xf32> to tensor<16x16xf32>
// CHECK-NEXT: %[[DBQ:.+]] = ampc.subview %[[DB]] {offset = 0 : i64} : tensor<48xf32> to tensor<16xf32>
// CHECK-NEXT: %[[DWK:.+]] = ampc.subview %[[DW]] {offset = 256 : i64} : tensor<48x16xf32> to tensor<16x16xf32>
// CHECK-NEXT: %[[DBK:.+]] = ampc.subview %[[DB]] {offset = 16 : i64} : tensor<48xf32> to tensor<16xf32>
// CHECK-NEXT: %[[DWV:.+]] = ampc.subview %[[DW]] {offset = 512 : i64} : tensor<48x16xf32> to tensor<16x16xf32>
// CHECK-NEXT: %[[DBV:.+]] = ampc.subview %[[DB]] {offset = 32 : i64} : tensor<48xf32> to tensor<16xf32>
// CHECK-NEXT: return %[[O]], %[[C]], %[[DWQ]], %[[DBQ]], %[[DWK]], %[[DBK]], %[[DWV]], %[[DBV]]
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @q.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @k.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @v.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  func.func @train(%x: tensor<8x16xf16>, %do: tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>) {
    %wq = ampc.load_state @q.w : tensor<16x16xf16>
    %bq = ampc.load_state @q.b : tensor<16xf16>
    %wk = ampc.load_state @k.w : tensor<16x16xf16>
    %bk = ampc.load_state @k.b : tensor<16xf16>
    %wv = ampc.load_state @v.w : tensor<16x16xf16>
    %bv = ampc.load_state @v.b : tensor<16xf16>
    %q0 = ampc.batched_gemm %x, %wq, %bq {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %k0 = ampc.batched_gemm %x, %wk, %bk {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %v0 = ampc.batched_gemm %x, %wv, %bv {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    %g:3 = ampc.attention_grad %do, %q, %k, %v, %o, %lse {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x1x8xf32>) -> (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>)
    %gq = ampc.reshape %g#0 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxq = ampc.batched_gemm %gq, %wq {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwq, %dbq = ampc.gemm %gq, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %cq = ampc.cast %dxq : tensor<8x16xf16> to tensor<8x16xf32>
    %gk = ampc.reshape %g#1 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxk = ampc.batched_gemm %gk, %wk {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwk, %dbk = ampc.gemm %gk, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %ck = ampc.cast %dxk : tensor<8x16xf16> to tensor<8x16xf32>
    %gv = ampc.reshape %g#2 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxv = ampc.batched_gemm %gv, %wv {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwv, %dbv = ampc.gemm %gv, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %cv = ampc.cast %dxv : tensor<8x16xf16> to tensor<8x16xf32>
    %s0 = ampc.add %cq, %ck : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %s1 = ampc.add %s0, %cv : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %o, %s1, %dwq, %dbq, %dwk, %dbk, %dwv, %dbv : tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>
  }
}

// -----

// The forward alone (no adjoint) packs too.
// CHECK-LABEL: func.func @forward
// CHECK-NEXT: ampc.load_packed_state [@q.w, @k.w, @v.w]
// CHECK-NEXT: ampc.load_packed_state [@q.b, @k.b, @v.b]
// CHECK-NEXT: ampc.batched_gemm
// CHECK-NEXT: ampc.reshape
// CHECK-NEXT: ampc.attention {{.*}}packed_qkv = true
// CHECK-NEXT: return
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @q.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @k.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @v.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  func.func @forward(%x: tensor<8x16xf16>) -> (tensor<1x8x1x16xf16>) {
    %wq = ampc.load_state @q.w : tensor<16x16xf16>
    %bq = ampc.load_state @q.b : tensor<16xf16>
    %wk = ampc.load_state @k.w : tensor<16x16xf16>
    %bk = ampc.load_state @k.b : tensor<16xf16>
    %wv = ampc.load_state @v.w : tensor<16x16xf16>
    %bv = ampc.load_state @v.b : tensor<16xf16>
    %q0 = ampc.batched_gemm %x, %wq, %bq {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %k0 = ampc.batched_gemm %x, %wk, %bk {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %v0 = ampc.batched_gemm %x, %wv, %bv {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    return %o : tensor<1x8x1x16xf16>
  }
}

// -----

// K's projection is read by something else too: nothing changes.
// CHECK-LABEL: func.func @shared_projection
// CHECK-NOT: ampc.load_packed_state
// CHECK-COUNT-3: ampc.batched_gemm %{{.+}} {epilogue = #ampc<epilogue bias>
// CHECK: ampc.attention %{{[^,]+}}, %{{[^,]+}}, %{{[^ ]+}} {causal
// CHECK-NOT: packed_qkv
// CHECK: return
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @q.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @k.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @v.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  func.func @shared_projection(%x: tensor<8x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<8x16xf16>) {
    %wq = ampc.load_state @q.w : tensor<16x16xf16>
    %bq = ampc.load_state @q.b : tensor<16xf16>
    %wk = ampc.load_state @k.w : tensor<16x16xf16>
    %bk = ampc.load_state @k.b : tensor<16xf16>
    %wv = ampc.load_state @v.w : tensor<16x16xf16>
    %bv = ampc.load_state @v.b : tensor<16xf16>
    %q0 = ampc.batched_gemm %x, %wq, %bq {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %k0 = ampc.batched_gemm %x, %wk, %bk {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %v0 = ampc.batched_gemm %x, %wv, %bv {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    return %o, %k0 : tensor<1x8x1x16xf16>, tensor<8x16xf16>
  }
}

// -----

// The dX of the three projections are summed with another value in
// between: the pass packs all or nothing, so nothing changes.
// CHECK-LABEL: func.func @summed_with_more
// CHECK-NOT: ampc.load_packed_state
// CHECK-NOT: packed_qkv
// CHECK: return
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @q.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @k.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  ampc.state @v.b : tensor<16xf16> = dense<0.0> : tensor<16xf16>
  func.func @summed_with_more(%x: tensor<8x16xf16>, %do: tensor<1x8x1x16xf16>, %e: tensor<8x16xf32>) -> (tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>) {
    %wq = ampc.load_state @q.w : tensor<16x16xf16>
    %bq = ampc.load_state @q.b : tensor<16xf16>
    %wk = ampc.load_state @k.w : tensor<16x16xf16>
    %bk = ampc.load_state @k.b : tensor<16xf16>
    %wv = ampc.load_state @v.w : tensor<16x16xf16>
    %bv = ampc.load_state @v.b : tensor<16xf16>
    %q0 = ampc.batched_gemm %x, %wq, %bq {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %k0 = ampc.batched_gemm %x, %wk, %bk {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %v0 = ampc.batched_gemm %x, %wv, %bv {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
    %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    %g:3 = ampc.attention_grad %do, %q, %k, %v, %o, %lse {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x1x8xf32>) -> (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>)
    %gq = ampc.reshape %g#0 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxq = ampc.batched_gemm %gq, %wq {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwq, %dbq = ampc.gemm %gq, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %cq = ampc.cast %dxq : tensor<8x16xf16> to tensor<8x16xf32>
    %gk = ampc.reshape %g#1 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxk = ampc.batched_gemm %gk, %wk {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwk, %dbk = ampc.gemm %gk, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %ck = ampc.cast %dxk : tensor<8x16xf16> to tensor<8x16xf32>
    %gv = ampc.reshape %g#2 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxv = ampc.batched_gemm %gv, %wv {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwv, %dbv = ampc.gemm %gv, %x {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> (tensor<16x16xf32>, tensor<16xf32>)
    %cv = ampc.cast %dxv : tensor<8x16xf16> to tensor<8x16xf32>
    %s0 = ampc.add %cq, %e : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %s1 = ampc.add %s0, %ck : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %s2 = ampc.add %s1, %cv : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %o, %s2, %dwq, %dbq, %dwk, %dbk, %dwv, %dbv : tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>, tensor<16x16xf32>, tensor<16xf32>
  }
}

// -----

// Weights that are not state (no laid-out copies to pack): nothing
// changes.
// CHECK-LABEL: func.func @weights_not_state
// CHECK-NOT: ampc.load_packed_state
// CHECK-NOT: packed_qkv
// CHECK: return
func.func @weights_not_state(%x: tensor<8x16xf16>, %wq: tensor<16x16xf16>, %bq: tensor<16xf16>, %wk: tensor<16x16xf16>, %bk: tensor<16xf16>, %wv: tensor<16x16xf16>, %bv: tensor<16xf16>) -> (tensor<1x8x1x16xf16>) {
  %q0 = ampc.batched_gemm %x, %wq, %bq {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
  %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
  %k0 = ampc.batched_gemm %x, %wk, %bk {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
  %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
  %v0 = ampc.batched_gemm %x, %wv, %bv {epilogue = #ampc<epilogue bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>, tensor<16xf16>) -> tensor<8x16xf16>
  %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
  %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
  return %o : tensor<1x8x1x16xf16>
}

// -----

// Projections without a bias (no bias epilogue, no bias gradients) pack
// the same way: one weight-gradient GEMM, three subviews.
// CHECK-LABEL: func.func @train_no_bias
// CHECK-NEXT: %[[W:.+]] = ampc.load_packed_state [@q.w, @k.w, @v.w] : tensor<48x16xf16>
// CHECK-NEXT: ampc.batched_gemm %{{.+}}, %[[W]] {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 48 : i64, m = 8 : i64, n = 48 : i64, transB = true}
// CHECK: ampc.attention_grad {{.*}}packed_qkv = true
// CHECK: %[[DW:.+]] = ampc.gemm %{{.+}}, %{{.+}} {transA = 1 : i64} : (tensor<8x48xf16>, tensor<8x16xf16>) -> tensor<48x16xf32>
// CHECK-NEXT: ampc.subview %[[DW]] {offset = 0 : i64}
// CHECK-NEXT: ampc.subview %[[DW]] {offset = 256 : i64}
// CHECK-NEXT: ampc.subview %[[DW]] {offset = 512 : i64}
// CHECK-NOT: ampc.add
// CHECK: return
module {
  ampc.state @q.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @k.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  ampc.state @v.w : tensor<16x16xf16> = dense<0.0> : tensor<16x16xf16>
  func.func @train_no_bias(%x: tensor<8x16xf16>, %do: tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) {
    %wq = ampc.load_state @q.w : tensor<16x16xf16>
    %wk = ampc.load_state @k.w : tensor<16x16xf16>
    %wv = ampc.load_state @v.w : tensor<16x16xf16>
    %q0 = ampc.batched_gemm %x, %wq {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %q = ampc.reshape %q0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %k0 = ampc.batched_gemm %x, %wk {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %k = ampc.reshape %k0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %v0 = ampc.batched_gemm %x, %wv {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64, transB = true} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %v = ampc.reshape %v0 : tensor<8x16xf16> to tensor<1x8x1x16xf16>
    %o, %lse = ampc.attention %q, %k, %v {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>) -> (tensor<1x8x1x16xf16>, tensor<1x1x8xf32>)
    %g:3 = ampc.attention_grad %do, %q, %k, %v, %o, %lse {causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 2.500000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x1x8xf32>) -> (tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>, tensor<1x8x1x16xf16>)
    %gq = ampc.reshape %g#0 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxq = ampc.batched_gemm %gq, %wq {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwq = ampc.gemm %gq, %x {transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> tensor<16x16xf32>
    %cq = ampc.cast %dxq : tensor<8x16xf16> to tensor<8x16xf32>
    %gk = ampc.reshape %g#1 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxk = ampc.batched_gemm %gk, %wk {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwk = ampc.gemm %gk, %x {transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> tensor<16x16xf32>
    %ck = ampc.cast %dxk : tensor<8x16xf16> to tensor<8x16xf32>
    %gv = ampc.reshape %g#2 : tensor<1x8x1x16xf16> to tensor<8x16xf16>
    %dxv = ampc.batched_gemm %gv, %wv {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 16 : i64, m = 8 : i64, n = 16 : i64} : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
    %dwv = ampc.gemm %gv, %x {transA = 1 : i64} : (tensor<8x16xf16>, tensor<8x16xf16>) -> tensor<16x16xf32>
    %cv = ampc.cast %dxv : tensor<8x16xf16> to tensor<8x16xf32>
    %s0 = ampc.add %cq, %ck : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %s1 = ampc.add %s0, %cv : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %o, %s1, %dwq, %dwk, %dwv : tensor<1x8x1x16xf16>, tensor<8x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>
  }
}
