// RUN: ampc-opt %s --ampc-fold-shapes --split-input-file | FileCheck %s
// The pass is declared on functions: it runs nested in func.func (as
// buildPipeline nests it), and a module pipeline does not take it.
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-fold-shapes))" | FileCheck %s
// RUN: not ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-fold-shapes)" 2>&1 | FileCheck %s --check-prefix=NOT-ON-MODULE
// NOT-ON-MODULE: restricted to 'func.func' on a PassManager intended to run on 'builtin.module'

// ampc-fold-shapes folds the small integer subgraphs that compute reshape
// targets to ampc.constant and erases whatever becomes dead. Expected values
// are worked out by hand from ONNX semantics, not copied from the output.

// The subgraph a PyTorch export emits for x.view(x.size(0) * x.size(1), -1):
// Shape -> Gather -> Mul -> Unsqueeze -> Concat. Nothing of it survives.
// CHECK-LABEL: func.func @reshape_target_subgraph
// CHECK-SAME: (%[[X:.+]]: tensor<2x16x64xf32>)
// CHECK-NEXT: %[[R:.+]] = ampc.reshape %[[X]] : tensor<2x16x64xf32> to tensor<32x64xf32>
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: ampc.
func.func @reshape_target_subgraph(%x: tensor<2x16x64xf32>) -> tensor<32x64xf32> {
  %s = ampc.shape %x : (tensor<2x16x64xf32>) -> tensor<3xi64>
  %i0 = ampc.constant dense<0> : tensor<i64>
  %d0 = ampc.gather %s, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %i1 = ampc.constant dense<1> : tensor<i64>
  %d1 = ampc.gather %s, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %m = ampc.mul %d0, %d1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %u = ampc.unsqueeze %m {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %minus1 = ampc.constant dense<[-1]> : tensor<1xi64>
  %target = ampc.concat %u, %minus1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  %r = ampc.reshape %x : tensor<2x16x64xf32> to tensor<32x64xf32>
  return %r : tensor<32x64xf32>
}

// -----

// The same subgraph, its value returned: it folds to the target shape.
// CHECK-LABEL: func.func @reshape_target_value
// CHECK-NEXT: %[[C:.+]] = ampc.constant dense<[32, -1]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]] : tensor<2xi64>
func.func @reshape_target_value(%x: tensor<2x16x64xf32>) -> tensor<2xi64> {
  %s = ampc.shape %x : (tensor<2x16x64xf32>) -> tensor<3xi64>
  %i0 = ampc.constant dense<0> : tensor<i64>
  %d0 = ampc.gather %s, %i0 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %i1 = ampc.constant dense<1> : tensor<i64>
  %d1 = ampc.gather %s, %i1 {axis = 0 : i64} : (tensor<3xi64>, tensor<i64>) -> tensor<i64>
  %m = ampc.mul %d0, %d1 : (tensor<i64>, tensor<i64>) -> tensor<i64>
  %u = ampc.unsqueeze %m {axes = array<i64: 0>} : (tensor<i64>) -> tensor<1xi64>
  %minus1 = ampc.constant dense<[-1]> : tensor<1xi64>
  %target = ampc.concat %u, %minus1 {axis = 0 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<2xi64>
  return %target : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @shape
// CHECK-DAG: %[[ALL:.+]] = ampc.constant dense<[2, 16, 64, 8]> : tensor<4xi64>
// CHECK-DAG: %[[MID:.+]] = ampc.constant dense<[16, 64]> : tensor<2xi64>
// CHECK-DAG: %[[NONE:.+]] = ampc.constant dense<> : tensor<0xi64>
// CHECK-NOT: ampc.shape
// CHECK: return %[[ALL]], %[[MID]], %[[NONE]]
func.func @shape(%x: tensor<2x16x64x8xf32>) -> (tensor<4xi64>, tensor<2xi64>, tensor<0xi64>) {
  %0 = ampc.shape %x : (tensor<2x16x64x8xf32>) -> tensor<4xi64>
  %1 = ampc.shape %x {start = 1 : i64, end = -1 : i64} : (tensor<2x16x64x8xf32>) -> tensor<2xi64>
  %2 = ampc.shape %x {start = 3 : i64, end = 1 : i64} : (tensor<2x16x64x8xf32>) -> tensor<0xi64>
  return %0, %1, %2 : tensor<4xi64>, tensor<2xi64>, tensor<0xi64>
}

// -----

// CHECK-LABEL: func.func @integer_arithmetic
// CHECK-DAG: %[[ADD:.+]] = ampc.constant dense<{{\[}}[11, 22, 33], [14, 25, 36]]> : tensor<2x3xi64>
// CHECK-DAG: %[[MUL:.+]] = ampc.constant dense<{{\[}}[2, 4, 6], [12, 15, 18]]> : tensor<2x3xi64>
// CHECK-DAG: %[[DIV:.+]] = ampc.constant dense<[3, -3, 4]> : tensor<3xi64>
// CHECK-DAG: %[[SUB:.+]] = ampc.constant dense<[-5, 9, -7]> : tensor<3xi64>
// CHECK-DAG: %[[WRAP:.+]] = ampc.constant dense<[-2147483648, 6, -2]> : tensor<3xi32>
// CHECK-NOT: ampc.add
// CHECK-NOT: ampc.mul
// CHECK-NOT: ampc.div
// CHECK-NOT: ampc.sub
// CHECK: return %[[ADD]], %[[MUL]], %[[DIV]], %[[SUB]], %[[WRAP]]
func.func @integer_arithmetic() -> (tensor<2x3xi64>, tensor<2x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<3xi32>) {
  %a = ampc.constant dense<[[1, 2, 3], [4, 5, 6]]> : tensor<2x3xi64>
  %b = ampc.constant dense<[10, 20, 30]> : tensor<3xi64>
  %add = ampc.add %a, %b : (tensor<2x3xi64>, tensor<3xi64>) -> tensor<2x3xi64>
  %c = ampc.constant dense<[[2], [3]]> : tensor<2x1xi64>
  %mul = ampc.mul %a, %c : (tensor<2x3xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  // Integer division truncates toward zero.
  %n = ampc.constant dense<[7, -7, 9]> : tensor<3xi64>
  %d = ampc.constant dense<2> : tensor<i64>
  %div = ampc.div %n, %d : (tensor<3xi64>, tensor<i64>) -> tensor<3xi64>
  %sub = ampc.sub %d, %n : (tensor<i64>, tensor<3xi64>) -> tensor<3xi64>
  // i32 arithmetic wraps at the type's width.
  %p = ampc.constant dense<[2147483647, 5, -3]> : tensor<3xi32>
  %one = ampc.constant dense<1> : tensor<i32>
  %wrap = ampc.add %p, %one : (tensor<3xi32>, tensor<i32>) -> tensor<3xi32>
  return %add, %mul, %div, %sub, %wrap : tensor<2x3xi64>, tensor<2x3xi64>, tensor<3xi64>, tensor<3xi64>, tensor<3xi32>
}

// -----

// An integer division by zero is left for the runtime to report.
// CHECK-LABEL: func.func @integer_division_by_zero
// CHECK-DAG: %[[N:.+]] = ampc.constant dense<[4, 5]> : tensor<2xi64>
// CHECK-DAG: %[[Z:.+]] = ampc.constant dense<[2, 0]> : tensor<2xi64>
// CHECK: %[[D:.+]] = ampc.div %[[N]], %[[Z]]
// CHECK-NEXT: return %[[D]]
func.func @integer_division_by_zero() -> tensor<2xi64> {
  %n = ampc.constant dense<[4, 5]> : tensor<2xi64>
  %z = ampc.constant dense<[2, 0]> : tensor<2xi64>
  %div = ampc.div %n, %z : (tensor<2xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %div : tensor<2xi64>
}

// -----

// CHECK-LABEL: func.func @float_arithmetic
// CHECK-DAG: %[[SUB:.+]] = ampc.constant dense<[1.250000e+00, -2.250000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[DIV:.+]] = ampc.constant dense<1.000000e+00> : tensor<2xf16>
// CHECK-NOT: ampc.sub
// CHECK-NOT: ampc.div
// CHECK: return %[[SUB]], %[[DIV]]
func.func @float_arithmetic() -> (tensor<2xf32>, tensor<2xf16>) {
  %a = ampc.constant dense<[1.5, -2.0]> : tensor<2xf32>
  %b = ampc.constant dense<0.25> : tensor<f32>
  %s = ampc.sub %a, %b : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  %h = ampc.constant dense<[1.0, 3.0]> : tensor<2xf16>
  %q = ampc.div %h, %h : (tensor<2xf16>, tensor<2xf16>) -> tensor<2xf16>
  return %s, %q : tensor<2xf32>, tensor<2xf16>
}

// -----

// CHECK-LABEL: func.func @equal_and_where
// CHECK-DAG: %[[EQ:.+]] = ampc.constant dense<[false, true, false]> : tensor<3xi1>
// CHECK-DAG: %[[W:.+]] = ampc.constant dense<[1, 1, 3]> : tensor<3xi64>
// CHECK-DAG: %[[WB:.+]] = ampc.constant dense<{{\[}}[1, 20], [2, 20]]> : tensor<2x2xi64>
// CHECK-NOT: ampc.equal
// CHECK-NOT: ampc.where
// CHECK: return %[[EQ]], %[[W]], %[[WB]]
func.func @equal_and_where() -> (tensor<3xi1>, tensor<3xi64>, tensor<2x2xi64>) {
  %a = ampc.constant dense<[1, 0, 3]> : tensor<3xi64>
  %z = ampc.constant dense<0> : tensor<i64>
  %eq = ampc.equal %a, %z : (tensor<3xi64>, tensor<i64>) -> tensor<3xi1>
  %one = ampc.constant dense<1> : tensor<i64>
  %w = ampc.where %eq, %one, %a : (tensor<3xi1>, tensor<i64>, tensor<3xi64>) -> tensor<3xi64>
  // All three operands broadcast: condition [2], x [2, 1], y [2].
  %c = ampc.constant dense<[true, false]> : tensor<2xi1>
  %x = ampc.constant dense<[[1], [2]]> : tensor<2x1xi64>
  %y = ampc.constant dense<[10, 20]> : tensor<2xi64>
  %wb = ampc.where %c, %x, %y : (tensor<2xi1>, tensor<2x1xi64>, tensor<2xi64>) -> tensor<2x2xi64>
  return %eq, %w, %wb : tensor<3xi1>, tensor<3xi64>, tensor<2x2xi64>
}

// -----

// CHECK-LABEL: func.func @equal_floats
// CHECK-NEXT: %[[EQ:.+]] = ampc.constant dense<[true, false]> : tensor<2xi1>
// CHECK-NEXT: return %[[EQ]]
func.func @equal_floats() -> tensor<2xi1> {
  %a = ampc.constant dense<[0.5, 1.0]> : tensor<2xf32>
  %b = ampc.constant dense<[0.5, 2.0]> : tensor<2xf32>
  %eq = ampc.equal %a, %b : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xi1>
  return %eq : tensor<2xi1>
}

// -----

// CHECK-LABEL: func.func @cast
// CHECK-DAG: %[[I:.+]] = ampc.constant dense<[1, -2, 0]> : tensor<3xi64>
// CHECK-DAG: %[[F:.+]] = ampc.constant dense<[1.000000e+00, -2.000000e+00, 0.000000e+00]> : tensor<3xf32>
// CHECK-DAG: %[[B:.+]] = ampc.constant dense<[true, true, false]> : tensor<3xi1>
// CHECK-DAG: %[[H:.+]] = ampc.constant dense<[1.000980e+00, 0x7C00]> : tensor<2xf16>
// CHECK-DAG: %[[N:.+]] = ampc.constant dense<[1, 0, 1]> : tensor<3xi32>
// CHECK-NOT: ampc.cast
// CHECK: return %[[F]], %[[I]], %[[B]], %[[I]], %[[H]], %[[N]]
func.func @cast() -> (tensor<3xf32>, tensor<3xi64>, tensor<3xi1>, tensor<3xi64>, tensor<2xf16>, tensor<3xi32>) {
  %i = ampc.constant dense<[1, -2, 0]> : tensor<3xi64>
  %f = ampc.cast %i : tensor<3xi64> to tensor<3xf32>
  // Float to integer truncates toward zero; to bool is "not zero".
  %g = ampc.constant dense<[1.75, -2.5, 0.0]> : tensor<3xf32>
  %t = ampc.cast %g : tensor<3xf32> to tensor<3xi64>
  %b = ampc.cast %g : tensor<3xf32> to tensor<3xi1>
  %same = ampc.cast %i : tensor<3xi64> to tensor<3xi64>
  // f32 to f16 rounds to nearest even: 65520 is past the largest finite f16.
  %r = ampc.constant dense<[1.0009765625, 65520.0]> : tensor<2xf32>
  %h = ampc.cast %r : tensor<2xf32> to tensor<2xf16>
  %bools = ampc.constant dense<[true, false, true]> : tensor<3xi1>
  %n = ampc.cast %bools : tensor<3xi1> to tensor<3xi32>
  return %f, %t, %b, %same, %h, %n : tensor<3xf32>, tensor<3xi64>, tensor<3xi1>, tensor<3xi64>, tensor<2xf16>, tensor<3xi32>
}

// -----

// CHECK-LABEL: func.func @slice
// CHECK-DAG: %[[S:.+]] = ampc.constant dense<{{\[}}[5, 7], [9, 11]]> : tensor<2x2xi64>
// CHECK-DAG: %[[R:.+]] = ampc.constant dense<[5, 3, 1]> : tensor<3xi64>
// CHECK-DAG: %[[L:.+]] = ampc.constant dense<5> : tensor<1xi64>
// CHECK-NOT: ampc.slice
// CHECK: return %[[S]], %[[R]], %[[L]]
func.func @slice() -> (tensor<2x2xi64>, tensor<3xi64>, tensor<1xi64>) {
  %a = ampc.constant dense<[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]> : tensor<3x4xi64>
  %s = ampc.slice %a {axes = array<i64: 0, 1>, ends = array<i64: 3, 4>, starts = array<i64: 1, 1>, steps = array<i64: 1, 2>} : (tensor<3x4xi64>) -> tensor<2x2xi64>
  // v[-1::-2] with the "to the start" sentinel end.
  %v = ampc.constant dense<[0, 1, 2, 3, 4, 5]> : tensor<6xi64>
  %r = ampc.slice %v {axes = array<i64: 0>, ends = array<i64: -9223372036854775807>, starts = array<i64: -1>, steps = array<i64: -2>} : (tensor<6xi64>) -> tensor<3xi64>
  // An end past the dimension is clamped.
  %l = ampc.slice %v {axes = array<i64: -1>, ends = array<i64: 100>, starts = array<i64: -1>, steps = array<i64: 1>} : (tensor<6xi64>) -> tensor<1xi64>
  return %s, %r, %l : tensor<2x2xi64>, tensor<3xi64>, tensor<1xi64>
}

// -----

// A slice that keeps everything is its operand, constant or not.
// CHECK-LABEL: func.func @slice_identity
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: return %[[X]], %[[X]]
func.func @slice_identity(%x: tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  %0 = ampc.slice %x {axes = array<i64: 1>, ends = array<i64: 9223372036854775807>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<2x4xf32>) -> tensor<2x4xf32>
  %1 = ampc.identity %x : tensor<2x4xf32>
  return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// CHECK-LABEL: func.func @reshape_like
// CHECK-DAG: %[[SQ:.+]] = ampc.constant dense<{{\[}}[1, 2], [3, 4]]> : tensor<2x2xi64>
// CHECK-DAG: %[[RS:.+]] = ampc.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
// CHECK-DAG: %[[FL:.+]] = ampc.constant dense<{{\[}}[1, 2, 3, 4]]> : tensor<1x4xi64>
// CHECK-DAG: %[[UN:.+]] = ampc.constant dense<{{\[}}[1], [2], [3], [4]]> : tensor<4x1xi64>
// CHECK-NOT: ampc.squeeze
// CHECK-NOT: ampc.reshape
// CHECK-NOT: ampc.flatten
// CHECK-NOT: ampc.unsqueeze
// CHECK-NOT: ampc.identity
// CHECK: return %[[SQ]], %[[RS]], %[[FL]], %[[UN]], %[[RS]]
func.func @reshape_like() -> (tensor<2x2xi64>, tensor<4xi64>, tensor<1x4xi64>, tensor<4x1xi64>, tensor<4xi64>) {
  %a = ampc.constant dense<[[[1, 2]], [[3, 4]]]> : tensor<2x1x2xi64>
  %sq = ampc.squeeze %a {axes = array<i64: 1>} : (tensor<2x1x2xi64>) -> tensor<2x2xi64>
  %rs = ampc.reshape %a : tensor<2x1x2xi64> to tensor<4xi64>
  %fl = ampc.flatten %a {axis = 0 : i64} : (tensor<2x1x2xi64>) -> tensor<1x4xi64>
  %un = ampc.unsqueeze %rs {axes = array<i64: 1>} : (tensor<4xi64>) -> tensor<4x1xi64>
  %id = ampc.identity %rs : tensor<4xi64>
  return %sq, %rs, %fl, %un, %id : tensor<2x2xi64>, tensor<4xi64>, tensor<1x4xi64>, tensor<4x1xi64>, tensor<4xi64>
}

// -----

// CHECK-LABEL: func.func @expand
// CHECK-DAG: %[[E:.+]] = ampc.constant dense<{{\[}}[1, 2, 3], [1, 2, 3]]> : tensor<2x3xi64>
// CHECK-DAG: %[[S:.+]] = ampc.constant dense<1.500000e+00> : tensor<2x3xf32>
// CHECK-DAG: %[[C:.+]] = ampc.constant dense<{{\[}}{{\[}}[5, 5], [6, 6]], {{\[}}[5, 5], [6, 6]]]> : tensor<2x2x2xi64>
// CHECK-NOT: ampc.expand
// CHECK: return %[[E]], %[[S]], %[[C]]
func.func @expand() -> (tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x2x2xi64>) {
  %a = ampc.constant dense<[1, 2, 3]> : tensor<3xi64>
  %e = ampc.expand %a : tensor<3xi64> to tensor<2x3xi64>
  %s = ampc.constant dense<1.5> : tensor<1x1xf32>
  %es = ampc.expand %s : tensor<1x1xf32> to tensor<2x3xf32>
  %c = ampc.constant dense<[[5], [6]]> : tensor<2x1xi64>
  %ec = ampc.expand %c : tensor<2x1xi64> to tensor<2x2x2xi64>
  return %e, %es, %ec : tensor<2x3xi64>, tensor<2x3xf32>, tensor<2x2x2xi64>
}

// -----

// CHECK-LABEL: func.func @gather_and_concat
// CHECK-DAG: %[[G:.+]] = ampc.constant dense<{{\[}}[5, 6], [1, 2]]> : tensor<2x2xi64>
// CHECK-DAG: %[[G1:.+]] = ampc.constant dense<[2, 4, 6]> : tensor<3xi64>
// CHECK-DAG: %[[C:.+]] = ampc.constant dense<{{\[}}[1, 2, 9], [3, 4, 8]]> : tensor<2x3xi64>
// CHECK-NOT: ampc.gather
// CHECK-NOT: ampc.concat
// CHECK: return %[[G]], %[[G1]], %[[C]]
func.func @gather_and_concat() -> (tensor<2x2xi64>, tensor<3xi64>, tensor<2x3xi64>) {
  %t = ampc.constant dense<[[1, 2], [3, 4], [5, 6]]> : tensor<3x2xi64>
  // Negative indices count from the end.
  %i = ampc.constant dense<[2, -3]> : tensor<2xi32>
  %g = ampc.gather %t, %i : (tensor<3x2xi64>, tensor<2xi32>) -> tensor<2x2xi64>
  %one = ampc.constant dense<1> : tensor<i64>
  %g1 = ampc.gather %t, %one {axis = 1 : i64} : (tensor<3x2xi64>, tensor<i64>) -> tensor<3xi64>
  %a = ampc.constant dense<[[1, 2], [3, 4]]> : tensor<2x2xi64>
  %b = ampc.constant dense<[[9], [8]]> : tensor<2x1xi64>
  %c = ampc.concat %a, %b {axis = -1 : i64} : (tensor<2x2xi64>, tensor<2x1xi64>) -> tensor<2x3xi64>
  return %g, %g1, %c : tensor<2x2xi64>, tensor<3xi64>, tensor<2x3xi64>
}

// -----

// An out-of-range index is left for the runtime to report.
// CHECK-LABEL: func.func @gather_out_of_range
// CHECK: %[[G:.+]] = ampc.gather
// CHECK-NEXT: return %[[G]]
func.func @gather_out_of_range() -> tensor<2xi64> {
  %v = ampc.constant dense<[7, 8, 9]> : tensor<3xi64>
  %i = ampc.constant dense<[0, 3]> : tensor<2xi64>
  %g = ampc.gather %v, %i : (tensor<3xi64>, tensor<2xi64>) -> tensor<2xi64>
  return %g : tensor<2xi64>
}

// -----

// Shape ops whose results nobody reads are erased.
// CHECK-LABEL: func.func @dead_shape_ops
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK-NEXT: return %[[X]]
// CHECK-NOT: ampc.
func.func @dead_shape_ops(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  %s = ampc.shape %x : (tensor<2x3xf32>) -> tensor<2xi64>
  %c = ampc.cast %s : tensor<2xi64> to tensor<2xf32>
  %z = ampc.constant dense<0> : tensor<1xi64>
  %g = ampc.gather %s, %z : (tensor<2xi64>, tensor<1xi64>) -> tensor<1xi64>
  %u = ampc.unsqueeze %g {axes = array<i64: 0>} : (tensor<1xi64>) -> tensor<1x1xi64>
  return %x : tensor<2x3xf32>
}

// -----

// Ops on non-constant data stay, and so do ops with no folder on constants.
// CHECK-LABEL: func.func @not_folded
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>, %[[I:[^:]+]]: tensor<2xi64>)
// CHECK-DAG: %[[TWO:.+]] = ampc.constant dense<2> : tensor<i64>
// CHECK-DAG: %[[C:.+]] = ampc.constant dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
// CHECK: %[[A:.+]] = ampc.add %[[X]], %[[C]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[M:.+]] = ampc.mul %[[I]], %[[TWO]] : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
// CHECK-NEXT: %[[R:.+]] = ampc.relu %[[C]] : tensor<4xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.reshape %[[X]] : tensor<4xf32> to tensor<2x2xf32>
// CHECK-NEXT: %[[E:.+]] = ampc.expand %[[X]] : tensor<4xf32> to tensor<3x4xf32>
// CHECK-NEXT: return %[[A]], %[[M]], %[[R]], %[[S]], %[[E]]
func.func @not_folded(%x: tensor<4xf32>, %i: tensor<2xi64>) -> (tensor<4xf32>, tensor<2xi64>, tensor<4xf32>, tensor<2x2xf32>, tensor<3x4xf32>) {
  %c = ampc.constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %a = ampc.add %x, %c : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %two = ampc.constant dense<2> : tensor<i64>
  %m = ampc.mul %i, %two : (tensor<2xi64>, tensor<i64>) -> tensor<2xi64>
  %r = ampc.relu %c : tensor<4xf32>
  %s = ampc.reshape %x : tensor<4xf32> to tensor<2x2xf32>
  %e = ampc.expand %x : tensor<4xf32> to tensor<3x4xf32>
  return %a, %m, %r, %s, %e : tensor<4xf32>, tensor<2xi64>, tensor<4xf32>, tensor<2x2xf32>, tensor<3x4xf32>
}

// -----

// Folding is for shape arithmetic: constants above 4096 elements are kept.
// CHECK-LABEL: func.func @size_limit
// CHECK-DAG: %[[SMALL:.+]] = ampc.constant dense<2> : tensor<4096xi32>
// CHECK-DAG: %[[BIG:.+]] = ampc.constant dense<1> : tensor<4097xi32>
// CHECK: %[[SUM:.+]] = ampc.add %[[BIG]], %[[BIG]]
// CHECK-NEXT: return %[[SMALL]], %[[SUM]]
func.func @size_limit() -> (tensor<4096xi32>, tensor<4097xi32>) {
  %a = ampc.constant dense<1> : tensor<4096xi32>
  %s = ampc.add %a, %a : (tensor<4096xi32>, tensor<4096xi32>) -> tensor<4096xi32>
  %b = ampc.constant dense<1> : tensor<4097xi32>
  %t = ampc.add %b, %b : (tensor<4097xi32>, tensor<4097xi32>) -> tensor<4097xi32>
  return %s, %t : tensor<4096xi32>, tensor<4097xi32>
}

// -----

// Equal constants are merged.
// CHECK-LABEL: func.func @constants_deduplicated
// CHECK-NEXT: %[[C:.+]] = ampc.constant dense<[2, 3]> : tensor<2xi64>
// CHECK-NEXT: return %[[C]], %[[C]]
func.func @constants_deduplicated() -> (tensor<2xi64>, tensor<2xi64>) {
  %a = ampc.constant dense<[2, 3]> : tensor<2xi64>
  %b = ampc.constant dense<[2, 3]> : tensor<2xi64>
  return %a, %b : tensor<2xi64>, tensor<2xi64>
}

// -----

// Mod folds with ONNX's signs: fmod = 0 takes the divisor's sign (7 mod -3
// = -2, -7 mod 3 = 2), fmod = 1 the dividend's (-7 fmod 3 = -1, 7 fmod -3 =
// 1, -5 fmod 3 = -2; 5.5 fmod -2 = 1.5). A zero divisor is left for the
// kernel.
// CHECK-LABEL: func.func @mod_signs
// CHECK-DAG: %[[PY:.+]] = ampc.constant dense<[-2, 2, 1, 0]> : tensor<4xi64>
// CHECK-DAG: %[[C:.+]] = ampc.constant dense<[1, -1, -2, 0]> : tensor<4xi64>
// CHECK-DAG: %[[F:.+]] = ampc.constant dense<[1.500000e+00, -1.500000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[Z:.+]] = ampc.mod
// CHECK: return %[[PY]], %[[C]], %[[F]], %[[Z]]
func.func @mod_signs() -> (tensor<4xi64>, tensor<4xi64>, tensor<2xf32>, tensor<1xi64>) {
  %a = ampc.constant dense<[7, -7, 7, 6]> : tensor<4xi64>
  %b = ampc.constant dense<[-3, 3, 3, 3]> : tensor<4xi64>
  %py = ampc.mod %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %c1 = ampc.constant dense<[7, -7, -5, 6]> : tensor<4xi64>
  %c2 = ampc.constant dense<[-3, 3, 3, -3]> : tensor<4xi64>
  %c = ampc.mod %c1, %c2 {fmod = 1 : i64} : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %f1 = ampc.constant dense<[5.5, -5.5]> : tensor<2xf32>
  %f2 = ampc.constant dense<[-2.0, 2.0]> : tensor<2xf32>
  %f = ampc.mod %f1, %f2 {fmod = 1 : i64} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %z1 = ampc.constant dense<[4]> : tensor<1xi64>
  %z2 = ampc.constant dense<[0]> : tensor<1xi64>
  %z = ampc.mod %z1, %z2 : (tensor<1xi64>, tensor<1xi64>) -> tensor<1xi64>
  return %py, %c, %f, %z : tensor<4xi64>, tensor<4xi64>, tensor<2xf32>, tensor<1xi64>
}

// -----

// Transpose of a constant: output dimension d is input dimension perm[d].
// [[[0 1 2] [3 4 5]]] (1x2x3) with perm (2, 0, 1) is 3x1x2: [[0 3]] [[1 4]]
// [[2 5]]. The identity permutation is the operand itself.
// CHECK-LABEL: func.func @transpose_constant
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf32>)
// CHECK: %[[T:.+]] = ampc.constant dense<{{\[\[\[}}0, 3]], {{\[\[}}1, 4]], {{\[\[}}2, 5]]]> : tensor<3x1x2xi64>
// CHECK-NEXT: return %[[T]], %[[X]]
func.func @transpose_constant(%x: tensor<2x3xf32>) -> (tensor<3x1x2xi64>, tensor<2x3xf32>) {
  %a = ampc.constant dense<[[[0, 1, 2], [3, 4, 5]]]> : tensor<1x2x3xi64>
  %t = ampc.transpose %a {perm = array<i64: 2, 0, 1>} : (tensor<1x2x3xi64>) -> tensor<3x1x2xi64>
  %i = ampc.transpose %x {perm = array<i64: 0, 1>} : (tensor<2x3xf32>) -> tensor<2x3xf32>
  return %t, %i : tensor<3x1x2xi64>, tensor<2x3xf32>
}
