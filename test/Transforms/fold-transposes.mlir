// RUN: ampc-opt %s --split-input-file --ampc-fold-transposes | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fold-transposes --ampc-plan-memory | FileCheck %s --check-prefix=PLAN

// A weight transposed for a Gemm: transB instead of the copy, B read as
// stored (n x k rows of 16).
// CHECK-LABEL: func.func @gemm_transposed_weight
// CHECK-NOT: ampc.transpose
// CHECK: %[[G:.+]] = ampc.batched_gemm %arg0, %arg1, %arg2 {epilogue = #ampc<epilogue relu_bias>, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 8 : i64, m = 4 : i64, n = 8 : i64, transB = true}
// CHECK-SAME: (tensor<4x16xf32>, tensor<8x16xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
func.func @gemm_transposed_weight(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %g = ampc.gemm %x, %t, %b {epilogue = #ampc<epilogue relu_bias>} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// A Gemm that already transposes A, fed a transpose: the flags cancel.
// CHECK-LABEL: func.func @gemm_flags_cancel
// CHECK-NOT: ampc.transpose
// CHECK: ampc.batched_gemm %arg0, %arg1 {alpha = 5.000000e-01 : f32, k = 16 : i64, lda = 16 : i64, ldb = 8 : i64, ldd = 8 : i64, m = 4 : i64, n = 8 : i64}
func.func @gemm_flags_cancel(%x: tensor<4x16xf32>, %w: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %t = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %g = ampc.gemm %t, %w {alpha = 0.5 : f32, transA = 1 : i64} : (tensor<16x4xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// torch's attention scores: K [B*H, S, D] transposed to [B*H, D, S] for
// Q K^T is K read through transB, one batch stride (S*D) per operand.
// CHECK-LABEL: func.func @attention_scores
// CHECK-NOT: ampc.transpose
// CHECK: ampc.batched_gemm %arg0, %arg1 {batch = 8 : i64, k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 64 : i64, m = 64 : i64, n = 64 : i64, strideA = 1024 : i64, strideB = 1024 : i64, strideD = 4096 : i64, transB = true}
// CHECK-SAME: -> tensor<8x64x64xf32>
func.func @attention_scores(%q: tensor<8x64x16xf32>, %k: tensor<8x64x16xf32>) -> tensor<8x64x64xf32> {
  %kt = ampc.transpose %k {perm = array<i64: 0, 2, 1>} : (tensor<8x64x16xf32>) -> tensor<8x16x64xf32>
  %s = ampc.matmul %q, %kt : (tensor<8x64x16xf32>, tensor<8x16x64xf32>) -> tensor<8x64x64xf32>
  return %s : tensor<8x64x64xf32>
}

// -----

// The heads: [S, B*H, D] (a reshape of the projection [S, B, E]) transposed
// to [B*H, S, D] is read in place: rows B*H*D apart (lda 32), batches D
// apart. The attention output [B*H, S, D] transposed back to [S, B*H, D]
// and merged to [S*B, E] is written in place the same way (ldd 32,
// strideD 16), so the GEMM's result is the transpose's.
// CHECK-LABEL: func.func @attention_heads
// CHECK-NOT: ampc.transpose
// CHECK: %[[O:.+]] = ampc.batched_gemm %arg0, %arg1 {batch = 2 : i64, k = 16 : i64, lda = 32 : i64, ldb = 16 : i64, ldd = 32 : i64, m = 4 : i64, n = 16 : i64, strideA = 16 : i64, strideB = 256 : i64, strideD = 16 : i64}
// CHECK-SAME: (tensor<4x32xf32>, tensor<2x16x16xf32>) -> tensor<4x2x16xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.reshape %[[O]] : tensor<4x2x16xf32> to tensor<4x32xf32>
// CHECK-NEXT: return %[[R]]
//
// The plan: the GEMM writes its own buffer, apart from the heads it reads.
// PLAN-LABEL: func.func @attention_heads
// PLAN: ampc.batched_gemm {{.*}}ampc.offsets = array<i64: 64>
func.func @attention_heads(%x: tensor<4x32xf32>, %p: tensor<2x16x16xf32>) -> tensor<4x32xf32> {
  %h = ampc.reshape %x : tensor<4x32xf32> to tensor<4x2x16xf32>
  %t = ampc.transpose %h {perm = array<i64: 1, 0, 2>} : (tensor<4x2x16xf32>) -> tensor<2x4x16xf32>
  %a = ampc.matmul %t, %p : (tensor<2x4x16xf32>, tensor<2x16x16xf32>) -> tensor<2x4x16xf32>
  %o = ampc.transpose %a {perm = array<i64: 1, 0, 2>} : (tensor<2x4x16xf32>) -> tensor<4x2x16xf32>
  %r = ampc.reshape %o : tensor<4x2x16xf32> to tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}

// -----

// A weight broadcast over the batch keeps batch stride 0.
// CHECK-LABEL: func.func @broadcast_weight
// CHECK: ampc.batched_gemm %arg0, %arg1 {batch = 3 : i64, k = 8 : i64, lda = 8 : i64, ldb = 8 : i64, ldd = 4 : i64, m = 2 : i64, n = 4 : i64, strideA = 16 : i64, strideD = 8 : i64, transB = true}
func.func @broadcast_weight(%x: tensor<3x2x8xf32>, %w: tensor<4x8xf32>) -> tensor<3x2x4xf32> {
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %y = ampc.matmul %x, %t : (tensor<3x2x8xf32>, tensor<8x4xf32>) -> tensor<3x2x4xf32>
  return %y : tensor<3x2x4xf32>
}

// -----

// Not folded: a transpose with another user (its copy is made anyway).
// CHECK-LABEL: func.func @shared_transpose
// CHECK: %[[T:.+]] = ampc.transpose %arg1
// CHECK-NEXT: ampc.gemm %arg0, %[[T]]
// CHECK-NEXT: ampc.neg %[[T]]
// CHECK-NOT: ampc.batched_gemm
func.func @shared_transpose(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>) -> (tensor<4x8xf32>, tensor<16x8xf32>) {
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %g = ampc.gemm %x, %t : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %n = ampc.neg %t : tensor<16x8xf32>
  return %g, %n : tensor<4x8xf32>, tensor<16x8xf32>
}

// -----

// Not folded: batch dimensions [2, 3] that end up 4 and 24 elements apart
// (perm 1, 0, 2, 3 of [3, 2, 4, 4]) need two batch strides.
// CHECK-LABEL: func.func @two_batch_strides
// CHECK: ampc.transpose
// CHECK-NEXT: ampc.matmul
// CHECK-NOT: ampc.batched_gemm
func.func @two_batch_strides(%x: tensor<3x2x4x4xf32>, %w: tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32> {
  %t = ampc.transpose %x {perm = array<i64: 1, 0, 2, 3>} : (tensor<3x2x4x4xf32>) -> tensor<2x3x4x4xf32>
  %y = ampc.matmul %t, %w : (tensor<2x3x4x4xf32>, tensor<2x3x4x4xf32>) -> tensor<2x3x4x4xf32>
  return %y : tensor<2x3x4x4xf32>
}

// -----

// Not folded: a transpose that moves the column dimension into the batch
// (no row or column of the view is contiguous).
// CHECK-LABEL: func.func @no_contiguous_dimension
// CHECK: ampc.transpose
// CHECK-NEXT: ampc.matmul
func.func @no_contiguous_dimension(%x: tensor<4x3x2xf32>, %w: tensor<2x3x5xf32>) -> tensor<2x4x5xf32> {
  %t = ampc.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<4x3x2xf32>) -> tensor<2x4x3xf32>
  %y = ampc.matmul %t, %w : (tensor<2x4x3xf32>, tensor<2x3x5xf32>) -> tensor<2x4x5xf32>
  return %y : tensor<2x4x5xf32>
}

// -----

// Not folded: a Gemm whose C is added into the result (no bias epilogue).
// CHECK-LABEL: func.func @gemm_with_c
// CHECK: ampc.transpose
// CHECK-NEXT: ampc.gemm
func.func @gemm_with_c(%x: tensor<4x16xf32>, %w: tensor<8x16xf32>, %c: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %g = ampc.gemm %x, %t, %c {beta = 2.0 : f32} : (tensor<4x16xf32>, tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %g : tensor<4x8xf32>
}

// -----

// Autocast's cast between a transposed weight and its GEMM moves before
// the transpose, which the GEMM then absorbs.
// CHECK-LABEL: func.func @cast_between
// CHECK-NEXT: %[[C:.+]] = ampc.cast %arg1 : tensor<8x16xf32> to tensor<8x16xf16>
// CHECK-NEXT: ampc.batched_gemm %arg0, %[[C]] {k = 16 : i64, lda = 16 : i64, ldb = 16 : i64, ldd = 8 : i64, m = 4 : i64, n = 8 : i64, transB = true}
func.func @cast_between(%x: tensor<4x16xf16>, %w: tensor<8x16xf32>) -> tensor<4x8xf16> {
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %c = ampc.cast %t : tensor<16x8xf32> to tensor<16x8xf16>
  %g = ampc.gemm %x, %c : (tensor<4x16xf16>, tensor<16x8xf16>) -> tensor<4x8xf16>
  return %g : tensor<4x8xf16>
}

// -----

// A weight gradient cast and transposed back: the transpose moves before
// the cast, and the GEMM writes D^T = B^T A^T (operands swapped, flags
// flipped) into the transposed tensor.
// CHECK-LABEL: func.func @transposed_result
// CHECK-NEXT: %[[G:.+]] = ampc.batched_gemm %arg1, %arg0 {k = 4 : i64, lda = 16 : i64, ldb = 8 : i64, ldd = 8 : i64, m = 16 : i64, n = 8 : i64, transA = true}
// CHECK-SAME: -> tensor<16x8xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[G]] : tensor<16x8xf16> to tensor<16x8xf32>
// CHECK-NEXT: return %[[C]]
func.func @transposed_result(%a: tensor<4x8xf16>, %b: tensor<4x16xf16>) -> tensor<16x8xf32> {
  %g = ampc.gemm %a, %b {transA = 1 : i64} : (tensor<4x8xf16>, tensor<4x16xf16>) -> tensor<8x16xf16>
  %c = ampc.cast %g : tensor<8x16xf16> to tensor<8x16xf32>
  %t = ampc.transpose %c {perm = array<i64: 1, 0>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return %t : tensor<16x8xf32>
}
