// RUN: ampc-opt %s --ampc-decompose-einsum --split-input-file | FileCheck %s
// The pass is declared on functions (buildPipeline nests it).
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-decompose-einsum))" | FileCheck %s
// An op the lowering makes past max-tensor-bytes is an error at the einsum.
// RUN: not ampc-opt %s --split-input-file --ampc-decompose-einsum=max-tensor-bytes=16 2>&1 | FileCheck %s --check-prefix=LIMIT

// ampc-decompose-einsum lowers ampc.einsum (ONNX Einsum, imported 1:1) to
// what the importer built for the node: a repeated label's diagonal, the
// size-1 dimensions of a broadcast label dropped, labels in one operand
// only summed, pairwise batched matmuls on (batch, free, contracted) /
// (batch, contracted, free) operands, and a transpose to the output's
// order. Expected IR worked out by hand from the equations.

// Batch b, free i and k, contracted j, already in matmul order: one matmul.
// CHECK-LABEL: func.func @batched
// CHECK-SAME: (%[[A:.+]]: tensor<2x3x4xf32>, %[[B:.+]]: tensor<2x4x5xf32>)
// CHECK-NEXT: %[[Y:.+]] = ampc.matmul %[[A]], %[[B]] : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
// CHECK-NEXT: return %[[Y]]
// CHECK-NOT: ampc.einsum
func.func @batched(%a: tensor<2x3x4xf32>, %b: tensor<2x4x5xf32>) -> tensor<2x3x5xf32> {
  %0 = ampc.einsum %a, %b {equation = "bij,bjk->bik"} : (tensor<2x3x4xf32>, tensor<2x4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// The implicit output (letters used once, in ASCII order: "ik"; white
// space ignored): no batch label, so a batch of 1 on each side and the
// product reshaped back to (i, k).
// CHECK-LABEL: func.func @implicit
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3x4xf32>)
// CHECK-NEXT: %[[A3:.+]] = ampc.reshape %[[A]] : tensor<2x3xf32> to tensor<1x2x3xf32>
// CHECK-NEXT: %[[B3:.+]] = ampc.reshape %[[B]] : tensor<3x4xf32> to tensor<1x3x4xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.matmul %[[A3]], %[[B3]] : (tensor<1x2x3xf32>, tensor<1x3x4xf32>) -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[P]] : tensor<1x2x4xf32> to tensor<2x4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @implicit(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %0 = ampc.einsum %a, %b {equation = "ij, jk"} : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[Y:.+]] = ampc.transpose %[[A]] {perm = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @transpose(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = ampc.einsum %a {equation = "ij->ji"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}

// -----

// An equation that changes nothing is an ampc.identity, which folds to its
// operand as it is built (as at import).
// CHECK-LABEL: func.func @same
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[A]]
func.func @same(%a: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %0 = ampc.einsum %a {equation = "ij->ij"} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @total
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: %[[Y:.+]] = ampc.reduce_sum %[[A]] {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
// CHECK-NEXT: return %[[Y]]
func.func @total(%a: tensor<2x3xf32>) -> tensor<f32> {
  %0 = ampc.einsum %a {equation = "ij->"} : (tensor<2x3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// -----

// The diagonal of i (dimensions 0 and 2): dimension 2 moved next to 0,
// the two merged into 9 and every 4th kept; then (i, j) transposed to the
// output's (j, i).
// CHECK-LABEL: func.func @diagonal
// CHECK-SAME: (%[[A:.+]]: tensor<3x2x3xf32>)
// CHECK-NEXT: %[[T:.+]] = ampc.transpose %[[A]] {perm = array<i64: 0, 2, 1>} : (tensor<3x2x3xf32>) -> tensor<3x3x2xf32>
// CHECK-NEXT: %[[M:.+]] = ampc.reshape %[[T]] : tensor<3x3x2xf32> to tensor<9x2xf32>
// CHECK-NEXT: %[[D:.+]] = ampc.slice %[[M]] {axes = array<i64: 0>, ends = array<i64: 9>, starts = array<i64: 0>, steps = array<i64: 4>} : (tensor<9x2xf32>) -> tensor<3x2xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.transpose %[[D]] {perm = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: return %[[Y]]
func.func @diagonal(%a: tensor<3x2x3xf32>) -> tensor<2x3xf32> {
  %0 = ampc.einsum %a {equation = "iji->ji"} : (tensor<3x2x3xf32>) -> tensor<2x3xf32>
  return %0 : tensor<2x3xf32>
}

// -----

// b is 1 in the first operand and 4 in the second: the first does not vary
// along it (its b dropped), so b is free in the second and j contracted.
// CHECK-LABEL: func.func @broadcast
// CHECK-SAME: (%[[A:.+]]: tensor<1x3xf32>, %[[B:.+]]: tensor<4x3xf32>)
// CHECK-NEXT: %[[A1:.+]] = ampc.reshape %[[A]] : tensor<1x3xf32> to tensor<3xf32>
// CHECK-NEXT: %[[BT:.+]] = ampc.transpose %[[B]] {perm = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: %[[A3:.+]] = ampc.reshape %[[A1]] : tensor<3xf32> to tensor<1x1x3xf32>
// CHECK-NEXT: %[[B3:.+]] = ampc.reshape %[[BT]] : tensor<3x4xf32> to tensor<1x3x4xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.matmul %[[A3]], %[[B3]] : (tensor<1x1x3xf32>, tensor<1x3x4xf32>) -> tensor<1x1x4xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[P]] : tensor<1x1x4xf32> to tensor<4xf32>
// CHECK-NEXT: return %[[Y]]
func.func @broadcast(%a: tensor<1x3xf32>, %b: tensor<4x3xf32>) -> tensor<4xf32> {
  %0 = ampc.einsum %a, %b {equation = "bj,bj->b"} : (tensor<1x3xf32>, tensor<4x3xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}

// -----

// "..." stands for the leading (5, 2), free in the first operand: merged
// into 10 rows of a matrix-vector product.
// CHECK-LABEL: func.func @ellipsis
// CHECK-SAME: (%[[A:.+]]: tensor<5x2x3xf32>, %[[B:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[A3:.+]] = ampc.reshape %[[A]] : tensor<5x2x3xf32> to tensor<1x10x3xf32>
// CHECK-NEXT: %[[B3:.+]] = ampc.reshape %[[B]] : tensor<3xf32> to tensor<1x3x1xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.matmul %[[A3]], %[[B3]] : (tensor<1x10x3xf32>, tensor<1x3x1xf32>) -> tensor<1x10x1xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[P]] : tensor<1x10x1xf32> to tensor<5x2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @ellipsis(%a: tensor<5x2x3xf32>, %b: tensor<3xf32>) -> tensor<5x2xf32> {
  %0 = ampc.einsum %a, %b {equation = "...j,j->..."} : (tensor<5x2x3xf32>, tensor<3xf32>) -> tensor<5x2xf32>
  return %0 : tensor<5x2xf32>
}

// -----

// A label in one operand only and not kept (k) is summed before the
// contraction.
// CHECK-LABEL: func.func @sum_first
// CHECK-SAME: (%[[A:.+]]: tensor<2x3x4xf32>, %[[B:.+]]: tensor<3xf32>)
// CHECK-NEXT: %[[S:.+]] = ampc.reduce_sum %[[A]] {axes = array<i64: 2>, keepdims = 0 : i64} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
// CHECK-NEXT: %[[A3:.+]] = ampc.reshape %[[S]] : tensor<2x3xf32> to tensor<1x2x3xf32>
// CHECK-NEXT: %[[B3:.+]] = ampc.reshape %[[B]] : tensor<3xf32> to tensor<1x3x1xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.matmul %[[A3]], %[[B3]] : (tensor<1x2x3xf32>, tensor<1x3x1xf32>) -> tensor<1x2x1xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[P]] : tensor<1x2x1xf32> to tensor<2xf32>
// CHECK-NEXT: return %[[Y]]
func.func @sum_first(%a: tensor<2x3x4xf32>, %b: tensor<3xf32>) -> tensor<2xf32> {
  %0 = ampc.einsum %a, %b {equation = "ijk,j->i"} : (tensor<2x3x4xf32>, tensor<3xf32>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// Three operands, contracted from the left: k is kept by the first
// contraction (the third operand has it) and contracted by the second.
// CHECK-LABEL: func.func @three
// CHECK-SAME: (%[[A:.+]]: tensor<2x3xf32>, %[[B:.+]]: tensor<3x4xf32>, %[[C:.+]]: tensor<4x5xf32>)
// CHECK-NEXT: %[[A3:.+]] = ampc.reshape %[[A]] : tensor<2x3xf32> to tensor<1x2x3xf32>
// CHECK-NEXT: %[[B3:.+]] = ampc.reshape %[[B]] : tensor<3x4xf32> to tensor<1x3x4xf32>
// CHECK-NEXT: %[[AB3:.+]] = ampc.matmul %[[A3]], %[[B3]] : (tensor<1x2x3xf32>, tensor<1x3x4xf32>) -> tensor<1x2x4xf32>
// CHECK-NEXT: %[[AB:.+]] = ampc.reshape %[[AB3]] : tensor<1x2x4xf32> to tensor<2x4xf32>
// CHECK-NEXT: %[[L:.+]] = ampc.reshape %[[AB]] : tensor<2x4xf32> to tensor<1x2x4xf32>
// CHECK-NEXT: %[[C3:.+]] = ampc.reshape %[[C]] : tensor<4x5xf32> to tensor<1x4x5xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.matmul %[[L]], %[[C3]] : (tensor<1x2x4xf32>, tensor<1x4x5xf32>) -> tensor<1x2x5xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[P]] : tensor<1x2x5xf32> to tensor<2x5xf32>
// CHECK-NEXT: return %[[Y]]
func.func @three(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>, %c: tensor<4x5xf32>) -> tensor<2x5xf32> {
  %0 = ampc.einsum %a, %b, %c {equation = "ij,jk,kl->il"} : (tensor<2x3xf32>, tensor<3x4xf32>, tensor<4x5xf32>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// Constant operands: each op folds as it is built (as at import), and
// nothing else in the function is folded or moved.
// CHECK-LABEL: func.func @constant
// CHECK-NEXT: %[[C:.+]] = ampc.constant dense<{{\[\[}}1.000000e+00, 2.000000e+00, 3.000000e+00], [4.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x3xf32>
// CHECK-NEXT: %[[Y:.+]] = ampc.constant dense<{{\[\[}}1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// CHECK-NEXT: %[[N:.+]] = ampc.neg %[[C]]
// CHECK-NEXT: return %[[Y]], %[[N]]
func.func @constant() -> (tensor<3x2xf32>, tensor<2x3xf32>) {
  %c = ampc.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %0 = ampc.einsum %c {equation = "ij->ji"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = ampc.neg %c : tensor<2x3xf32>
  return %0, %1 : tensor<3x2xf32>, tensor<2x3xf32>
}

// -----

// LIMIT: error: the result tensor<3x2xf32> has 24 bytes, more than the limit of 16 bytes (--max-tensor-bytes)
func.func @limit(%a: tensor<2x3xf32>) -> tensor<3x2xf32> {
  %0 = ampc.einsum %a {equation = "ij->ji"} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  return %0 : tensor<3x2xf32>
}
