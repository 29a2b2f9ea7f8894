// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | FileCheck %s --check-prefix=CPU
// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" | FileCheck %s --check-prefix=CUDA
// RUN: not ampc-opt %s --split-input-file --ampc-plan-memory="target=tpu" 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: ampc-plan-memory: target must be cpu or cuda, got 'tpu'

// What the kernels need besides the tensors is placed by the plan, not by
// the emitters: the error slot first (offset 0 of every function), then
// with stage-inputs (the CUDA target) each input's device buffer, live
// until its last use, and each op's scratch block
// (ampc::emit::scratchLayout) after its results, free again once the op
// has run, so the next op's result can take its place.
//
// An f16 MatMul: on the CPU its kernels take FP32 copies of both operands
// (512 and 1024 bytes) and an FP32 accumulator (512 bytes): 2048 bytes at
// 320, after the result at 64; the Exp's result then reuses 320. cuBLASLt
// needs no scratch; the inputs are staged at 64 and 320 and x's buffer is
// free after the MatMul, its last use, so the Exp's result takes it.
// CPU-LABEL: func.func @matmul
// CPU-SAME: attributes {ampc.arena_bytes = 2368 : i64, ampc.error_slot = 0 : i64}
// CPU-NEXT: ampc.matmul {{.+}} {ampc.accumulate = f32, ampc.offsets = array<i64: 64>, ampc.scratch = array<i64: 320, 2048>}
// CPU-NEXT: ampc.exp {{.+}} {ampc.offsets = array<i64: 320>}
// CPU-NEXT: ampc.neg {{.+}} {ampc.offsets = array<i64: 64>}
// CUDA-LABEL: func.func @matmul
// CUDA-SAME: attributes {ampc.arena_bytes = 1088 : i64, ampc.error_slot = 0 : i64, ampc.input_offsets = array<i64: 64, 320>}
// CUDA-NEXT: ampc.matmul {{.+}} {ampc.accumulate = f32, ampc.offsets = array<i64: 832>}
// CUDA-NEXT: ampc.exp {{.+}} {ampc.offsets = array<i64: 64>}
// CUDA-NEXT: ampc.neg {{.+}} {ampc.offsets = array<i64: 320>}
func.func @matmul(%x: tensor<8x16xf16>, %w: tensor<16x16xf16>) -> tensor<8x16xf16> {
  %y = ampc.matmul %x, %w : (tensor<8x16xf16>, tensor<16x16xf16>) -> tensor<8x16xf16>
  %e = ampc.exp %y : tensor<8x16xf16>
  %n = ampc.neg %e : tensor<8x16xf16>
  return %n : tensor<8x16xf16>
}

// -----

// f64 data accumulates in f64 (ampc.accumulate = f64), and the scratch is
// sized for it: the reduction's offsets of the 16 reduced elements.
// CPU-LABEL: func.func @reduce_f64
// CPU-NEXT: ampc.reduce_sum {{.+}} {ampc.accumulate = f64, ampc.offsets = array<i64: 64>, ampc.scratch = array<i64: 128, 128>
func.func @reduce_f64(%x: tensor<4x16xf64>) -> tensor<4xf64> {
  %0 = ampc.reduce_sum %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x16xf64>) -> tensor<4xf64>
  return %0 : tensor<4xf64>
}
