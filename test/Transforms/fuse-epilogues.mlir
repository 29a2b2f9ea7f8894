// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-plan-memory | FileCheck %s --check-prefix=PLAN
// RUN: ampc-opt %s --split-input-file --ampc-plan-memory | FileCheck %s --check-prefix=UNFUSED

// A row-vector bias and a lone Relu: one Gemm with the relu_bias epilogue
// whose result the Relu's users take.
// CHECK-LABEL: func.func @relu_bias
// CHECK-NEXT: %[[X:.+]] = ampc.neg %arg0
// CHECK-NEXT: %[[G:.+]] = ampc.gemm %[[X]], %arg1, %arg2 {epilogue = #ampc<epilogue relu_bias>, transB = 1 : i64}
// CHECK-NOT: ampc.relu
// CHECK: return %[[G]]
//
// The plan (after the error slot at 0): x (256 bytes) at 64 lives until
// the Gemm, whose result goes to 320 and its scratch (the CPU kernels'
// accumulator) to 576. Without the pass the Relu's buffer took x's place
// at 64, the Gemm's input: a GEMM writing the Relu's buffer would overlap
// its input. The fused result is the Gemm's own, planned apart from its
// operands.
// PLAN-LABEL: func.func @relu_bias
// PLAN: ampc.neg %arg0 {ampc.offsets = array<i64: 64>}
// PLAN-NEXT: ampc.gemm {{.*}}{ampc.offsets = array<i64: 320>, ampc.scratch = array<i64: 576, 256>, epilogue = #ampc<epilogue relu_bias>, transB = 1 : i64}
// PLAN-NEXT: return
// UNFUSED-LABEL: func.func @relu_bias
// UNFUSED: ampc.neg %arg0 {ampc.offsets = array<i64: 64>}
// UNFUSED-NEXT: ampc.gemm {{.*}}{ampc.offsets = array<i64: 320>, ampc.scratch = array<i64: 576, 256>, transB = 1 : i64}
// UNFUSED-NEXT: ampc.relu {{.*}}{ampc.offsets = array<i64: 64>}
func.func @relu_bias(%a: tensor<4x16xf32>, %w: tensor<16x16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %x = ampc.neg %a : tensor<4x16xf32>
  %g = ampc.gemm %x, %w, %b {transB = 1 : i64} : (tensor<4x16xf32>, tensor<16x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %r = ampc.relu %g : tensor<4x16xf32>
  return %r : tensor<4x16xf32>
}

// -----

// No C: the relu epilogue. A [1, N] C is a bias too; f16 like f32.
// CHECK-LABEL: func.func @relu_no_c
// CHECK-NEXT: %[[G:.+]] = ampc.gemm %arg0, %arg1 {epilogue = #ampc<epilogue relu>}
// CHECK-NEXT: %[[H:.+]] = ampc.gemm %[[G]], %arg1, %arg2 {epilogue = #ampc<epilogue bias>}
// CHECK-NEXT: return %[[H]]
func.func @relu_no_c(%a: tensor<4x8xf16>, %w: tensor<8x8xf16>, %b: tensor<1x8xf16>) -> tensor<4x8xf16> {
  %g = ampc.gemm %a, %w : (tensor<4x8xf16>, tensor<8x8xf16>) -> tensor<4x8xf16>
  %r = ampc.relu %g : tensor<4x8xf16>
  %h = ampc.gemm %r, %w, %b : (tensor<4x8xf16>, tensor<8x8xf16>, tensor<1x8xf16>) -> tensor<4x8xf16>
  return %h : tensor<4x8xf16>
}

// -----

// Left alone: a C that is not a row vector (the Relu would come after the
// sum, so it stays too), beta 2, a single column, a Gemm with a second
// user (bias only, the Relu stays).
// CHECK-LABEL: func.func @not_fused
// CHECK-NEXT: %[[G0:.+]] = ampc.gemm %arg0, %arg1, %arg2 : (
// CHECK-NEXT: ampc.relu %[[G0]]
// CHECK-NEXT: %[[G1:.+]] = ampc.gemm %arg0, %arg1, %arg3 {beta = 2.000000e+00 : f32} : (
// CHECK-NEXT: ampc.relu %[[G1]]
// CHECK-NEXT: ampc.gemm %arg0, %arg4, %arg5 : (
// CHECK-NEXT: %[[G3:.+]] = ampc.gemm %arg0, %arg1, %arg3 {epilogue = #ampc<epilogue bias>} : (
// CHECK-NEXT: ampc.relu %[[G3]]
// CHECK-NEXT: return
func.func @not_fused(%a: tensor<4x8xf32>, %w: tensor<8x8xf32>, %c: tensor<4x8xf32>, %b: tensor<8xf32>,
                     %w1: tensor<8x1xf32>, %b1: tensor<1xf32>)
    -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %g0 = ampc.gemm %a, %w, %c : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %r0 = ampc.relu %g0 : tensor<4x8xf32>
  %g1 = ampc.gemm %a, %w, %b {beta = 2.0 : f32} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r1 = ampc.relu %g1 : tensor<4x8xf32>
  %g2 = ampc.gemm %a, %w1, %b1 : (tensor<4x8xf32>, tensor<8x1xf32>, tensor<1xf32>) -> tensor<4x1xf32>
  %g3 = ampc.gemm %a, %w, %b : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %r3 = ampc.relu %g3 : tensor<4x8xf32>
  return %r0, %r1, %g2, %g3, %r3 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A Linear on a 3-D input (issue 37, item 3): the MatMul by a 2-D weight,
// the Add of a bias over the last axis and the Relu become one 2-D Gemm
// over all 6 rows with the relu_bias epilogue, between two reshapes. The
// bias may come first in the Add, as PyTorch exports it.
// CHECK-LABEL: func.func @linear_nd
// CHECK-NEXT: %[[A:.+]] = ampc.reshape %arg0 : tensor<2x3x4xf16> to tensor<6x4xf16>
// CHECK-NEXT: %[[G:.+]] = ampc.gemm %[[A]], %arg1, %arg2 {epilogue = #ampc<epilogue relu_bias>, foo} : (tensor<6x4xf16>, tensor<4x8xf16>, tensor<8xf16>) -> tensor<6x8xf16>
// CHECK-NEXT: %[[Y:.+]] = ampc.reshape %[[G]] : tensor<6x8xf16> to tensor<2x3x8xf16>
// CHECK-NEXT: return %[[Y]]
func.func @linear_nd(%x: tensor<2x3x4xf16>, %w: tensor<4x8xf16>, %b: tensor<8xf16>) -> tensor<2x3x8xf16> {
  %m = ampc.matmul %x, %w {foo} : (tensor<2x3x4xf16>, tensor<4x8xf16>) -> tensor<2x3x8xf16>
  %y = ampc.add %b, %m : (tensor<8xf16>, tensor<2x3x8xf16>) -> tensor<2x3x8xf16>
  %r = ampc.relu %y : tensor<2x3x8xf16>
  return %r : tensor<2x3x8xf16>
}

// -----

// Without a bias: one 2-D Gemm all the same (a reshape of a reshape reads
// the original); a [1, 1, N] bias is reshaped to a vector; an Add of
// another shape or type stays, as do a MatMul with a second user (its Add
// then stays apart) and a batched MatMul of two 3-D operands.
// CHECK-LABEL: func.func @linear_nd_partly
// CHECK-NEXT: %[[X:.+]] = ampc.reshape %arg0 : tensor<24xf32> to tensor<2x3x4xf32>
// CHECK-NEXT: %[[A0:.+]] = ampc.reshape %arg0 : tensor<24xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[G0:.+]] = ampc.gemm %[[A0]], %arg1 : (tensor<6x4xf32>, tensor<4x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT: %[[Y0:.+]] = ampc.reshape %[[G0]] : tensor<6x8xf32> to tensor<2x3x8xf32>
// CHECK-NEXT: %[[A1:.+]] = ampc.reshape %arg0 : tensor<24xf32> to tensor<6x4xf32>
// CHECK-NEXT: %[[B1:.+]] = ampc.reshape %arg2 : tensor<1x1x8xf32> to tensor<8xf32>
// CHECK-NEXT: %[[G1:.+]] = ampc.gemm %[[A1]], %arg1, %[[B1]] {epilogue = #ampc<epilogue bias>}
// CHECK-NEXT: %[[Y1:.+]] = ampc.reshape %[[G1]] : tensor<6x8xf32> to tensor<2x3x8xf32>
// CHECK: %[[G2:.+]] = ampc.gemm
// CHECK-NEXT: %[[Y2:.+]] = ampc.reshape %[[G2]]
// CHECK-NEXT: ampc.add %[[Y2]], %arg3 :
// CHECK: %[[G3:.+]] = ampc.gemm
// CHECK-NEXT: %[[Y3:.+]] = ampc.reshape %[[G3]]
// CHECK-NEXT: ampc.add %[[Y3]], %arg2 :
// CHECK-NEXT: ampc.neg %[[Y3]]
// CHECK-NEXT: ampc.matmul %[[X]], %arg4 :
// CHECK-NEXT: return
func.func @linear_nd_partly(%flat: tensor<24xf32>, %w: tensor<4x8xf32>, %b: tensor<1x1x8xf32>,
                            %c: tensor<3x8xf32>, %w3: tensor<2x4x8xf32>)
    -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %x = ampc.reshape %flat : tensor<24xf32> to tensor<2x3x4xf32>
  %m0 = ampc.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %m1 = ampc.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %y1 = ampc.add %m1, %b : (tensor<2x3x8xf32>, tensor<1x1x8xf32>) -> tensor<2x3x8xf32>
  %m2 = ampc.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %y2 = ampc.add %m2, %c : (tensor<2x3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  %m3 = ampc.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x8xf32>) -> tensor<2x3x8xf32>
  %y3 = ampc.add %m3, %b : (tensor<2x3x8xf32>, tensor<1x1x8xf32>) -> tensor<2x3x8xf32>
  %n3 = ampc.neg %m3 : tensor<2x3x8xf32>
  %m4 = ampc.matmul %x, %w3 : (tensor<2x3x4xf32>, tensor<2x4x8xf32>) -> tensor<2x3x8xf32>
  return %m0, %y1, %y2, %y3, %n3, %m4 : tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>, tensor<2x3x8xf32>
}
