// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Data movement on the CUDA target: Transpose and Slice are stridedCopy
// kernels (source, destination, count, first element's offset,
// ampc::cuda::Strided{rank, output sizes, input strides}); Concat one
// concatPart launch per part; Gather and GatherGrad check indices into the
// error slot; SliceGrad zero-fills then scatters; Expand is a generated
// elementwise kernel; Reshape and Squeeze are views (no launch).

// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[T:v[0-9]+]] = reinterpret_cast<float *>(state + 704);
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(24LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[T]], 24LL, 0LL, ampc::cuda::Strided{3, {4LL, 2LL, 3LL}, {1LL, 12LL, 4LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.transpose");
// CHECK-NEXT:    uint16_t *[[S:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 832);
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<uint16_t>", ampc::cuda::stridedCopy<uint16_t>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in1, [[S]], 6LL, 7LL, ampc::cuda::Strided{2, {2LL, 3LL}, {8LL, -3LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.slice");
// CHECK-NEXT:    uint16_t *[[C:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 896);
// CHECK-NEXT:    ampc::cuda::launch("concatPart<uint16_t>", ampc::cuda::concatPart<uint16_t>, ampc::cuda::blocks(16LL), ampc::cuda::kThreads, 0, ctx.stream, in1, [[C]], 1LL, 16LL, 40LL, 0LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.concat");
// CHECK-NEXT:    ampc::cuda::launch("concatPart<uint16_t>", ampc::cuda::concatPart<uint16_t>, ampc::cuda::blocks(24LL), ampc::cuda::kThreads, 0, ctx.stream, in2, [[C]], 1LL, 24LL, 40LL, 16LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.concat");
// CHECK-NEXT:    float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 1024);
// CHECK-NEXT:    ampc::cuda::launch("gather<float, int64_t>", ampc::cuda::gather<float, int64_t>, ampc::cuda::blocks(36LL), ampc::cuda::kThreads, 0, ctx.stream, in3, in4, [[G]], 1LL, 10LL, 6LL, 6LL, reinterpret_cast<int32_t *>(state + {{[0-9]+}}), 1);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather");
// CHECK-NEXT:    float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK-NEXT:    ampc::cuda::launch("k0", k0, ampc::cuda::blocks(12LL), ampc::cuda::kThreads, 0, ctx.stream, in5, [[E]]);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.expand");
// CHECK-NOT:     launch(
// CHECK:         cudaMemcpyAsync(outputs[4], in0, 96ULL,
func.func @forward(%x: tensor<2x3x4xf32>, %a: tensor<2x8xf16>, %b: tensor<3x8xf16>, %tab: tensor<10x6xf32>, %ids: tensor<2x3xi64>, %r: tensor<1x4xf32>) -> (tensor<4x2x3xf32>, tensor<2x3xf16>, tensor<5x8xf16>, tensor<2x3x6xf32>, tensor<6x4xf32>, tensor<3x4xf32>) {
  %0 = ampc.transpose %x {perm = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = ampc.slice %a {axes = array<i64: -1>, ends = array<i64: -9223372036854775807>, starts = array<i64: -1>, steps = array<i64: -3>} : (tensor<2x8xf16>) -> tensor<2x3xf16>
  %2 = ampc.concat %a, %b {axis = 0 : i64} : (tensor<2x8xf16>, tensor<3x8xf16>) -> tensor<5x8xf16>
  %3 = ampc.gather %tab, %ids {axis = 0 : i64} : (tensor<10x6xf32>, tensor<2x3xi64>) -> tensor<2x3x6xf32>
  %4 = ampc.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  %5 = ampc.expand %r : tensor<1x4xf32> to tensor<3x4xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<4x2x3xf32>, tensor<2x3xf16>, tensor<5x8xf16>, tensor<2x3x6xf32>, tensor<6x4xf32>, tensor<3x4xf32>
}

// -----

// A Slice through a Reshape view (input element 8), an Exp reading the
// slice through a Squeeze view; GatherGrad: its scratch (the rows'
// starts and cursors, 2 x 10 + 1 counters) cleared, the 6 indices counted
// per row, the starts summed by one block, the indices bucketed and each
// bucket sorted, then a thread per table element (60) sums its bucket;
// SliceGrad: a 64-byte memset, then the scatter with stride 2.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[S:v[0-9]+]] = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:    ampc::cuda::launch("stridedCopy<float>", ampc::cuda::stridedCopy<float>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[S]], 4LL, 8LL, ampc::cuda::Strided{2, {1LL, 4LL}, {4LL, 1LL}});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.slice");
// CHECK-NEXT:    float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("k0", k0, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, [[S]], [[E]]);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.exp");
// CHECK-NEXT:    float *[[GG:v[0-9]+]] = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:    AMPC_CUDA(ctx, cudaMemsetAsync(reinterpret_cast<unsigned long long *>(state + [[B:[0-9]+]]), 0, 168ULL, ctx.stream), "ampc.gather_grad");
// CHECK-NEXT:    ampc::cuda::launch("gatherGradCount<int64_t>", ampc::cuda::gatherGradCount<int64_t>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in2, 6LL, 10LL, reinterpret_cast<unsigned long long *>(state + [[B]]), reinterpret_cast<int32_t *>(state + {{[0-9]+}}), 1);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather_grad");
// CHECK-NEXT:    ampc::cuda::launch("gatherGradStarts", ampc::cuda::gatherGradStarts, 1u, ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<unsigned long long *>(state + [[B]]), 11LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather_grad");
// CHECK-NEXT:    ampc::cuda::launch("gatherGradFill<int64_t>", ampc::cuda::gatherGradFill<int64_t>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in2, 6LL, 10LL, reinterpret_cast<unsigned long long *>(state + [[B]]), reinterpret_cast<int64_t *>(state + [[O:[0-9]+]]));
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather_grad");
// CHECK-NEXT:    ampc::cuda::launch("gatherGradSort", ampc::cuda::gatherGradSort, ampc::cuda::blocks(10LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<unsigned long long *>(state + [[B]]), 10LL, reinterpret_cast<int64_t *>(state + [[O]]));
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather_grad");
// CHECK-NEXT:    ampc::cuda::launch("gatherGrad<float, float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::gatherGrad<float, float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(60LL), ampc::cuda::kThreads, 0, ctx.stream, in1, reinterpret_cast<unsigned long long *>(state + [[B]]), reinterpret_cast<int64_t *>(state + [[O]]), [[GG]], 1LL, 10LL, 6LL, 6LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.gather_grad");
// CHECK-NEXT:    float *[[SG:v[0-9]+]] = reinterpret_cast<float *>(state + {{[0-9]+}});
// CHECK-NEXT:    AMPC_CUDA(ctx, cudaMemsetAsync([[SG]], 0, 64ULL, ctx.stream), "ampc.slice_grad");
// CHECK-NEXT:    ampc::cuda::launch("stridedScatter<float>", ampc::cuda::stridedScatter<float>, ampc::cuda::blocks(8LL), ampc::cuda::kThreads, 0, ctx.stream, in3, [[SG]], 8LL, 0LL, ampc::cuda::Strided{2, {2LL, 4LL}, {8LL, 2LL}});
func.func @forward(%x: tensor<2x3x4xf32>, %dg: tensor<2x3x6xf32>, %ids: tensor<2x3xi64>, %ds: tensor<2x4xf32>) -> (tensor<4xf32>, tensor<10x6xf32>, tensor<2x8xf32>) {
  %0 = ampc.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  %1 = ampc.slice %0 {axes = array<i64: 0>, ends = array<i64: 3>, starts = array<i64: 2>, steps = array<i64: 1>} : (tensor<6x4xf32>) -> tensor<1x4xf32>
  %2 = ampc.squeeze %1 {axes = array<i64: 0>} : (tensor<1x4xf32>) -> tensor<4xf32>
  %3 = ampc.exp %2 : tensor<4xf32>
  %4 = ampc.gather_grad %dg, %ids {axis = 0 : i64} : (tensor<2x3x6xf32>, tensor<2x3xi64>) -> tensor<10x6xf32>
  %5 = ampc.slice_grad %ds {axes = array<i64: 1>, ends = array<i64: 8>, starts = array<i64: 0>, steps = array<i64: 2>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return %3, %4, %5 : tensor<4xf32>, tensor<10x6xf32>, tensor<2x8xf32>
}
