// RUN: ampc-opt %s --ampc-decompose-indexing --split-input-file | FileCheck %s
// The pass is declared on functions (buildPipeline nests it).
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-decompose-indexing))" | FileCheck %s
// An op the lowering makes past max-tensor-bytes is an error at the op.
// RUN: not ampc-opt %s --split-input-file --ampc-decompose-indexing=max-tensor-bytes=40 2>&1 | FileCheck %s --check-prefix=LIMIT

// ampc-decompose-indexing lowers the indexing ops the importer imports 1:1
// to what the importer built for their nodes: int64 positions computed
// from the indices (wrapped, guarded) and an ampc.gather / ampc.scatter
// into data viewed as rows; ampc.top_k and a gather; comparisons and a
// where for OneHot. One op per section.
// LIMIT: decompose-indexing.mlir:[[#@LINE+30]]:8: error: the result tensor<2x4xi64> has 64 bytes, more than the limit of 40 bytes (--max-tensor-bytes)

// GatherElements along axis 0 of int32 indices: widened to int64, checked
// against [-3, 3), 3 added to negative ones only (no overflow), out-of-range
// ones given position 0; times the stride 4, plus the column index vector;
// an index out of range becomes -13, which the Gather of the 12 flattened
// elements refuses at run time.
// CHECK-LABEL: func.func @gather_elements
// CHECK-SAME: (%[[D:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<2x4xi32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.cast %[[I]] : tensor<2x4xi32> to tensor<2x4xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.constant dense<-3> : tensor<i64>
// CHECK-NEXT: %[[V4:.+]] = ampc.greater_or_equal %[[V0]], %[[V3]] : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi1>
// CHECK-NEXT: %[[V5:.+]] = ampc.less %[[V0]], %[[V2]] : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.and %[[V4]], %[[V5]] : (tensor<2x4xi1>, tensor<2x4xi1>) -> tensor<2x4xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi1>
// CHECK-NEXT: %[[V8:.+]] = ampc.where %[[V7]], %[[V2]], %[[V1]] : (tensor<2x4xi1>, tensor<i64>, tensor<i64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V9:.+]] = ampc.add %[[V0]], %[[V8]] : (tensor<2x4xi64>, tensor<2x4xi64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.where %[[V6]], %[[V9]], %[[V1]] : (tensor<2x4xi1>, tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V11:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V12:.+]] = ampc.mul %[[V10]], %[[V11]] : (tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V13:.+]] = ampc.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-NEXT: %[[V14:.+]] = ampc.add %[[V12]], %[[V13]] : (tensor<2x4xi64>, tensor<1x4xi64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V15:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V16:.+]] = ampc.where %[[V6]], %[[V14]], %[[V15]] : (tensor<2x4xi1>, tensor<2x4xi64>, tensor<i64>) -> tensor<2x4xi64>
// CHECK-NEXT: %[[V17:.+]] = ampc.reshape %[[D]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V18:.+]] = ampc.gather %[[V17]], %[[V16]] : (tensor<12xf32>, tensor<2x4xi64>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[V18]] : tensor<2x4xf32>
func.func @gather_elements(%d: tensor<3x4xf32>, %i: tensor<2x4xi32>) -> tensor<2x4xf32> {
  %0 = ampc.gather_elements %d, %i {axis = 0 : i64} : (tensor<3x4xf32>, tensor<2x4xi32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// The last axis (-1, stride 1: no multiply) of int64 indices (no cast); a
// dimension of size 1 needs no index vector.
// CHECK-LABEL: func.func @gather_elements_last
// CHECK-SAME: (%[[D:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<1x2xi64>)
// CHECK-NEXT: %[[V0:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<-4> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.greater_or_equal %[[I]], %[[V2]] : (tensor<1x2xi64>, tensor<i64>) -> tensor<1x2xi1>
// CHECK-NEXT: %[[V4:.+]] = ampc.less %[[I]], %[[V1]] : (tensor<1x2xi64>, tensor<i64>) -> tensor<1x2xi1>
// CHECK-NEXT: %[[V5:.+]] = ampc.and %[[V3]], %[[V4]] : (tensor<1x2xi1>, tensor<1x2xi1>) -> tensor<1x2xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.less %[[I]], %[[V0]] : (tensor<1x2xi64>, tensor<i64>) -> tensor<1x2xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.where %[[V6]], %[[V1]], %[[V0]] : (tensor<1x2xi1>, tensor<i64>, tensor<i64>) -> tensor<1x2xi64>
// CHECK-NEXT: %[[V8:.+]] = ampc.add %[[I]], %[[V7]] : (tensor<1x2xi64>, tensor<1x2xi64>) -> tensor<1x2xi64>
// CHECK-NEXT: %[[V9:.+]] = ampc.where %[[V5]], %[[V8]], %[[V0]] : (tensor<1x2xi1>, tensor<1x2xi64>, tensor<i64>) -> tensor<1x2xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V11:.+]] = ampc.where %[[V5]], %[[V9]], %[[V10]] : (tensor<1x2xi1>, tensor<1x2xi64>, tensor<i64>) -> tensor<1x2xi64>
// CHECK-NEXT: %[[V12:.+]] = ampc.reshape %[[D]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V13:.+]] = ampc.gather %[[V12]], %[[V11]] : (tensor<12xf32>, tensor<1x2xi64>) -> tensor<1x2xf32>
// CHECK-NEXT: return %[[V13]] : tensor<1x2xf32>
func.func @gather_elements_last(%d: tensor<3x4xf32>, %i: tensor<1x2xi64>) -> tensor<1x2xf32> {
  %0 = ampc.gather_elements %d, %i {axis = -1 : i64} : (tensor<3x4xf32>, tensor<1x2xi64>) -> tensor<1x2xf32>
  return %0 : tensor<1x2xf32>
}

// -----

// Constant operands: every op folds as it is built (as at import), leaving
// the gathered values [3, 1] (index -3 wraps to 0).
// CHECK-LABEL: func.func @gather_elements_constant
// CHECK-NOT: ampc.gather
// CHECK: %[[Y:.+]] = ampc.constant dense<[3.000000e+00, 1.000000e+00]> : tensor<2xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2xf32>
func.func @gather_elements_constant() -> tensor<2xf32> {
  %d = ampc.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %i = ampc.constant dense<[2, -3]> : tensor<2xi64>
  %0 = ampc.gather_elements %d, %i : (tensor<3xf32>, tensor<2xi64>) -> tensor<2xf32>
  return %0 : tensor<2xf32>
}

// -----

// ScatterElements along axis 1: the same positions (the row index vector
// times 4 added), an ampc.scatter into the flattened data with the
// reduction, reshaped back.
// CHECK-LABEL: func.func @scatter_elements
// CHECK-SAME: (%[[D:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<3x2xi64>, %[[U:.+]]: tensor<3x2xf32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<-4> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.greater_or_equal %[[I]], %[[V2]] : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
// CHECK-NEXT: %[[V4:.+]] = ampc.less %[[I]], %[[V1]] : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
// CHECK-NEXT: %[[V5:.+]] = ampc.and %[[V3]], %[[V4]] : (tensor<3x2xi1>, tensor<3x2xi1>) -> tensor<3x2xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.less %[[I]], %[[V0]] : (tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.where %[[V6]], %[[V1]], %[[V0]] : (tensor<3x2xi1>, tensor<i64>, tensor<i64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V8:.+]] = ampc.add %[[I]], %[[V7]] : (tensor<3x2xi64>, tensor<3x2xi64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V9:.+]] = ampc.where %[[V5]], %[[V8]], %[[V0]] : (tensor<3x2xi1>, tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.constant dense<{{\[\[}}0], [4], [8]]> : tensor<3x1xi64>
// CHECK-NEXT: %[[V11:.+]] = ampc.add %[[V9]], %[[V10]] : (tensor<3x2xi64>, tensor<3x1xi64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V12:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V13:.+]] = ampc.where %[[V5]], %[[V11]], %[[V12]] : (tensor<3x2xi1>, tensor<3x2xi64>, tensor<i64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V14:.+]] = ampc.reshape %[[D]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V15:.+]] = ampc.scatter %[[V14]], %[[V13]], %[[U]] {reduction = "add"} : (tensor<12xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<12xf32>
// CHECK-NEXT: %[[V16:.+]] = ampc.reshape %[[V15]] : tensor<12xf32> to tensor<3x4xf32>
// CHECK-NEXT: return %[[V16]] : tensor<3x4xf32>
func.func @scatter_elements(%d: tensor<3x4xf32>, %i: tensor<3x2xi64>, %u: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %0 = ampc.scatter_elements %d, %i, %u {axis = 1 : i64, reduction = "add"} : (tensor<3x4xf32>, tensor<3x2xi64>, tensor<3x2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// GatherND with tuples of 2 into 3x4x5: each column sliced out and checked
// against its dimension, the first times the stride 4, the two added, the
// tuple valid where both are; a Gather of rows of 5.
// CHECK-LABEL: func.func @gather_nd
// CHECK-SAME: (%[[D:.+]]: tensor<3x4x5xf32>, %[[I:.+]]: tensor<2x2xi64>)
// CHECK-NEXT: %[[V0:.+]] = ampc.slice %[[I]] {axes = array<i64: 1>, ends = array<i64: 1>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.reshape %[[V0]] : tensor<2x1xi64> to tensor<2xi64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V4:.+]] = ampc.constant dense<-3> : tensor<i64>
// CHECK-NEXT: %[[V5:.+]] = ampc.greater_or_equal %[[V1]], %[[V4]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.less %[[V1]], %[[V3]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.and %[[V5]], %[[V6]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
// CHECK-NEXT: %[[V8:.+]] = ampc.less %[[V1]], %[[V2]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V9:.+]] = ampc.where %[[V8]], %[[V3]], %[[V2]] : (tensor<2xi1>, tensor<i64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.add %[[V1]], %[[V9]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V11:.+]] = ampc.where %[[V7]], %[[V10]], %[[V2]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V12:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V13:.+]] = ampc.mul %[[V11]], %[[V12]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V14:.+]] = ampc.slice %[[I]] {axes = array<i64: 1>, ends = array<i64: 2>, starts = array<i64: 1>, steps = array<i64: 1>} : (tensor<2x2xi64>) -> tensor<2x1xi64>
// CHECK-NEXT: %[[V15:.+]] = ampc.reshape %[[V14]] : tensor<2x1xi64> to tensor<2xi64>
// CHECK-NEXT: %[[V16:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V17:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V18:.+]] = ampc.constant dense<-4> : tensor<i64>
// CHECK-NEXT: %[[V19:.+]] = ampc.greater_or_equal %[[V15]], %[[V18]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V20:.+]] = ampc.less %[[V15]], %[[V17]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V21:.+]] = ampc.and %[[V19]], %[[V20]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
// CHECK-NEXT: %[[V22:.+]] = ampc.less %[[V15]], %[[V16]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V23:.+]] = ampc.where %[[V22]], %[[V17]], %[[V16]] : (tensor<2xi1>, tensor<i64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V24:.+]] = ampc.add %[[V15]], %[[V23]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V25:.+]] = ampc.where %[[V21]], %[[V24]], %[[V16]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V26:.+]] = ampc.add %[[V13]], %[[V25]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V27:.+]] = ampc.and %[[V7]], %[[V21]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
// CHECK-NEXT: %[[V28:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V29:.+]] = ampc.where %[[V27]], %[[V26]], %[[V28]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V30:.+]] = ampc.reshape %[[D]] : tensor<3x4x5xf32> to tensor<12x5xf32>
// CHECK-NEXT: %[[V31:.+]] = ampc.gather %[[V30]], %[[V29]] : (tensor<12x5xf32>, tensor<2xi64>) -> tensor<2x5xf32>
// CHECK-NEXT: return %[[V31]] : tensor<2x5xf32>
func.func @gather_nd(%d: tensor<3x4x5xf32>, %i: tensor<2x2xi64>) -> tensor<2x5xf32> {
  %0 = ampc.gather_nd %d, %i : (tensor<3x4x5xf32>, tensor<2x2xi64>) -> tensor<2x5xf32>
  return %0 : tensor<2x5xf32>
}

// -----

// GatherND with batch_dims 1: the batch's first row (0, 3) added; -7 (6
// rows + 1) where out of range.
// CHECK-LABEL: func.func @gather_nd_batch
// CHECK-SAME: (%[[D:.+]]: tensor<2x3x4xf32>, %[[I:.+]]: tensor<2x1xi32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.reshape %[[I]] : tensor<2x1xi32> to tensor<2xi32>
// CHECK-NEXT: %[[V1:.+]] = ampc.cast %[[V0]] : tensor<2xi32> to tensor<2xi64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V4:.+]] = ampc.constant dense<-3> : tensor<i64>
// CHECK-NEXT: %[[V5:.+]] = ampc.greater_or_equal %[[V1]], %[[V4]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.less %[[V1]], %[[V3]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.and %[[V5]], %[[V6]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
// CHECK-NEXT: %[[V8:.+]] = ampc.less %[[V1]], %[[V2]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V9:.+]] = ampc.where %[[V8]], %[[V3]], %[[V2]] : (tensor<2xi1>, tensor<i64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.add %[[V1]], %[[V9]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V11:.+]] = ampc.where %[[V7]], %[[V10]], %[[V2]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V12:.+]] = ampc.constant dense<[0, 3]> : tensor<2xi64>
// CHECK-NEXT: %[[V13:.+]] = ampc.add %[[V11]], %[[V12]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V14:.+]] = ampc.constant dense<-7> : tensor<i64>
// CHECK-NEXT: %[[V15:.+]] = ampc.where %[[V7]], %[[V13]], %[[V14]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V16:.+]] = ampc.reshape %[[D]] : tensor<2x3x4xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[V17:.+]] = ampc.gather %[[V16]], %[[V15]] : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[V17]] : tensor<2x4xf32>
func.func @gather_nd_batch(%d: tensor<2x3x4xf32>, %i: tensor<2x1xi32>) -> tensor<2x4xf32> {
  %0 = ampc.gather_nd %d, %i {batch_dims = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x1xi32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// ScatterND with tuples of 1: rows need no stride; an ampc.scatter of rows
// with the reduction, data's shape already rows.
// CHECK-LABEL: func.func @scatter_nd
// CHECK-SAME: (%[[D:.+]]: tensor<3x4xf32>, %[[I:.+]]: tensor<2x1xi64>, %[[U:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.reshape %[[I]] : tensor<2x1xi64> to tensor<2xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.constant dense<-3> : tensor<i64>
// CHECK-NEXT: %[[V4:.+]] = ampc.greater_or_equal %[[V0]], %[[V3]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V5:.+]] = ampc.less %[[V0]], %[[V2]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.and %[[V4]], %[[V5]] : (tensor<2xi1>, tensor<2xi1>) -> tensor<2xi1>
// CHECK-NEXT: %[[V7:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi1>
// CHECK-NEXT: %[[V8:.+]] = ampc.where %[[V7]], %[[V2]], %[[V1]] : (tensor<2xi1>, tensor<i64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V9:.+]] = ampc.add %[[V0]], %[[V8]] : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.where %[[V6]], %[[V9]], %[[V1]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V11:.+]] = ampc.constant dense<-4> : tensor<i64>
// CHECK-NEXT: %[[V12:.+]] = ampc.where %[[V6]], %[[V10]], %[[V11]] : (tensor<2xi1>, tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[V13:.+]] = ampc.scatter %[[D]], %[[V12]], %[[U]] {reduction = "mul"} : (tensor<3x4xf32>, tensor<2xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[V13]] : tensor<3x4xf32>
func.func @scatter_nd(%d: tensor<3x4xf32>, %i: tensor<2x1xi64>, %u: tensor<2x4xf32>) -> tensor<3x4xf32> {
  %0 = ampc.scatter_nd %d, %i, %u {reduction = "mul"} : (tensor<3x4xf32>, tensor<2x1xi64>, tensor<2x4xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// ReverseSequence (time 0, batch 1): index len - 1 - t where t < len, t
// elsewhere, then the GatherElements positions along the time axis.
// CHECK-LABEL: func.func @reverse_sequence
// CHECK-SAME: (%[[X:.+]]: tensor<4x3xf32>, %[[L:.+]]: tensor<3xi64>)
// CHECK-NEXT: %[[V0:.+]] = ampc.constant dense<{{\[\[}}0], [1], [2], [3]]> : tensor<4x1xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.reshape %[[L]] : tensor<3xi64> to tensor<1x3xi64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.sub %[[V1]], %[[V2]] : (tensor<1x3xi64>, tensor<i64>) -> tensor<1x3xi64>
// CHECK-NEXT: %[[V4:.+]] = ampc.sub %[[V3]], %[[V0]] : (tensor<1x3xi64>, tensor<4x1xi64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V5:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<4x1xi64>, tensor<1x3xi64>) -> tensor<4x3xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.where %[[V5]], %[[V4]], %[[V0]] : (tensor<4x3xi1>, tensor<4x3xi64>, tensor<4x1xi64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V7:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V8:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V9:.+]] = ampc.constant dense<-4> : tensor<i64>
// CHECK-NEXT: %[[V10:.+]] = ampc.greater_or_equal %[[V6]], %[[V9]] : (tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi1>
// CHECK-NEXT: %[[V11:.+]] = ampc.less %[[V6]], %[[V8]] : (tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi1>
// CHECK-NEXT: %[[V12:.+]] = ampc.and %[[V10]], %[[V11]] : (tensor<4x3xi1>, tensor<4x3xi1>) -> tensor<4x3xi1>
// CHECK-NEXT: %[[V13:.+]] = ampc.less %[[V6]], %[[V7]] : (tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi1>
// CHECK-NEXT: %[[V14:.+]] = ampc.where %[[V13]], %[[V8]], %[[V7]] : (tensor<4x3xi1>, tensor<i64>, tensor<i64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V15:.+]] = ampc.add %[[V6]], %[[V14]] : (tensor<4x3xi64>, tensor<4x3xi64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V16:.+]] = ampc.where %[[V12]], %[[V15]], %[[V7]] : (tensor<4x3xi1>, tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V17:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V18:.+]] = ampc.mul %[[V16]], %[[V17]] : (tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V19:.+]] = ampc.constant dense<{{\[\[}}0, 1, 2]]> : tensor<1x3xi64>
// CHECK-NEXT: %[[V20:.+]] = ampc.add %[[V18]], %[[V19]] : (tensor<4x3xi64>, tensor<1x3xi64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V21:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V22:.+]] = ampc.where %[[V12]], %[[V20]], %[[V21]] : (tensor<4x3xi1>, tensor<4x3xi64>, tensor<i64>) -> tensor<4x3xi64>
// CHECK-NEXT: %[[V23:.+]] = ampc.reshape %[[X]] : tensor<4x3xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V24:.+]] = ampc.gather %[[V23]], %[[V22]] : (tensor<12xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
// CHECK-NEXT: return %[[V24]] : tensor<4x3xf32>
func.func @reverse_sequence(%x: tensor<4x3xf32>, %l: tensor<3xi64>) -> tensor<4x3xf32> {
  %0 = ampc.reverse_sequence %x, %l : (tensor<4x3xf32>, tensor<3xi64>) -> tensor<4x3xf32>
  return %0 : tensor<4x3xf32>
}

// -----

// batch_axis 0, time_axis 1 of a rank-3 input: the (B, T) index expanded
// over the last axis.
// CHECK-LABEL: func.func @reverse_sequence_batch_first
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x2xf32>, %[[L:.+]]: tensor<2xi64>)
// CHECK-NEXT: %[[V0:.+]] = ampc.constant dense<{{\[\[}}0, 1, 2]]> : tensor<1x3xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.reshape %[[L]] : tensor<2xi64> to tensor<2x1xi64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.sub %[[V1]], %[[V2]] : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi64>
// CHECK-NEXT: %[[V4:.+]] = ampc.sub %[[V3]], %[[V0]] : (tensor<2x1xi64>, tensor<1x3xi64>) -> tensor<2x3xi64>
// CHECK-NEXT: %[[V5:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<1x3xi64>, tensor<2x1xi64>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[V6:.+]] = ampc.where %[[V5]], %[[V4]], %[[V0]] : (tensor<2x3xi1>, tensor<2x3xi64>, tensor<1x3xi64>) -> tensor<2x3xi64>
// CHECK-NEXT: %[[V7:.+]] = ampc.reshape %[[V6]] : tensor<2x3xi64> to tensor<2x3x1xi64>
// CHECK-NEXT: %[[V8:.+]] = ampc.expand %[[V7]] : tensor<2x3x1xi64> to tensor<2x3x2xi64>
// CHECK-NEXT: %[[V9:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V10:.+]] = ampc.constant dense<3> : tensor<i64>
// CHECK-NEXT: %[[V11:.+]] = ampc.constant dense<-3> : tensor<i64>
// CHECK-NEXT: %[[V12:.+]] = ampc.greater_or_equal %[[V8]], %[[V11]] : (tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi1>
// CHECK-NEXT: %[[V13:.+]] = ampc.less %[[V8]], %[[V10]] : (tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi1>
// CHECK-NEXT: %[[V14:.+]] = ampc.and %[[V12]], %[[V13]] : (tensor<2x3x2xi1>, tensor<2x3x2xi1>) -> tensor<2x3x2xi1>
// CHECK-NEXT: %[[V15:.+]] = ampc.less %[[V8]], %[[V9]] : (tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi1>
// CHECK-NEXT: %[[V16:.+]] = ampc.where %[[V15]], %[[V10]], %[[V9]] : (tensor<2x3x2xi1>, tensor<i64>, tensor<i64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V17:.+]] = ampc.add %[[V8]], %[[V16]] : (tensor<2x3x2xi64>, tensor<2x3x2xi64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V18:.+]] = ampc.where %[[V14]], %[[V17]], %[[V9]] : (tensor<2x3x2xi1>, tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V19:.+]] = ampc.constant dense<2> : tensor<i64>
// CHECK-NEXT: %[[V20:.+]] = ampc.mul %[[V18]], %[[V19]] : (tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V21:.+]] = ampc.constant dense<{{\[\[}}[0]], {{\[\[}}6]]]> : tensor<2x1x1xi64>
// CHECK-NEXT: %[[V22:.+]] = ampc.add %[[V20]], %[[V21]] : (tensor<2x3x2xi64>, tensor<2x1x1xi64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V23:.+]] = ampc.constant dense<{{\[\[}}[0, 1]]]> : tensor<1x1x2xi64>
// CHECK-NEXT: %[[V24:.+]] = ampc.add %[[V22]], %[[V23]] : (tensor<2x3x2xi64>, tensor<1x1x2xi64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V25:.+]] = ampc.constant dense<-13> : tensor<i64>
// CHECK-NEXT: %[[V26:.+]] = ampc.where %[[V14]], %[[V24]], %[[V25]] : (tensor<2x3x2xi1>, tensor<2x3x2xi64>, tensor<i64>) -> tensor<2x3x2xi64>
// CHECK-NEXT: %[[V27:.+]] = ampc.reshape %[[X]] : tensor<2x3x2xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V28:.+]] = ampc.gather %[[V27]], %[[V26]] : (tensor<12xf32>, tensor<2x3x2xi64>) -> tensor<2x3x2xf32>
// CHECK-NEXT: return %[[V28]] : tensor<2x3x2xf32>
func.func @reverse_sequence_batch_first(%x: tensor<2x3x2xf32>, %l: tensor<2xi64>) -> tensor<2x3x2xf32> {
  %0 = ampc.reverse_sequence %x, %l {batch_axis = 0 : i64, time_axis = 1 : i64} : (tensor<2x3x2xf32>, tensor<2xi64>) -> tensor<2x3x2xf32>
  return %0 : tensor<2x3x2xf32>
}

// -----

// OneHot of int32 indices (compared in int64): negative ones wrapped by
// depth 4, unsqueezed at the axis (-1) and compared with 0..3; on where
// equal, off elsewhere (sliced from values).
// CHECK-LABEL: func.func @one_hot
// CHECK-SAME: (%[[I:.+]]: tensor<3xi32>, %[[V:.+]]: tensor<2xf32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.cast %[[I]] : tensor<3xi32> to tensor<3xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<0> : tensor<i64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[V3:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
// CHECK-NEXT: %[[V4:.+]] = ampc.add %[[V0]], %[[V2]] : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
// CHECK-NEXT: %[[V5:.+]] = ampc.where %[[V3]], %[[V4]], %[[V0]] : (tensor<3xi1>, tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
// CHECK-NEXT: %[[V6:.+]] = ampc.reshape %[[V5]] : tensor<3xi64> to tensor<3x1xi64>
// CHECK-NEXT: %[[V7:.+]] = ampc.constant dense<{{\[\[}}0, 1, 2, 3]]> : tensor<1x4xi64>
// CHECK-NEXT: %[[V8:.+]] = ampc.equal %[[V6]], %[[V7]] : (tensor<3x1xi64>, tensor<1x4xi64>) -> tensor<3x4xi1>
// CHECK-NEXT: %[[V9:.+]] = ampc.slice %[[V]] {axes = array<i64: 0>, ends = array<i64: 2>, starts = array<i64: 1>, steps = array<i64: 1>} : (tensor<2xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[V10:.+]] = ampc.reshape %[[V9]] : tensor<1xf32> to tensor<f32>
// CHECK-NEXT: %[[V11:.+]] = ampc.slice %[[V]] {axes = array<i64: 0>, ends = array<i64: 1>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2xf32>) -> tensor<1xf32>
// CHECK-NEXT: %[[V12:.+]] = ampc.reshape %[[V11]] : tensor<1xf32> to tensor<f32>
// CHECK-NEXT: %[[V13:.+]] = ampc.where %[[V8]], %[[V10]], %[[V12]] : (tensor<3x4xi1>, tensor<f32>, tensor<f32>) -> tensor<3x4xf32>
// CHECK-NEXT: return %[[V13]] : tensor<3x4xf32>
func.func @one_hot(%i: tensor<3xi32>, %v: tensor<2xf32>) -> tensor<3x4xf32> {
  %0 = ampc.one_hot %i, %v {depth = 4 : i64} : (tensor<3xi32>, tensor<2xf32>) -> tensor<3x4xf32>
  return %0 : tensor<3x4xf32>
}

// -----

// Float indices are compared in f64; axis 0.
// CHECK-LABEL: func.func @one_hot_float_axis0
// CHECK-SAME: (%[[I:.+]]: tensor<3xf32>, %[[V:.+]]: tensor<2xi64>)
// CHECK-NEXT: %[[V0:.+]] = ampc.cast %[[I]] : tensor<3xf32> to tensor<3xf64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<0.000000e+00> : tensor<f64>
// CHECK-NEXT: %[[V2:.+]] = ampc.constant dense<2.000000e+00> : tensor<f64>
// CHECK-NEXT: %[[V3:.+]] = ampc.less %[[V0]], %[[V1]] : (tensor<3xf64>, tensor<f64>) -> tensor<3xi1>
// CHECK-NEXT: %[[V4:.+]] = ampc.add %[[V0]], %[[V2]] : (tensor<3xf64>, tensor<f64>) -> tensor<3xf64>
// CHECK-NEXT: %[[V5:.+]] = ampc.where %[[V3]], %[[V4]], %[[V0]] : (tensor<3xi1>, tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
// CHECK-NEXT: %[[V6:.+]] = ampc.reshape %[[V5]] : tensor<3xf64> to tensor<1x3xf64>
// CHECK-NEXT: %[[V7:.+]] = ampc.constant dense<{{\[\[}}0.000000e+00], [1.000000e+00]]> : tensor<2x1xf64>
// CHECK-NEXT: %[[V8:.+]] = ampc.equal %[[V6]], %[[V7]] : (tensor<1x3xf64>, tensor<2x1xf64>) -> tensor<2x3xi1>
// CHECK-NEXT: %[[V9:.+]] = ampc.slice %[[V]] {axes = array<i64: 0>, ends = array<i64: 2>, starts = array<i64: 1>, steps = array<i64: 1>} : (tensor<2xi64>) -> tensor<1xi64>
// CHECK-NEXT: %[[V10:.+]] = ampc.reshape %[[V9]] : tensor<1xi64> to tensor<i64>
// CHECK-NEXT: %[[V11:.+]] = ampc.slice %[[V]] {axes = array<i64: 0>, ends = array<i64: 1>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2xi64>) -> tensor<1xi64>
// CHECK-NEXT: %[[V12:.+]] = ampc.reshape %[[V11]] : tensor<1xi64> to tensor<i64>
// CHECK-NEXT: %[[V13:.+]] = ampc.where %[[V8]], %[[V10]], %[[V12]] : (tensor<2x3xi1>, tensor<i64>, tensor<i64>) -> tensor<2x3xi64>
// CHECK-NEXT: return %[[V13]] : tensor<2x3xi64>
func.func @one_hot_float_axis0(%i: tensor<3xf32>, %v: tensor<2xi64>) -> tensor<2x3xi64> {
  %0 = ampc.one_hot %i, %v {axis = 0 : i64, depth = 2 : i64} : (tensor<3xf32>, tensor<2xi64>) -> tensor<2x3xi64>
  return %0 : tensor<2x3xi64>
}

// -----

// TopK: ampc.top_k's int64 indices (axis normalized) and a Gather of the
// values at them (row offsets added; no check needed).
// CHECK-LABEL: func.func @top_k_values
// CHECK-SAME: (%[[X:.+]]: tensor<3x4xf32>)
// CHECK-NEXT: %[[V0:.+]] = ampc.top_k %[[X]] {axis = 1 : i64, k = 2 : i64} : (tensor<3x4xf32>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V1:.+]] = ampc.constant dense<{{\[\[}}0], [4], [8]]> : tensor<3x1xi64>
// CHECK-NEXT: %[[V2:.+]] = ampc.add %[[V0]], %[[V1]] : (tensor<3x2xi64>, tensor<3x1xi64>) -> tensor<3x2xi64>
// CHECK-NEXT: %[[V3:.+]] = ampc.reshape %[[X]] : tensor<3x4xf32> to tensor<12xf32>
// CHECK-NEXT: %[[V4:.+]] = ampc.gather %[[V3]], %[[V2]] : (tensor<12xf32>, tensor<3x2xi64>) -> tensor<3x2xf32>
// CHECK-NEXT: return %[[V4]], %[[V0]] : tensor<3x2xf32>, tensor<3x2xi64>
func.func @top_k_values(%x: tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>) {
  %0:2 = ampc.top_k_values %x {k = 2 : i64} : (tensor<3x4xf32>) -> (tensor<3x2xf32>, tensor<3x2xi64>)
  return %0#0, %0#1 : tensor<3x2xf32>, tensor<3x2xi64>
}
