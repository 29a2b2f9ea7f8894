// RUN: ampc-opt %s --split-input-file --ampc-attach-loss="loss=mse partial-batches=1" | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-attach-loss="loss=cross_entropy partial-batches=1" | FileCheck %s --check-prefix=CE
// RUN: ampc-opt %s --split-input-file --ampc-attach-loss="loss=mse" | FileCheck %s --check-prefix=OFF

// Issue 34, item 6: whether a partial last batch trains is decided on
// @forward. The module attribute ampc.partial_batches is "" when every row
// of the batch is computed apart from the others (the loss is then masked
// by the row count), or why not, naming the op.

// Rows apart: a Gemm with the batch on A's rows, a LayerNormalization over
// the last axis, a Reshape keeping axis 0 a multiple of the batch, a
// Transpose with perm[0] == 0. The MSE is masked: the padded rows' squared
// differences are selected out, and the mean is their sum over the real
// rows' element count (rows * 6, in i64, converted once): with every row
// real, the bits of ReduceMean (both targets divide the same FP32 sum by
// the same rounded count), with one reduction and no select.
// CHECK-LABEL: module attributes {ampc.partial_batches = ""}
// CHECK: %[[ROWS:.+]] = ampc.constant dense<4> : tensor<i64> {ampc.batch_rows}
// CHECK: %[[MASK:.+]] = ampc.less %{{.+}}, %[[ROWS]] : (tensor<4x1x1xi64>, tensor<i64>) -> tensor<4x1x1xi1>
// CHECK: %[[M:.+]] = ampc.where %[[MASK]], %{{.+}}, %{{.+}} : (tensor<4x1x1xi1>, tensor<4x2x3xf32>, tensor<f32>) -> tensor<4x2x3xf32>
// CHECK-NOT: ampc.reduce_mean
// CHECK: %[[SUM:.+]] = ampc.reduce_sum %[[M]]
// CHECK: %[[PER_ROW:.+]] = ampc.constant dense<6> : tensor<i64>
// CHECK: %[[ELEMENTS:.+]] = ampc.mul %[[ROWS]], %[[PER_ROW]] : (tensor<i64>, tensor<i64>) -> tensor<i64>
// CHECK: %[[COUNT:.+]] = ampc.cast %[[ELEMENTS]] : tensor<i64> to tensor<f32>
// CHECK: %[[LOSS:.+]] = ampc.div %[[SUM]], %[[COUNT]]
// CHECK-NOT: ampc.where
// CHECK: return %[[LOSS]]
// OFF-NOT: ampc.partial_batches
// OFF-NOT: ampc.batch_rows
module {
  func.func @forward(%x: tensor<4x6xf32> {ampc.name = "x"}) -> (tensor<4x2x3xf32> {ampc.name = "y"}) {
    %w = ampc.constant dense<0.5> : tensor<6x6xf32>
    %g = ampc.constant dense<1.0> : tensor<6xf32>
    %h = ampc.gemm %x, %w : (tensor<4x6xf32>, tensor<6x6xf32>) -> tensor<4x6xf32>
    %n, %mean, %rstd = ampc.layer_normalization %h, %g {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<4x6xf32>, tensor<6xf32>) -> (tensor<4x6xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
    %r = ampc.reshape %n : tensor<4x6xf32> to tensor<4x3x2xf32>
    %t = ampc.transpose %r {perm = array<i64: 0, 2, 1>} : (tensor<4x3x2xf32>) -> tensor<4x2x3xf32>
    return %t : tensor<4x2x3xf32>
  }
}

// -----

// A reduction over the batch axis mixes the rows: refused, naming the node.
// CHECK-LABEL: module attributes {ampc.partial_batches = "ReduceMean 'pool' does not keep the batch on axis 0"}
// CHECK-NOT: ampc.batch_rows
module {
  func.func @forward(%x: tensor<4x6xf32> {ampc.name = "x"}) -> (tensor<4x6xf32> {ampc.name = "y"}) {
    %m = ampc.reduce_mean %x {axes = array<i64: 0>, keepdims = 1 : i64} : (tensor<4x6xf32>) -> tensor<1x6xf32> loc("pool"(fused<"ReduceMean">[unknown]))
    %y = ampc.sub %x, %m : (tensor<4x6xf32>, tensor<1x6xf32>) -> tensor<4x6xf32>
    return %y : tensor<4x6xf32>
  }
}

// -----

// BatchNormalization in training mode computes statistics over the batch.
// CHECK-LABEL: module attributes {ampc.partial_batches = "BatchNormalization 'bn1' computes statistics over the batch"}
// CE-LABEL: module attributes {ampc.partial_batches = "BatchNormalization 'bn1' computes statistics over the batch"}
// CE-NOT: ampc.where
module {
  func.func @forward(%x: tensor<2x3x4xf32> {ampc.name = "x"}) -> (tensor<2x3x4xf32> {ampc.name = "y"}) {
    %s = ampc.constant dense<1.0> : tensor<3xf32>
    %b = ampc.constant dense<0.0> : tensor<3xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %b, %b, %s {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>) loc("bn1"(fused<"BatchNormalization">[unknown]))
    return %y : tensor<2x3x4xf32>
  }
}

// -----

// A MatMul whose right operand carries the batch but whose left does not
// mixes rows (the batch is on B's rows, the contraction axis).
// CHECK-LABEL: module attributes {ampc.partial_batches = "MatMul 'mm' mixes the rows of the batch"}
module {
  func.func @forward(%x: tensor<4x6xf32> {ampc.name = "x"}) -> (tensor<4x6xf32> {ampc.name = "y"}) {
    %w = ampc.constant dense<0.5> : tensor<4x4xf32>
    %y = ampc.matmul %w, %x : (tensor<4x4xf32>, tensor<4x6xf32>) -> tensor<4x6xf32> loc("mm"(fused<"MatMul">[unknown]))
    return %y : tensor<4x6xf32>
  }
}

// -----

// Cross-entropy over class ids: the padded rows' labels become an id no
// class has, which the loss ignores (out of the sum and the divisor).
// CE-LABEL: module attributes {ampc.partial_batches = ""}
// CE: %[[ROWS:.+]] = ampc.constant dense<4> : tensor<i64> {ampc.batch_rows}
// CE: %[[PAD:.+]] = ampc.constant dense<-2147483648> : tensor<i64>
// CE: %[[MASK:.+]] = ampc.less %{{.+}}, %[[ROWS]] : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CE: %[[L:.+]] = ampc.where %[[MASK]], %{{.+}}, %[[PAD]]
// CE: ampc.softmax_cross_entropy_loss %{{.+}}, %[[L]] {ignore_index = -2147483648 : i64
module {
  func.func @forward(%x: tensor<4x6xf32> {ampc.name = "x"}) -> (tensor<4x6xf32> {ampc.name = "y"}) {
    %y = ampc.relu %x : tensor<4x6xf32>
    return %y : tensor<4x6xf32>
  }
}
