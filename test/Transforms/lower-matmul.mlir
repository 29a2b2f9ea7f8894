// RUN: ampc-opt %s --split-input-file --ampc-lower-matmul | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-lower-matmul --ampc-assign-accumulation --ampc-plan-memory | FileCheck %s --check-prefix=PLAN

// Every ampc.matmul becomes an ampc.batched_gemm with numpy.matmul's
// layout written out (issue 40, item 4): the emitters print GEMMs only.

// A matrix product: one GEMM, packed rows (lda = k, ldb = n, ldd = n).
// CHECK-LABEL: func.func @matrices
// CHECK-NOT: ampc.matmul
// CHECK: %[[G:.+]] = ampc.batched_gemm %arg0, %arg1 {k = 16 : i64, lda = 16 : i64, ldb = 8 : i64, ldd = 8 : i64, m = 4 : i64, n = 8 : i64, strideD = 32 : i64}
// CHECK-SAME: (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[G]]
// PLAN-LABEL: func.func @matrices
// PLAN: ampc.batched_gemm {{.*}}ampc.offsets = array<i64: 64>, ampc.scratch = array<i64: 192, 128>
func.func @matrices(%a: tensor<4x16xf32>, %b: tensor<16x8xf32>) -> tensor<4x8xf32> {
  %0 = ampc.matmul %a, %b : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A batch of matrices times one weight (a Linear on [B, S, K]): B is
// shared, its batch stride 0; A and D step a matrix each.
// CHECK-LABEL: func.func @shared_weight
// CHECK: ampc.batched_gemm %arg0, %arg1 {batch = 8 : i64, k = 64 : i64, lda = 64 : i64, ldb = 32 : i64, ldd = 32 : i64, m = 16 : i64, n = 32 : i64, strideA = 1024 : i64, strideD = 512 : i64}
func.func @shared_weight(%a: tensor<8x16x64xf16>, %b: tensor<64x32xf16>) -> tensor<8x16x32xf16> {
  %0 = ampc.matmul %a, %b : (tensor<8x16x64xf16>, tensor<64x32xf16>) -> tensor<8x16x32xf16>
  return %0 : tensor<8x16x32xf16>
}

// -----

// Both operands batched, B's batch broadcast from 1: B's stride 0.
// CHECK-LABEL: func.func @broadcast_one
// CHECK: ampc.batched_gemm %arg0, %arg1 {batch = 4 : i64, k = 5 : i64, lda = 5 : i64, ldb = 6 : i64, ldd = 6 : i64, m = 3 : i64, n = 6 : i64, strideA = 15 : i64, strideD = 18 : i64}
func.func @broadcast_one(%a: tensor<4x3x5xf32>, %b: tensor<1x5x6xf32>) -> tensor<4x3x6xf32> {
  %0 = ampc.matmul %a, %b : (tensor<4x3x5xf32>, tensor<1x5x6xf32>) -> tensor<4x3x6xf32>
  return %0 : tensor<4x3x6xf32>
}

// -----

// 1-D operands: A a row [1, k], B a column [k, 1]; the MatMul's
// attributes (its precision and accumulation) move to the GEMM.
// CHECK-LABEL: func.func @vectors
// CHECK: ampc.batched_gemm %arg0, %arg1 {ampc.accumulate = f32, k = 5 : i64, lda = 5 : i64, ldb = 1 : i64, ldd = 1 : i64, m = 3 : i64, n = 1 : i64, strideD = 3 : i64}
// CHECK-SAME: (tensor<3x5xbf16>, tensor<5xbf16>) -> tensor<3xbf16>
// CHECK: ampc.batched_gemm %arg1, %{{.+}} {k = 5 : i64, lda = 5 : i64, ldb = 3 : i64, ldd = 3 : i64, m = 1 : i64, n = 3 : i64, strideD = 3 : i64}
// CHECK-SAME: (tensor<5xbf16>, tensor<5x3xbf16>) -> tensor<3xbf16>
func.func @vectors(%x: tensor<3x5xbf16>, %v: tensor<5xbf16>) -> (tensor<3xbf16>, tensor<3xbf16>) {
  %0 = ampc.matmul %x, %v {ampc.accumulate = f32} : (tensor<3x5xbf16>, tensor<5xbf16>) -> tensor<3xbf16>
  %t = ampc.transpose %x {perm = array<i64: 1, 0>} : (tensor<3x5xbf16>) -> tensor<5x3xbf16>
  %1 = ampc.matmul %v, %t : (tensor<5xbf16>, tensor<5x3xbf16>) -> tensor<3xbf16>
  return %0, %1 : tensor<3xbf16>, tensor<3xbf16>
}

// -----

// Batches no single stride describes (2x1 against 4: A's matrix repeats
// four times, then steps): both operands expanded to the whole 2x4 batch
// first, then one strided batch of 8.
// CHECK-LABEL: func.func @uneven_broadcast
// CHECK: %[[A:.+]] = ampc.expand %arg0 : tensor<2x1x3x5xf32> to tensor<2x4x3x5xf32>
// CHECK: %[[B:.+]] = ampc.expand %arg1 : tensor<4x5x6xf32> to tensor<2x4x5x6xf32>
// CHECK: ampc.batched_gemm %[[A]], %[[B]] {batch = 8 : i64, k = 5 : i64, lda = 5 : i64, ldb = 6 : i64, ldd = 6 : i64, m = 3 : i64, n = 6 : i64, strideA = 15 : i64, strideB = 30 : i64, strideD = 18 : i64}
func.func @uneven_broadcast(%x: tensor<2x1x3x5xf32>, %y: tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32> {
  %0 = ampc.matmul %x, %y : (tensor<2x1x3x5xf32>, tensor<4x5x6xf32>) -> tensor<2x4x3x6xf32>
  return %0 : tensor<2x4x3x6xf32>
}
