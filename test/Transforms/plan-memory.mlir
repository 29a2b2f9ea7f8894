// RUN: ampc-opt %s --split-input-file --ampc-plan-memory | FileCheck %s
// The pass is declared on functions: it runs nested in func.func (as
// buildPipeline nests it), and a module pipeline does not take it.
// RUN: ampc-opt %s --split-input-file --pass-pipeline="builtin.module(func.func(ampc-plan-memory))" | FileCheck %s
// RUN: not ampc-opt %s --split-input-file --pass-pipeline="builtin.module(ampc-plan-memory)" 2>&1 | FileCheck %s --check-prefix=NOT-ON-MODULE
// NOT-ON-MODULE: restricted to 'func.func' on a PassManager intended to run on 'builtin.module'
// With guard-bytes (the CUDA target), every result is followed by at least
// that many bytes no live buffer uses (the CUDA execution on the CPU checks
// them, Guards.cpp): the 2 KiB buffers of @chain take 2112 bytes each.
// RUN: ampc-opt %s --split-input-file --ampc-plan-memory="guard-bytes=64" | FileCheck %s --check-prefix=GUARD
// GUARD-LABEL: func.func @chain
// GUARD-SAME: attributes {ampc.arena_bytes = 4288 : i64, ampc.error_slot = 0 : i64, ampc.guard_bytes = 64 : i64}
// GUARD-NEXT: ampc.exp %{{.+}} {ampc.offsets = array<i64: 64>}
// GUARD-NEXT: ampc.neg %{{.+}} {ampc.offsets = array<i64: 2176>}
// GUARD-NEXT: ampc.reshape
// GUARD-NEXT: ampc.sqrt %{{.+}} {ampc.offsets = array<i64: 64>}
// GUARD-NEXT: ampc.tanh %{{.+}} {ampc.offsets = array<i64: 2176>}

// ampc-plan-memory gives each buffer an offset in one arena (64-byte
// aligned, best fit) and reuses a buffer once its value and every view of
// it are dead; an op's results never overlap its operands. Every arena
// starts with the 8-byte error slot (ampc.error_slot = 0), so the first
// buffer is at 64. An op whose kernels need scratch (the layer norm's
// scale and bias in the compute type, below) gets a block after its
// results, free again once it has run (scratch.mlir).

// A chain of 2 KiB tensors needs two buffers that alternate, not four. The
// view (reshape) shares its operand's buffer, which keeps %b alive until
// the last use of the view.
// CHECK-LABEL: func.func @chain
// CHECK-SAME: attributes {ampc.arena_bytes = 4160 : i64, ampc.error_slot = 0 : i64}
// CHECK-NEXT: ampc.exp %{{.+}} {ampc.offsets = array<i64: 64>}
// CHECK-NEXT: ampc.neg %{{.+}} {ampc.offsets = array<i64: 2112>}
// CHECK-NEXT: ampc.reshape %{{.+}} : tensor<8x64xf32> to tensor<512xf32>
// CHECK-NEXT: ampc.sqrt %{{.+}} {ampc.offsets = array<i64: 64>}
// CHECK-NEXT: ampc.tanh %{{.+}} {ampc.offsets = array<i64: 2112>}
func.func @chain(%x: tensor<8x64xf32>) -> tensor<512xf32> {
  %a = ampc.exp %x : tensor<8x64xf32>
  %b = ampc.neg %a : tensor<8x64xf32>
  %v = ampc.reshape %b : tensor<8x64xf32> to tensor<512xf32>
  %c = ampc.sqrt %v : tensor<512xf32>
  %d = ampc.tanh %c : tensor<512xf32>
  return %d : tensor<512xf32>
}

// -----

// A value read later keeps its buffer. Freed neighbours merge, so the
// 4 KiB concat fits where the two 2 KiB buffers were; an allocation that
// fits nowhere grows the arena from a free block at its end. Unused extra
// results (the layer norm's statistics) still get buffers. Constants and
// parameter loads take no arena space.
// CHECK-LABEL: func.func @merge
// CHECK-SAME: attributes {ampc.arena_bytes = 8896 : i64, ampc.error_slot = 0 : i64}
// CHECK-NEXT: ampc.exp {{.+}} {ampc.offsets = array<i64: 64>}
// CHECK-NEXT: ampc.neg {{.+}} {ampc.offsets = array<i64: 2112>}
// CHECK-NEXT: ampc.add {{.+}} {ampc.offsets = array<i64: 4160>}
// CHECK-NEXT: ampc.concat {{.+}} {ampc.offsets = array<i64: 64>
// CHECK-NEXT: ampc.constant
// CHECK-NEXT: ampc.load_parameter @s : tensor<64xf32>
// CHECK-NEXT: ampc.layer_normalization {{.+}} {ampc.offsets = array<i64: 4160, 8256, 8320>, ampc.scratch = array<i64: 8384, 512>}
ampc.parameter @s : tensor<64xf32> = dense<1.0> : tensor<64xf32>
func.func @merge(%x: tensor<8x64xf32>) -> tensor<16x64xf32> {
  %a = ampc.exp %x : tensor<8x64xf32>
  %b = ampc.neg %a : tensor<8x64xf32>
  %c = ampc.add %a, %b : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
  %o = ampc.concat %c, %c {axis = 0 : i64} : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
  %k = ampc.constant dense<2.0> : tensor<64xf32>
  %s = ampc.load_parameter @s : tensor<64xf32>
  %y, %m, %r = ampc.layer_normalization %o, %s, %k {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x1xf32>)
  return %y : tensor<16x64xf32>
}
