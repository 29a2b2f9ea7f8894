// RUN: ampc-opt %s --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s

// The indexing kernels on the CUDA target: ampc.scatter copies the data
// unless the plan gave it the output's buffer, then one thread per column
// (outer x inner = 4) applies the updates (f16 data combined in float,
// int32 indices checked into the error slot); ampc.top_k one thread per
// input element (30); ampc.reduce_prod the reduce kernel's ReduceProd.

// CHECK:         "ampc.scatter: an index is out of range",
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[S:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + {{[0-9]+}});
// CHECK-NEXT:    if ([[S]] != in0) AMPC_CUDA(ctx, cudaMemcpyAsync([[S]], in0, 64ULL, cudaMemcpyDeviceToDevice, ctx.stream), "ampc.scatter");
// CHECK-NEXT:    ampc::cuda::launch("scatter<float, ampc::cuda::AsF16, int32_t>", ampc::cuda::scatter<float, ampc::cuda::AsF16, int32_t>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, in2, in1, [[S]], 1LL, 8LL, 3LL, 4LL, ampc::math::ScatterMax, reinterpret_cast<int32_t *>(state + {{[0-9]+}}), 1);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.scatter");
// CHECK-NEXT:    int64_t *[[T:v[0-9]+]] = reinterpret_cast<int64_t *>(state + {{[0-9]+}});
// CHECK-NEXT:    ampc::cuda::launch("topK<float, ampc::cuda::As<float>>", ampc::cuda::topK<float, ampc::cuda::As<float>>, ampc::cuda::blocks(30LL), ampc::cuda::kThreads, 0, ctx.stream, in3, [[T]], 2LL, 5LL, 3LL, 2LL, false);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.top_k");
// CHECK-NEXT:    float *[[P:v[0-9]+]] = reinterpret_cast<float *>(state + {{[0-9]+}});
// CHECK-NEXT:    ampc::cuda::launch("reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in3, [[P]], 6LL, ampc::cuda::Strided{2, {2LL, 3LL}, {15LL, 1LL}}, ampc::cuda::Strided{1, {5LL}, {3LL}}, 5LL, ampc::cuda::ReduceProd);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_prod");
func.func @forward(%d: tensor<8x4xf16>, %i: tensor<3xi32>, %u: tensor<3x4xf16>, %x: tensor<2x5x3xf32>) -> (tensor<8x4xf16>, tensor<2x2x3xi64>, tensor<2x3xf32>) {
  %0 = ampc.scatter %d, %i, %u {reduction = "max"} : (tensor<8x4xf16>, tensor<3xi32>, tensor<3x4xf16>) -> tensor<8x4xf16>
  %1 = ampc.top_k %x {axis = 1 : i64, k = 2 : i64, largest = 0 : i64} : (tensor<2x5x3xf32>) -> tensor<2x2x3xi64>
  %2 = ampc.reduce_prod %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<2x5x3xf32>) -> tensor<2x3xf32>
  return %0, %1, %2 : tensor<8x4xf16>, tensor<2x2x3xi64>, tensor<2x3xf32>
}
