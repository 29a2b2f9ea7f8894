// RUN: ampc-opt %s --ampc-assign-precision | FileCheck %s

// The categories of the indexing ops and ReduceProd after an f16 matmul
// (REFERENCE.md 1): ampc.scatter promotes its f16 data and f32 updates to
// f32, ampc.top_k compares in the f16 it receives (its int64 result is
// left alone), ampc.reduce_prod computes and returns f32.

// CHECK-LABEL: func.func @indexing
// CHECK-SAME: (%{{.+}}: tensor<4x8xf32>, %{{.+}}: tensor<8x4xf32>, %[[I:.+]]: tensor<2xi64>, %[[U:.+]]: tensor<2x4xf32>)
// CHECK: %[[M:.+]] = ampc.matmul {{.*}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[MS:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.scatter %[[MS]], %[[I]], %[[U]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<4x4xf32>, tensor<2xi64>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[T:.+]] = ampc.top_k %[[M]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, axis = 1 : i64, k = 2 : i64} : (tensor<4x4xf16>) -> tensor<4x2xi64>
// CHECK-NEXT: %[[MP:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.reduce_prod %[[MP]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">, axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[S]], %[[T]], %[[P]]
func.func @indexing(%x: tensor<4x8xf32>, %w: tensor<8x4xf32>, %i: tensor<2xi64>, %u: tensor<2x4xf32>) -> (tensor<4x4xf32>, tensor<4x2xi64>, tensor<4xf32>) {
  %m = ampc.matmul %x, %w : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %s = ampc.scatter %m, %i, %u : (tensor<4x4xf32>, tensor<2xi64>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %t = ampc.top_k %m {axis = 1 : i64, k = 2 : i64} : (tensor<4x4xf32>) -> tensor<4x2xi64>
  %p = ampc.reduce_prod %m {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x4xf32>) -> tensor<4xf32>
  return %s, %t, %p : tensor<4x4xf32>, tensor<4x2xi64>, tensor<4xf32>
}
