// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Reductions and Softmax/LogSoftmax on the CUDA target: a thread per output
// for short rows (below 256 elements; the last case: a block per row)
// (reduce: kept and reduced dimensions as ampc::cuda::Strided {rank, sizes,
// strides}, then the reduced count and the kind), a warp per softmax row
// (outer x inner of them; a thread for rows under 8 elements, and x =
// in·1 without a mask: the scale and mask arguments); FP32 accumulation,
// the element type's load/store.

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
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::softmaxByWarp<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, [[S]], 4LL, 10LL, 1LL, false, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax");
// CHECK-NEXT:    float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + 576);
// CHECK-NEXT:    ampc::cuda::launch("softmax<{{.*}}>", ampc::cuda::softmax<{{.*}}>, ampc::cuda::blocks(10LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[L]], 1LL, 4LL, 10LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.log_softmax");
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("softmax<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::AsF16>", ampc::cuda::softmax<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::AsF16>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in1, [[H]], 2LL, 6LL, 3LL, false, float(1), nullptr, ampc::cuda::Strided{});
func.func @forward(%p: tensor<4x10xf32>, %q: tensor<2x6x3xf16>) -> (tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>) {
  %0 = ampc.softmax %p : tensor<4x10xf32>
  %1 = ampc.log_softmax %p {axis = 0 : i64} : tensor<4x10xf32>
  %2 = ampc.softmax %q {axis = 1 : i64} : tensor<2x6x3xf16>
  return %0, %1, %2 : tensor<4x10xf32>, tensor<4x10xf32>, tensor<2x6x3xf16>
}

// -----

// Outputs of many elements (at least 256) run a block per output or row
// (reduceByBlock, softmaxByBlock; the grid the output or row count), and a
// single output of 65,536 elements is split over 8 blocks of 8,192 into
// the op's scratch (reducePartials, planned by ampc-plan-memory), then
// combined (reduceFinish): a mean over a whole 64x1024 activation (a loss)
// and a bias gradient's sum over 512 rows for 300 columns; a reduction of
// 64 elements per output keeps a thread per output.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("reducePartials<float, ampc::cuda::As<float>>", ampc::cuda::reducePartials<float, ampc::cuda::As<float>>, 8u, ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + [[PARTIALS:[0-9]+]]), 1LL, ampc::cuda::Strided{0, {0}, {0}}, ampc::cuda::Strided{2, {64LL, 1024LL}, {1024LL, 1LL}}, 65536LL, 8LL, ampc::cuda::ReduceMean);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_mean");
// CHECK-NEXT:    ampc::cuda::launch("reduceFinish<float, ampc::cuda::As<float>>", ampc::cuda::reduceFinish<float, ampc::cuda::As<float>>, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + [[PARTIALS]]), {{v[0-9]+}}, 1LL, 8LL, 65536LL, ampc::cuda::ReduceMean);
// CHECK:         ampc::cuda::launch("reduceByBlock<{{.*}}>", ampc::cuda::reduceByBlock<{{.*}}>, 300u, ampc::cuda::kThreads, 0, ctx.stream, in1, {{v[0-9]+}}, 300LL, ampc::cuda::Strided{1, {300LL}, {1LL}}, ampc::cuda::Strided{1, {512LL}, {300LL}}, 512LL, ampc::cuda::ReduceSum);
// CHECK:         ampc::cuda::launch("reduce<{{.*}}>", ampc::cuda::reduce<{{.*}}>, ampc::cuda::blocks(1024LL), ampc::cuda::kThreads, 0, ctx.stream, in0, {{v[0-9]+}}, 1024LL, {{.*}}, 64LL, ampc::cuda::ReduceMax);
// Softmax rows of 1024 (the grid the 64 rows) and of 300 along axis 0.
// CHECK:         ampc::cuda::launch("softmaxByBlock<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::softmaxByBlock<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>>, 64u, ampc::cuda::kThreads, 0, ctx.stream, in0, {{v[0-9]+}}, 64LL, 1024LL, 1LL, false, float(1), nullptr, ampc::cuda::Strided{});
// CHECK:         ampc::cuda::launch("softmaxByBlock<{{.*}}>", ampc::cuda::softmaxByBlock<{{.*}}>, 300u, ampc::cuda::kThreads, 0, ctx.stream, in1, {{v[0-9]+}}, 1LL, 512LL, 300LL, true, float(1), nullptr, ampc::cuda::Strided{});
func.func @forward(%x: tensor<64x1024xf32>, %g: tensor<512x300xf32>) -> (tensor<f32>, tensor<300xf32>, tensor<1024xf32>, tensor<64x1024xf32>, tensor<512x300xf32>) {
  %0 = ampc.reduce_mean %x {axes = array<i64>, keepdims = 0 : i64} : (tensor<64x1024xf32>) -> tensor<f32>
  %1 = ampc.reduce_sum %g {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<512x300xf32>) -> tensor<300xf32>
  %2 = ampc.reduce_max %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<64x1024xf32>) -> tensor<1024xf32>
  %3 = ampc.softmax %x : tensor<64x1024xf32>
  %4 = ampc.log_softmax %g {axis = 0 : i64} : tensor<512x300xf32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<300xf32>, tensor<1024xf32>, tensor<64x1024xf32>, tensor<512x300xf32>
}
