// RUN: ampc-opt %s --split-input-file --ampc-fuse-batch-norm-epilogue | FileCheck %s

// ampc-fuse-batch-norm-epilogue (issue 39): a BatchNorm's ReLU and residual
// add become its epilogue (`residual`, `relu`); Y is the value they
// computed, read by their readers.

// BatchNorm -> ReLU: the ReLU goes, its reader (a ReLU gradient) reads Y.
// CHECK-LABEL: func.func @relu
// CHECK-NEXT: %[[Y:[^,]+]], %{{.*}} = ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 {relu, training_mode = 1 : i64}
// CHECK-NEXT: %[[G:.+]] = ampc.relu_grad %arg2, %[[Y]]
// CHECK-NEXT: return %[[Y]], %[[G]]
func.func @relu(%x: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %g: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %v = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = ampc.relu %y : tensor<2x4x3x3xf16>
  %d = ampc.relu_grad %g, %r : tensor<2x4x3x3xf16>
  return %r, %d : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// BatchNorm -> add(Y, identity) -> ReLU, with the saved statistics: the
// running and saved statistics keep their readers.
// CHECK-LABEL: func.func @residual_relu
// CHECK-NEXT: %[[Y:[^,]+]], %[[M:[^,]+]], %[[V:[^,]+]], %[[S:[^:]+]]:2 = ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 residual %arg2 {relu, saved_statistics, training_mode = 1 : i64}
// CHECK-NEXT: return %[[Y]], %[[M]], %[[S]]#1
func.func @residual_relu(%x: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %identity: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>) {
  %y, %m, %v, %saved:2 = ampc.batch_normalization %x, %s, %s, %s, %s {saved_statistics, training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %sum = ampc.add %identity, %y : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %r = ampc.relu %sum : tensor<2x4x3x3xf16>
  return %r, %m, %saved#1 : tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>
}

// -----

// A shortcut that is a BatchNorm too (resnet's downsampling block): the
// first BatchNorm's residual would be computed after it, so the second
// takes the first's Y as its residual, and the ReLU.
// CHECK-LABEL: func.func @two_batch_norms
// CHECK-NEXT: %[[A:[^,]+]], %{{.*}} = ampc.batch_normalization %arg0, %arg2, %arg2, %arg2, %arg2 {training_mode = 1 : i64}
// CHECK-NEXT: %[[B:[^,]+]], %{{.*}} = ampc.batch_normalization %arg1, %arg2, %arg2, %arg2, %arg2 residual %[[A]] {relu, training_mode = 1 : i64}
// CHECK-NEXT: return %[[B]]
func.func @two_batch_norms(%x: tensor<2x4x3x3xf16>, %d: tensor<2x4x3x3xf16>, %s: tensor<4xf32>) -> tensor<2x4x3x3xf16> {
  %a, %am, %av = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %b, %bm, %bv = ampc.batch_normalization %d, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %sum = ampc.add %a, %b : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %r = ampc.relu %sum : tensor<2x4x3x3xf16>
  return %r : tensor<2x4x3x3xf16>
}

// -----

// A sum read by more than the ReLU (mobilenet's blocks have no ReLU after
// the add): the residual moves in, the ReLU stays and reads Y.
// CHECK-LABEL: func.func @sum_read_twice
// CHECK-NEXT: %[[Y:[^,]+]], %{{.*}} = ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 residual %arg2 {training_mode = 1 : i64}
// CHECK-NEXT: %[[R:.+]] = ampc.relu %[[Y]]
// CHECK-NEXT: return %[[R]], %[[Y]]
func.func @sum_read_twice(%x: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %identity: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %y, %m, %v = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %sum = ampc.add %y, %identity : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %r = ampc.relu %sum : tensor<2x4x3x3xf16>
  return %r, %sum : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// Left as they are: Y read twice; an add that broadcasts (a bias); a
// residual of another type; a ReLU of another type is impossible (ReLU
// keeps its type), so a cast between stays too.
// CHECK-LABEL: func.func @left_alone
// CHECK: ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 {training_mode = 1 : i64}
// CHECK: ampc.relu
// CHECK: ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 {training_mode = 1 : i64}
// CHECK: ampc.add
// CHECK: ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 {training_mode = 1 : i64}
// CHECK: ampc.cast
// CHECK: ampc.relu
// CHECK-NOT: residual
// CHECK-NOT: relu,
func.func @left_alone(%x: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %bias: tensor<1x4x1x1xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf32>) {
  %y, %m, %v = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %r = ampc.relu %y : tensor<2x4x3x3xf16>
  %y2, %m2, %v2 = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %b = ampc.add %y2, %bias : (tensor<2x4x3x3xf16>, tensor<1x4x1x1xf16>) -> tensor<2x4x3x3xf16>
  %y3, %m3, %v3 = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %c = ampc.cast %y3 : tensor<2x4x3x3xf16> to tensor<2x4x3x3xf32>
  %r3 = ampc.relu %c : tensor<2x4x3x3xf32>
  return %y, %r, %b, %r3 : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf32>
}

// -----

// Backward: the ReLU's gradient read only by batch_norm_grad becomes its
// prologue (`relu_output`, the forward ReLU's Y).
// CHECK-LABEL: func.func @relu_grad
// CHECK-NEXT: %[[DX:[^,]+]], %{{[^,]+}}, %{{[^ ]+}} = ampc.batch_norm_grad %arg0, %arg1, %arg3, %arg3, %arg3 relu_output %arg2 :
// CHECK-NEXT: return %[[DX]]
func.func @relu_grad(%dy: tensor<2x4x3x3xf16>, %x: tensor<2x4x3x3xf16>, %y: tensor<2x4x3x3xf16>, %s: tensor<4xf32>) -> tensor<2x4x3x3xf16> {
  %g = ampc.relu_grad %dy, %y : tensor<2x4x3x3xf16>
  %dx, %ds, %db = ampc.batch_norm_grad %g, %x, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %dx : tensor<2x4x3x3xf16>
}

// -----

// A residual block's output gradient: the shortcut's and the main
// branch's contributions added, masked by the block's ReLU, read by the
// last BatchNorm's adjoint and by the shortcut (the second BatchNorm's
// adjoint, and the next block's sum). The first batch_norm_grad takes the
// add and the mask and keeps the masked gradient; the others read it.
// CHECK-LABEL: func.func @residual_grad
// CHECK-NEXT: %[[DX:[^,]+]], %{{[^,]+}}, %{{[^,]+}}, %[[K:[^ ]+]] = ampc.batch_norm_grad %arg0, %arg1, %arg3, %arg3, %arg3 addend %arg4 relu_output %arg2 {keep_grad} :
// CHECK-NEXT: %[[DX2:[^,]+]], %{{.*}} = ampc.batch_norm_grad %[[K]], %arg1, %arg3, %arg3, %arg3 :
// CHECK-NEXT: %[[N:.+]] = ampc.add %[[K]], %[[DX2]]
// CHECK-NEXT: return %[[DX]], %[[N]]
func.func @residual_grad(%dy: tensor<2x4x3x3xf16>, %x: tensor<2x4x3x3xf16>, %y: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %dz: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %sum = ampc.add %dy, %dz : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %g = ampc.relu_grad %sum, %y : tensor<2x4x3x3xf16>
  %dx, %ds, %db = ampc.batch_norm_grad %g, %x, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %dx2, %ds2, %db2 = ampc.batch_norm_grad %g, %x, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %next = ampc.add %g, %dx2 : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  return %dx, %next : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}

// -----

// Left as they are: a masked gradient read before the batch_norm_grad
// (the kept result would come too late), and an add whose sum is read
// twice (the mask alone moves in; the add stays).
// CHECK-LABEL: func.func @grad_left_alone
// CHECK-NEXT: ampc.relu_grad
// CHECK-NEXT: ampc.add
// CHECK-NEXT: ampc.batch_norm_grad %{{[^ ]+}}, %arg1, %arg3, %arg3, %arg3 :
// CHECK-NEXT: %[[S:.+]] = ampc.add %arg0, %arg4
// CHECK-NEXT: ampc.batch_norm_grad %[[S]], %arg1, %arg3, %arg3, %arg3 relu_output %arg2 :
func.func @grad_left_alone(%dy: tensor<2x4x3x3xf16>, %x: tensor<2x4x3x3xf16>, %y: tensor<2x4x3x3xf16>, %s: tensor<4xf32>, %dz: tensor<2x4x3x3xf16>) -> (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) {
  %g = ampc.relu_grad %dy, %y : tensor<2x4x3x3xf16>
  %early = ampc.add %g, %g : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %dx, %ds, %db = ampc.batch_norm_grad %g, %x, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  %sum = ampc.add %dy, %dz : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>) -> tensor<2x4x3x3xf16>
  %g2 = ampc.relu_grad %sum, %y : tensor<2x4x3x3xf16>
  %dx2, %ds2, %db2 = ampc.batch_norm_grad %g2, %x, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<2x4x3x3xf16>, tensor<4xf32>, tensor<4xf32>)
  return %early, %dx, %dx2, %sum : tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>, tensor<2x4x3x3xf16>
}
