// ampc-insert-all-reduce (issue 41): the gradients the first reader (the
// unscale here; the optimizer updates at fp32) takes are bucketed in the
// order the backward computes them, each bucket's start right after its
// last gradient, every wait just before the reader, which reads the means.
// RUN: ampc-opt --ampc-insert-all-reduce %s | FileCheck %s
// RUN: ampc-opt --ampc-insert-all-reduce="bucket-bytes=40" %s | FileCheck %s --check-prefix=SMALL
// RUN: ampc-opt --ampc-insert-all-reduce="dtype=fp32" %s | FileCheck %s --check-prefix=F32
// RUN: not ampc-opt --ampc-insert-all-reduce="dtype=fp8" %s 2>&1 | FileCheck %s --check-prefix=BAD

// One bucket (25 MiB): packed in f16 (the step's 16-bit type), 24 + 3 + 8
// elements in the order computed: dW2, db2, db1.
// CHECK-LABEL: func.func @step
// CHECK: %[[W2:.+]] = ampc.gemm
// CHECK-NEXT: %[[B2:.+]] = ampc.reduce_sum
// CHECK-NEXT: %[[R:.+]] = ampc.relu
// CHECK-NEXT: %[[B1:.+]] = ampc.reduce_sum %[[R]]
// CHECK-NEXT: %[[P:.+]] = ampc.all_reduce_start %[[W2]], %[[B2]], %[[B1]] {ampc.overlap = 0 : i64, bucket = 0 : i64} : (tensor<3x8xf32>, tensor<3xf32>, tensor<8xf32>) -> tensor<35xf16>
// CHECK-NEXT: %[[M:.+]]:3 = ampc.all_reduce_wait %[[P]], %[[W2]], %[[B2]], %[[B1]]
// CHECK-NEXT: ampc.unscale %arg2, %[[M]]#2, %[[M]]#1, %[[M]]#0
//
// Buckets of 40 bytes: dW2 (48 bytes) alone, started before the rest of the
// backward (3 ops overlap it), then db2 and db1 (22 bytes).
// SMALL: %[[W2:.+]] = ampc.gemm
// SMALL-NEXT: %[[P0:.+]] = ampc.all_reduce_start %[[W2]] {ampc.overlap = 3 : i64, bucket = 0 : i64} : (tensor<3x8xf32>) -> tensor<24xf16>
// SMALL-NEXT: ampc.reduce_sum
// SMALL-NEXT: ampc.relu
// SMALL-NEXT: ampc.reduce_sum
// SMALL-NEXT: %[[P1:.+]] = ampc.all_reduce_start {{.+}} {ampc.overlap = 0 : i64, bucket = 1 : i64} : (tensor<3xf32>, tensor<8xf32>) -> tensor<11xf16>
// SMALL-NEXT: ampc.all_reduce_wait %[[P0]]
// SMALL-NEXT: ampc.all_reduce_wait %[[P1]]
// SMALL-NEXT: ampc.unscale
//
// F32: ampc.all_reduce_start {{.+}} -> tensor<35xf32>
// BAD: error: ampc-insert-all-reduce: dtype must be auto, fp16, bf16 or fp32, got 'fp8'
func.func @step(%x: tensor<4x8xf16>, %dy: tensor<4x3xf16>, %scale: tensor<f32>) -> (tensor<8xf32>, tensor<3xf32>, tensor<3x8xf32>, tensor<i1>) {
  %gw2 = ampc.gemm %dy, %x {transA = 1 : i64} : (tensor<4x3xf16>, tensor<4x8xf16>) -> tensor<3x8xf32>
  %gb2 = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x3xf16>) -> tensor<3xf32>
  %r = ampc.relu %x : tensor<4x8xf16>
  %gb1 = ampc.reduce_sum %r {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<8xf32>
  %u:3, %found = ampc.unscale %scale, %gb1, %gb2, %gw2 : (tensor<f32>, tensor<8xf32>, tensor<3xf32>, tensor<3x8xf32>) -> (tensor<8xf32>, tensor<3xf32>, tensor<3x8xf32>, tensor<i1>)
  return %u#0, %u#1, %u#2, %found : tensor<8xf32>, tensor<3xf32>, tensor<3x8xf32>, tensor<i1>
}

// A function without gradients is left alone.
// CHECK-LABEL: func.func @forward
// CHECK-NOT: ampc.all_reduce
func.func @forward(%x: tensor<4x8xf16>) -> tensor<4x8xf16> {
  %r = ampc.relu %x : tensor<4x8xf16>
  return %r : tensor<4x8xf16>
}
