// RUN: ampc-opt %s --split-input-file --ampc-fuse-residual-layer-norm | FileCheck %s

// ampc-fuse-residual-layer-norm (issue 37, item 4): a residual add read by
// a LayerNorm becomes part of it (ampc.add_layer_norm), the sum a result
// for the add's other readers.

// The GPT block's: an FP32 residual plus a GEMM's FP16 output widened by a
// cast, which goes (the 16-bit summand is read as it is); Y folded to
// FP16 stays; the sum's later reader reads the new op's sum.
// CHECK-LABEL: func.func @residual
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x32xf32>, %[[H:[^:]+]]: tensor<4x32xf16>, %[[G:[^:]+]]: tensor<32xf32>, %[[B:[^:]+]]: tensor<32xf32>)
// CHECK-NEXT: %[[S:[^,]+]], %[[Y:[^,]+]], %{{[^,]+}}, %{{[^ ]+}} = ampc.add_layer_norm %[[X]], %[[H]], %[[G]], %[[B]] : (tensor<4x32xf32>, tensor<4x32xf16>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf16>, tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK-NEXT: %[[R:.+]] = ampc.add %[[S]], %[[S]]
// CHECK-NEXT: return %[[Y]], %[[R]]
func.func @residual(%x: tensor<4x32xf32>, %h: tensor<4x32xf16>, %g: tensor<32xf32>, %b: tensor<32xf32>) -> (tensor<4x32xf16>, tensor<4x32xf32>) {
  %c = ampc.cast %h : tensor<4x32xf16> to tensor<4x32xf32>
  %s = ampc.add %x, %c : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %y, %m, %r = ampc.layer_normalization %s, %g, %b {epsilon = 1.0e-5 : f32} : (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<4x32xf16>, tensor<4x1xf32>, tensor<4x1xf32>)
  %t = ampc.add %s, %s : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y, %t : tensor<4x32xf16>, tensor<4x32xf32>
}

// -----

// The widened summand first: the other one is the input.
// CHECK-LABEL: func.func @widened_first
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x32xf32>, %[[H:[^:]+]]: tensor<4x32xbf16>, %[[G:[^:]+]]: tensor<32xf32>)
// CHECK-NEXT: ampc.add_layer_norm %[[X]], %[[H]], %[[G]] : (tensor<4x32xf32>, tensor<4x32xbf16>, tensor<32xf32>)
// CHECK-NOT: ampc.cast
func.func @widened_first(%x: tensor<4x32xf32>, %h: tensor<4x32xbf16>, %g: tensor<32xf32>) -> tensor<4x32xf32> {
  %c = ampc.cast %h : tensor<4x32xbf16> to tensor<4x32xf32>
  %s = ampc.add %c, %x : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %y, %m, %r = ampc.layer_normalization %s, %g : (tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return %y : tensor<4x32xf32>
}

// -----

// Left as they are: a summand that broadcasts (a bias add), and a sum read
// before the LayerNorm runs.
// CHECK-LABEL: func.func @broadcast
// CHECK-NOT: add_layer_norm
// CHECK: ampc.layer_normalization
func.func @broadcast(%x: tensor<4x32xf32>, %v: tensor<32xf32>, %g: tensor<32xf32>) -> tensor<4x32xf32> {
  %s = ampc.add %x, %v : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  %y, %m, %r = ampc.layer_normalization %s, %g : (tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return %y : tensor<4x32xf32>
}

// -----

// CHECK-LABEL: func.func @read_before
// CHECK-NOT: add_layer_norm
// CHECK: ampc.layer_normalization
func.func @read_before(%x: tensor<4x32xf32>, %z: tensor<4x32xf32>, %g: tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x32xf32>) {
  %s = ampc.add %x, %z : (tensor<4x32xf32>, tensor<4x32xf32>) -> tensor<4x32xf32>
  %e = ampc.exp %s : tensor<4x32xf32>
  %y, %m, %r = ampc.layer_normalization %s, %g : (tensor<4x32xf32>, tensor<32xf32>) -> (tensor<4x32xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  return %y, %e : tensor<4x32xf32>, tensor<4x32xf32>
}
