// RUN: ampc-opt %s --split-input-file --ampc-fuse | FileCheck %s
// The pass is declared on functions: it runs nested in func.func (as
// buildPipeline nests it), and a module pipeline does not take it.
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-fuse))" | FileCheck %s
// RUN: not ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-fuse)" 2>&1 | FileCheck %s --check-prefix=NOT-ON-MODULE
// NOT-ON-MODULE: restricted to 'func.func' on a PassManager intended to run on 'builtin.module'

// ampc-fuse groups elementwise chains into ampc.fusion ops: a producer
// moves in when it is elementwise, has the group's result shape and all its
// users are in the group; a small broadcast producer, or a chain whose
// copy makes the group read less, is copied in (the cases at the end).
// Operands from outside may broadcast.

// Bias add, ReLU and the cast to f16 become one loop nest; the bias
// broadcasts as an operand of the fusion.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: (%[[X:.+]]: tensor<8x64xf32>, %[[B:.+]]: tensor<64xf32>)
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[X]], %[[B]]) : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf16> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<8x64xf32>, %[[A1:.+]]: tensor<64xf32>):
// CHECK-NEXT:   %[[S:.+]] = ampc.add %[[A0]], %[[A1]]
// CHECK-NEXT:   %[[R:.+]] = ampc.relu %[[S]] : tensor<8x64xf32>
// CHECK-NEXT:   %[[C:.+]] = ampc.cast %[[R]] : tensor<8x64xf32> to tensor<8x64xf16>
// CHECK-NEXT:   ampc.yield %[[C]] : tensor<8x64xf16>
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @chain(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> tensor<8x64xf16> {
  %0 = ampc.add %x, %b : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %1 = ampc.relu %0 : tensor<8x64xf32>
  %2 = ampc.cast %1 : tensor<8x64xf32> to tensor<8x64xf16>
  return %2 : tensor<8x64xf16>
}

// -----

// A value needed outside the chain (here a function result) is not fused
// into it: it is computed once, stored, and read by the fusion.
// CHECK-LABEL: func.func @shared_value
// CHECK-NEXT: %[[E:.+]] = ampc.exp %{{.+}} : tensor<16xf32>
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[E]]) : (tensor<16xf32>) -> tensor<16xf32> {
// CHECK:        ampc.neg
// CHECK-NEXT:   ampc.sqrt
// CHECK-NEXT:   ampc.yield
// CHECK:      return %[[F]], %[[E]]
func.func @shared_value(%x: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %e = ampc.exp %x : tensor<16xf32>
  %n = ampc.neg %e : tensor<16xf32>
  %s = ampc.sqrt %n : tensor<16xf32>
  return %s, %e : tensor<16xf32>, tensor<16xf32>
}

// -----

// A small producer of a smaller (broadcast) shape is computed inside the
// chain, at the chain's shape: its operands are expanded to it (the body
// keeps the result's shape everywhere), and the original, read by nothing
// else, is erased. A reshape (a view) and a matmul end chains.
// CHECK-LABEL: func.func @broadcast_producer
// CHECK-SAME: (%[[X:.+]]: tensor<8x32xf32>, %[[W:.+]]: tensor<32x64xf32>, %[[B:.+]]: tensor<64xf32>, %[[K:.+]]: tensor<64xf32>)
// CHECK-NEXT: %[[M:.+]] = ampc.matmul
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[B]], %[[K]], %[[M]]) : (tensor<64xf32>, tensor<64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32> {
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<64xf32>, %[[A1:.+]]: tensor<64xf32>, %[[A2:.+]]: tensor<8x64xf32>):
// CHECK-NEXT:   %[[E0:.+]] = ampc.expand %[[A0]] : tensor<64xf32> to tensor<8x64xf32>
// CHECK-NEXT:   %[[E1:.+]] = ampc.expand %[[A1]] : tensor<64xf32> to tensor<8x64xf32>
// CHECK-NEXT:   %[[S:.+]] = ampc.mul %[[E0]], %[[E1]] : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT:   %[[SUM:.+]] = ampc.add %[[A2]], %[[S]] : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT:   ampc.tanh %[[SUM]]
// CHECK-NEXT:   ampc.yield
// CHECK:      %[[R:.+]] = ampc.reshape %[[F]]
// CHECK-NEXT: %[[N:.+]] = ampc.neg %[[R]] : tensor<512xf32>
// CHECK-NEXT: return %[[N]]
func.func @broadcast_producer(%x: tensor<8x32xf32>, %w: tensor<32x64xf32>, %b: tensor<64xf32>, %k: tensor<64xf32>) -> tensor<512xf32> {
  %s = ampc.mul %b, %k : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>
  %m = ampc.matmul %x, %w : (tensor<8x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
  %a = ampc.add %m, %s : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %t = ampc.tanh %a : tensor<8x64xf32>
  %r = ampc.reshape %t : tensor<8x64xf32> to tensor<512xf32>
  %n = ampc.neg %r : tensor<512xf32>
  return %n : tensor<512xf32>
}

// -----

// A diamond: both branches and the join fuse, the shared input is loaded
// once per element; integer and boolean ops (Equal, Where) fuse too.
// CHECK-LABEL: func.func @diamond
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%{{.+}}, %{{.+}}) : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.relu
// CHECK-NEXT:   ampc.sigmoid
// CHECK-NEXT:   ampc.equal
// CHECK-NEXT:   ampc.where
// CHECK-NEXT:   ampc.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @diamond(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = ampc.relu %x : tensor<4x4xf32>
  %s = ampc.sigmoid %x : tensor<4x4xf32>
  %e = ampc.equal %r, %y : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xi1>
  %w = ampc.where %e, %r, %s : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %w : tensor<4x4xf32>
}

// -----

// A producer that reads a parameter in place does not move past a store to
// it: the gradient mask of @b reads @a, and @a is stored before the mask's
// consumer (Min's backward under --accumulate=2; ampc-fuzz-pipeline found
// it, and the emitters refused the step: "reads 'a' after the step stored
// it"). The mask stays before the store; where and add still fuse. The
// mask that reads @c, stored only after its group, joins it.
// CHECK-LABEL: func.func @no_read_past_store
// CHECK: %[[A:.+]] = ampc.load_parameter @a
// CHECK: %[[C:.+]] = ampc.load_parameter @c
// CHECK-NEXT: %[[M:.+]] = ampc.less %{{.+}}, %[[A]]
// CHECK-NEXT: ampc.store @a
// CHECK-NEXT: ampc.fusion(%[[M]], %{{.+}}) :
// CHECK-NOT: ampc.less
// CHECK: ampc.store @b
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[C]], %{{.+}}) :
// CHECK-NEXT: ^bb0
// CHECK-NEXT: ampc.less
// CHECK: ampc.store @c, %[[F]]
ampc.parameter @a : tensor<3xf32> = dense<1.0> : tensor<3xf32>
ampc.parameter @b : tensor<3xf32> = dense<2.0> : tensor<3xf32>
ampc.parameter @c : tensor<3xf32> = dense<3.0> : tensor<3xf32>
func.func @no_read_past_store(%g: tensor<3xf32>, %h: tensor<3xf32>) {
  %a = ampc.load_parameter @a : tensor<3xf32>
  %b = ampc.load_parameter @b : tensor<3xf32>
  %c = ampc.load_parameter @c : tensor<3xf32>
  %mask = ampc.less %b, %a : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  ampc.store @a, %g : tensor<3xf32>
  %picked = ampc.where %mask, %g, %h : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %sum = ampc.add %picked, %b : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  ampc.store @b, %sum : tensor<3xf32>
  %mask2 = ampc.less %c, %h : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xi1>
  %picked2 = ampc.where %mask2, %g, %h : (tensor<3xi1>, tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  ampc.store @c, %picked2 : tensor<3xf32>
  return
}

// -----

// Small broadcast producers (a per-row mask of the loss, a scalar through
// a reshape that only adds unit dimensions) are copied into each group
// that reads them, computed at the group's shape. The mask, also a
// function result, stays; the scalar and its reshape, read by nothing
// else once both groups have their copies, are erased.
// CHECK-LABEL: func.func @broadcast_copies
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[Y:.+]]: tensor<2x8xf32>, %[[IDX:.+]]: tensor<2x1xi64>, %[[ROWS:.+]]: tensor<i64>, %[[S:.+]]: tensor<f32>)
// CHECK-NEXT: %[[M:.+]] = ampc.less %[[IDX]], %[[ROWS]] : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi1>
// CHECK-NEXT: %[[F1:.+]] = ampc.fusion(%[[IDX]], %[[ROWS]], %[[S]], %[[X]], %[[Y]])
// CHECK-NEXT: ^bb0(%[[A0:.+]]: tensor<2x1xi64>, %[[A1:.+]]: tensor<i64>, %[[A2:.+]]: tensor<f32>, %[[A3:.+]]: tensor<2x8xf32>, %[[A4:.+]]: tensor<2x8xf32>):
// CHECK-NEXT:   %[[E0:.+]] = ampc.expand %[[A0]] : tensor<2x1xi64> to tensor<2x8xi64>
// CHECK-NEXT:   %[[E1:.+]] = ampc.expand %[[A1]] : tensor<i64> to tensor<2x8xi64>
// CHECK-NEXT:   %[[L:.+]] = ampc.less %[[E0]], %[[E1]] : (tensor<2x8xi64>, tensor<2x8xi64>) -> tensor<2x8xi1>
// CHECK-NEXT:   %[[E2:.+]] = ampc.expand %[[A2]] : tensor<f32> to tensor<2x8xf32>
// CHECK-NEXT:   %[[K:.+]] = ampc.mul %[[E2]], %[[E2]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:   %[[P:.+]] = ampc.mul %[[A3]], %[[K]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:   %[[W:.+]] = ampc.where %[[L]], %[[P]], %[[A4]] : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:   ampc.yield %[[W]]
// CHECK-NEXT: }
// CHECK-NEXT: %[[F2:.+]] = ampc.fusion(%[[IDX]], %[[ROWS]], %[[S]], %[[Y]], %[[X]])
// CHECK:        ampc.less
// CHECK:        ampc.mul
// CHECK-NEXT:   ampc.where
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F1]], %[[F2]], %[[M]]
func.func @broadcast_copies(%x: tensor<2x8xf32>, %y: tensor<2x8xf32>, %idx: tensor<2x1xi64>, %rows: tensor<i64>, %s: tensor<f32>) -> (tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xi1>) {
  %m = ampc.less %idx, %rows : (tensor<2x1xi64>, tensor<i64>) -> tensor<2x1xi1>
  %k = ampc.mul %s, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %kr = ampc.reshape %k : tensor<f32> to tensor<1x1xf32>
  %a = ampc.mul %x, %kr : (tensor<2x8xf32>, tensor<1x1xf32>) -> tensor<2x8xf32>
  %b = ampc.where %m, %a, %y : (tensor<2x1xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %c = ampc.where %m, %y, %x : (tensor<2x1xi1>, tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %d = ampc.mul %c, %kr : (tensor<2x8xf32>, tensor<1x1xf32>) -> tensor<2x8xf32>
  return %b, %d, %m : tensor<2x8xf32>, tensor<2x8xf32>, tensor<2x1xi1>
}

// -----

// A broadcast producer over 4096 elements is not copied: computing it
// once per element of its reader would repeat real work. It stays a
// kernel, and the chain reads it as a broadcast operand.
// CHECK-LABEL: func.func @large_broadcast
// CHECK-NEXT: %[[E:.+]] = ampc.exp %{{.+}} : tensor<4097xf32>
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%{{.+}}, %[[E]]) : (tensor<2x4097xf32>, tensor<4097xf32>) -> tensor<2x4097xf32> {
// CHECK-NOT:    ampc.exp
// CHECK:      return %[[F]], %[[E]]
func.func @large_broadcast(%x: tensor<2x4097xf32>, %b: tensor<4097xf32>) -> (tensor<2x4097xf32>, tensor<4097xf32>) {
  %e = ampc.exp %b : tensor<4097xf32>
  %a = ampc.add %x, %e : (tensor<2x4097xf32>, tensor<4097xf32>) -> tensor<2x4097xf32>
  %t = ampc.tanh %a : tensor<2x4097xf32>
  return %t, %e : tensor<2x4097xf32>, tensor<4097xf32>
}

// -----

// The erf GELU (torch's export) and its backward: the division and the
// erf are read by both, so neither could move into one of them, and the
// GELU was three forward kernels with two tensors stored for the backward.
// A copy of the chain from x makes each group read x, which it reads
// already, instead of the stored tensors: one forward kernel, one
// backward kernel, nothing stored between them but x.
// CHECK-LABEL: func.func @gelu
// CHECK-SAME: (%[[X:.+]]: tensor<4x64xf16>, %[[DY:.+]]: tensor<4x64xf16>)
// CHECK-COUNT-4: ampc.constant
// CHECK-NEXT: %[[Y:.+]] = ampc.fusion(%[[X]], {{.+}}) :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.div
// CHECK-NEXT:   ampc.erf
// CHECK-NEXT:   ampc.add
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.yield
// CHECK-NEXT: }
// CHECK-NEXT: %[[DX:.+]] = ampc.fusion(%[[X]], %{{.+}}, %{{.+}}, %[[DY]], %{{.+}}, %{{.+}}) :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.div
// CHECK-NEXT:   ampc.erf
// CHECK-NEXT:   ampc.add
// CHECK:        ampc.exp
// CHECK:        ampc.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[Y]], %[[DX]]
func.func @gelu(%x: tensor<4x64xf16>, %dy: tensor<4x64xf16>) -> (tensor<4x64xf16>, tensor<4x64xf16>) {
  %sqrt2 = ampc.constant dense<1.414060e+00> : tensor<f16>
  %one = ampc.constant dense<1.0> : tensor<f16>
  %half = ampc.constant dense<0.5> : tensor<f16>
  %k = ampc.constant dense<1.127930e+00> : tensor<f16>
  %d = ampc.div %x, %sqrt2 : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %e = ampc.erf %d : tensor<4x64xf16>
  %a = ampc.add %e, %one : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %m = ampc.mul %x, %a : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  %y = ampc.mul %m, %half : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %g = ampc.mul %dy, %half : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %g1 = ampc.mul %g, %a : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  %g2 = ampc.mul %g, %x : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  %sq = ampc.mul %d, %d : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  %n = ampc.neg %sq : tensor<4x64xf16>
  %ex = ampc.exp %n : tensor<4x64xf16>
  %de = ampc.mul %ex, %k : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %g3 = ampc.mul %g2, %de : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  %g4 = ampc.div %g3, %sqrt2 : (tensor<4x64xf16>, tensor<f16>) -> tensor<4x64xf16>
  %dx = ampc.add %g1, %g4 : (tensor<4x64xf16>, tensor<4x64xf16>) -> tensor<4x64xf16>
  return %y, %dx : tensor<4x64xf16>, tensor<4x64xf16>
}

// -----

// A shared producer whose copy would read two tensors the group does not
// read, instead of one, is not copied: it stays a kernel (here also a
// function result) and the chain reads its result. (@shared_value: one
// for one is no gain either.)
// CHECK-LABEL: func.func @more_reads
// CHECK-NEXT: %[[S:.+]] = ampc.add %{{.+}}, %{{.+}} : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[S]], %{{.+}}) :
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.neg
// CHECK-NEXT:   ampc.yield
// CHECK:      return %[[F]], %[[S]]
func.func @more_reads(%x: tensor<16xf32>, %y: tensor<16xf32>, %z: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %s = ampc.add %x, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %m = ampc.mul %s, %z : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %n = ampc.neg %m : tensor<16xf32>
  return %n, %s : tensor<16xf32>, tensor<16xf32>
}

// -----

// A broadcast producer that reads a state stored before its reader is not
// copied past the store: the copy would read the stored value.
// CHECK-LABEL: func.func @stored_scalar
// CHECK: %[[L:.+]] = ampc.load_state @t
// CHECK-NEXT: %[[K:.+]] = ampc.mul %[[L]], %[[L]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: ampc.store @t
// CHECK-NEXT: ampc.fusion(%{{.+}}, %[[K]]) : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.exp
// CHECK-NEXT:   ampc.yield
ampc.state @t : tensor<f32> = dense<1.0> : tensor<f32>
func.func @stored_scalar(%x: tensor<4xf32>, %v: tensor<f32>) -> tensor<4xf32> {
  %l = ampc.load_state @t : tensor<f32>
  %k = ampc.mul %l, %l : (tensor<f32>, tensor<f32>) -> tensor<f32>
  ampc.store @t, %v : tensor<f32>
  %y = ampc.mul %x, %k : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %z = ampc.exp %y : tensor<4xf32>
  return %z : tensor<4xf32>
}

// -----

// A group copies at most 16 ops (ampc::kMaxCopiedOps): of a chain of 17
// scalar negations, the last 16 are computed in the fusion and the first
// stays a kernel the fusion reads.
// CHECK-LABEL: func.func @cap
// CHECK-NEXT: %[[N1:.+]] = ampc.neg %{{.+}} : tensor<f32>
// CHECK-NEXT: %[[F:.+]] = ampc.fusion(%[[N1]], %{{.+}}) : (tensor<f32>, tensor<4xf32>) -> tensor<4xf32> {
// CHECK-NEXT: ^bb0
// CHECK-NEXT:   ampc.expand
// CHECK-COUNT-16: ampc.neg %{{.+}} : tensor<4xf32>
// CHECK-NEXT:   ampc.mul
// CHECK-NEXT:   ampc.yield
// CHECK-NEXT: }
// CHECK-NEXT: return %[[F]]
func.func @cap(%x: tensor<4xf32>, %s: tensor<f32>) -> tensor<4xf32> {
  %n1 = ampc.neg %s : tensor<f32>
  %n2 = ampc.neg %n1 : tensor<f32>
  %n3 = ampc.neg %n2 : tensor<f32>
  %n4 = ampc.neg %n3 : tensor<f32>
  %n5 = ampc.neg %n4 : tensor<f32>
  %n6 = ampc.neg %n5 : tensor<f32>
  %n7 = ampc.neg %n6 : tensor<f32>
  %n8 = ampc.neg %n7 : tensor<f32>
  %n9 = ampc.neg %n8 : tensor<f32>
  %n10 = ampc.neg %n9 : tensor<f32>
  %n11 = ampc.neg %n10 : tensor<f32>
  %n12 = ampc.neg %n11 : tensor<f32>
  %n13 = ampc.neg %n12 : tensor<f32>
  %n14 = ampc.neg %n13 : tensor<f32>
  %n15 = ampc.neg %n14 : tensor<f32>
  %n16 = ampc.neg %n15 : tensor<f32>
  %n17 = ampc.neg %n16 : tensor<f32>
  %y = ampc.mul %x, %n17 : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
