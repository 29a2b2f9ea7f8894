// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Reductions and Softmax/LogSoftmax on the CPU target. A reduction splits
// the input's dimensions into kept and reduced ones, each with its sizes
// and strides; the sum is FP32 whatever the element type, rounded once.
// Softmax is (outer, axis size, inner, log).

// ReduceMean over axis 1 without keepdims, ReduceSum over all axes, ReduceMax
// over axis -2 (kept: the 8 columns, stride 1; reduced: the 4 rows, stride
// 8), and an f16 ReduceSum over the middle axis of 2x3x5.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[MEAN:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    { static const int64_t kept[] = {4LL}; static const int64_t keptStrides[] = {8LL};
// CHECK-NEXT:      static const int64_t reduced[] = {8LL}; static const int64_t reducedStrides[] = {1LL};
// CHECK-NEXT:      ampc::cpu::reduce<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[MEAN]], 1, kept, keptStrides, 1, reduced, reducedStrides, ampc::cpu::ReduceMean, reinterpret_cast<int64_t *>(state + 128)); }
// CHECK-NEXT:    float *[[SUM:v[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:    { static const int64_t kept[] = {0}; static const int64_t keptStrides[] = {0};
// CHECK-NEXT:      static const int64_t reduced[] = {4LL, 8LL}; static const int64_t reducedStrides[] = {8LL, 1LL};
// CHECK-NEXT:      ampc::cpu::reduce<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[SUM]], 0, kept, keptStrides, 2, reduced, reducedStrides, ampc::cpu::ReduceSum,
// CHECK-NEXT:    float *[[MAX:v[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK-NEXT:    { static const int64_t kept[] = {8LL}; static const int64_t keptStrides[] = {1LL};
// CHECK-NEXT:      static const int64_t reduced[] = {4LL}; static const int64_t reducedStrides[] = {8LL};
// CHECK-NEXT:      ampc::cpu::reduce<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[MAX]], 1, kept, keptStrides, 1, reduced, reducedStrides, ampc::cpu::ReduceMax,
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 256);
// CHECK-NEXT:    { static const int64_t kept[] = {2LL, 5LL}; static const int64_t keptStrides[] = {15LL, 1LL};
// CHECK-NEXT:      static const int64_t reduced[] = {3LL}; static const int64_t reducedStrides[] = {5LL};
// CHECK-NEXT:      ampc::cpu::reduce<float, ampc::cpu::AsF16, ampc::cpu::AsF16>(in1, [[H]], 2, kept, keptStrides, 1, reduced, reducedStrides, ampc::cpu::ReduceSum, reinterpret_cast<int64_t *>(state + 320)); }
func.func @forward(%x: tensor<4x8xf32>, %h: tensor<2x3x5xf16>) -> (tensor<4xf32>, tensor<1x1xf32>, tensor<1x8xf32>, tensor<2x1x5xf16>) {
  %0 = ampc.reduce_mean %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %1 = ampc.reduce_sum %x {axes = array<i64>} : (tensor<4x8xf32>) -> tensor<1x1xf32>
  %2 = ampc.reduce_max %x {axes = array<i64: -2>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %3 = ampc.reduce_sum %h {axes = array<i64: 1>} : (tensor<2x3x5xf16>) -> tensor<2x1x5xf16>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<1x1xf32>, tensor<1x8xf32>, tensor<2x1x5xf16>
}

// -----

// Softmax over the last axis (4 rows of 10), LogSoftmax over axis 0 (1 x 4
// x 10, log), and an f16 Softmax over the middle axis of 2x6x3.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[S:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    ampc::cpu::softmax<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[S]], 4LL, 10LL, 1LL, false);
// CHECK-NEXT:    float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + 256);
// CHECK-NEXT:    ampc::cpu::softmax<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[L]], 1LL, 4LL, 10LL, true);
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 448);
// CHECK-NEXT:    ampc::cpu::softmax<float, ampc::cpu::AsF16, ampc::cpu::AsF16>(in1, [[H]], 2LL, 6LL, 3LL, false);
func.func @forward(%p: tensor<4x10xf32>, %q: tensor<2x6x3xf16>) -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>) {
  %0 = ampc.softmax %p : tensor<4x10xf32>
  %1 = ampc.log_softmax %p {axis = 0 : i64} : tensor<4x10xf32>
  %2 = ampc.softmax %q {axis = 1 : i64} : tensor<2x6x3xf16>
  return %0, %1, %2 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>
}
