// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Reductions and Softmax/LogSoftmax on the CUDA target: a thread per output
// (reduce: kept and reduced dimensions as ampc::cuda::Strided {rank, sizes,
// strides}, then the reduced count and the kind), a thread per softmax row
// (outer x inner of them); FP32 accumulation, the element type's load/store.

// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[MEAN:v[0-9]+]] = reinterpret_cast<float *>(state + 256);
// CHECK-NEXT:    ampc::cuda::launch("reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[MEAN]], 4LL, ampc::cuda::Strided{1, {4LL}, {8LL}}, ampc::cuda::Strided{1, {8LL}, {1LL}}, 8LL, ampc::cuda::ReduceMean);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_mean");
// CHECK-NEXT:    float *[[SUM:v[0-9]+]] = reinterpret_cast<float *>(state + 320);
// CHECK-NEXT:    ampc::cuda::launch("reduce<{{.*}}>", ampc::cuda::reduce<{{.*}}>, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[SUM]], 1LL, ampc::cuda::Strided{0, {0}, {0}}, ampc::cuda::Strided{2, {4LL, 8LL}, {8LL, 1LL}}, 32LL, ampc::cuda::ReduceSum);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_sum");
// CHECK-NEXT:    float *[[MAX:v[0-9]+]] = reinterpret_cast<float *>(state + 384);
// CHECK-NEXT:    ampc::cuda::launch("reduce<{{.*}}>", ampc::cuda::reduce<{{.*}}>, ampc::cuda::blocks(8LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[MAX]], 8LL, ampc::cuda::Strided{1, {8LL}, {1LL}}, ampc::cuda::Strided{1, {4LL}, {8LL}}, 4LL, ampc::cuda::ReduceMax);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_max");
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("reduce<float, ampc::cuda::AsF16, ampc::cuda::AsF16>", ampc::cuda::reduce<float, ampc::cuda::AsF16, ampc::cuda::AsF16>, ampc::cuda::blocks(10LL), ampc::cuda::kThreads, 0, ctx.stream, in1, [[H]], 10LL, ampc::cuda::Strided{2, {2LL, 5LL}, {15LL, 1LL}}, ampc::cuda::Strided{1, {3LL}, {5LL}}, 3LL, ampc::cuda::ReduceSum);
func.func @forward(%x: tensor<4x8xf32>, %h: tensor<2x3x5xf16>) -> (tensor<4xf32>, tensor<1x1xf32>, tensor<1x8xf32>, tensor<2x1x5xf16>) {
  %0 = ampc.reduce_mean %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %1 = ampc.reduce_sum %x {axes = array<i64>} : (tensor<4x8xf32>) -> tensor<1x1xf32>
  %2 = ampc.reduce_max %x {axes = array<i64: -2>} : (tensor<4x8xf32>) -> tensor<1x8xf32>
  %3 = ampc.reduce_sum %h {axes = array<i64: 1>} : (tensor<2x3x5xf16>) -> tensor<2x1x5xf16>
  return %0, %1, %2, %3 : tensor<4xf32>, tensor<1x1xf32>, tensor<1x8xf32>, tensor<2x1x5xf16>
}

// -----

// Softmax over the last axis (4 rows), LogSoftmax over axis 0 (10
// columns), f16 Softmax over the middle axis of 2x6x3 (2 x 3 rows of 6).
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[S:v[0-9]+]] = reinterpret_cast<float *>(state + 384);
// CHECK-NEXT:    ampc::cuda::launch("softmax<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::softmax<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[S]], 4LL, 10LL, 1LL, false);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax");
// CHECK-NEXT:    float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + 576);
// CHECK-NEXT:    ampc::cuda::launch("softmax<{{.*}}>", ampc::cuda::softmax<{{.*}}>, ampc::cuda::blocks(10LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[L]], 1LL, 4LL, 10LL, true);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.log_softmax");
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("softmax<float, ampc::cuda::AsF16, ampc::cuda::AsF16>", ampc::cuda::softmax<float, ampc::cuda::AsF16, ampc::cuda::AsF16>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in1, [[H]], 2LL, 6LL, 3LL, false);
func.func @forward(%p: tensor<4x10xf32>, %q: tensor<2x6x3xf16>) -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>) {
  %0 = ampc.softmax %p : tensor<4x10xf32>
  %1 = ampc.log_softmax %p {axis = 0 : i64} : tensor<4x10xf32>
  %2 = ampc.softmax %q {axis = 1 : i64} : tensor<2x6x3xf16>
  return %0, %1, %2 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>
}
