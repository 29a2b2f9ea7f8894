// RUN: ampc-opt %s --split-input-file --ampc-fuse-layer-norm-grad | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse-layer-norm-grad --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s --check-prefix=CUDA

// LayerNorm's Scale and B adjoints as autodiff writes them (ReduceSums over
// the rows of dY·x̂ and of dY) move into layer_norm_grad (issue 37, item
// 4): one kernel (layerNormGradByWarp: 16 rows, one pairwise leaf, so one
// warp, 8 to a block) computes dX and the leaf's shares into the op's
// partials scratch, layerNormParamGrad adds them as the CPU's pairwise sum.
// CHECK-LABEL: func.func @forward
// CHECK:         %{{.*}}, %[[P:.*]]:2 = ampc.layer_norm_grad %arg0, %arg1, %arg2, %arg3, %arg4 {param_grads = 2 : i64}
// CHECK-NOT:     ampc.reduce_sum
// CHECK-NOT:     ampc.mul
// CHECK:         return %{{.*}}, %[[P]]#0, %[[P]]#1
// CUDA-LABEL: static int32_t infer(
// CUDA:         ampc::cuda::launch("layerNormGradByWarp<{{.*}}>", ampc::cuda::layerNormGradByWarp<{{.*}}>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, in1, in2, ampc::cuda::Strided{1, {32LL}, {1LL}}, in3, in4, {{v[0-9]+}}, 16LL, 32LL, reinterpret_cast<float *>(state + [[PART:[0-9]+]]));
// CUDA-NEXT:    AMPC_LAUNCHED(ctx, "ampc.layer_norm_grad"); // ampc.parallelism: row-by-warp 16 rows of 32 (ampc.layer_norm_grad)
// CUDA-NEXT:    ampc::cuda::launch("layerNormParamGrad<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, ampc::cuda::blocks(32LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + [[PART]]), 16LL, 32LL, {{v[0-9]+}}, {{v[0-9]+}});
func.func @forward(%dy: tensor<2x8x32xf32>, %x: tensor<2x8x32xf32>, %s: tensor<32xf32>, %m: tensor<2x8x1xf32>, %r: tensor<2x8x1xf32>) -> (tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>) {
  %0 = ampc.layer_norm_grad %dy, %x, %s, %m, %r : (tensor<2x8x32xf32>, tensor<2x8x32xf32>, tensor<32xf32>, tensor<2x8x1xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %1 = ampc.sub %x, %m : (tensor<2x8x32xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %2 = ampc.mul %1, %r : (tensor<2x8x32xf32>, tensor<2x8x1xf32>) -> tensor<2x8x32xf32>
  %3 = ampc.mul %dy, %2 : (tensor<2x8x32xf32>, tensor<2x8x32xf32>) -> tensor<2x8x32xf32>
  %4 = ampc.reduce_sum %3 {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf32>) -> tensor<32xf32>
  %5 = ampc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf32>) -> tensor<32xf32>
  return %0, %4, %5 : tensor<2x8x32xf32>, tensor<32xf32>, tensor<32xf32>
}

// -----

// A LayerNorm whose input needs no gradient (autodiff wrote no
// layer_norm_grad): one is made for the adjoints, before the first sum; its
// dX is unused, and the kernel is given no dX to write.
// CHECK-LABEL: func.func @forward
// CHECK:         ampc.layer_normalization
// CHECK:         %{{.*}}, %[[P:.*]]:2 = ampc.layer_norm_grad %arg1, %arg0, %arg2, %{{.*}}, %{{.*}} {param_grads = 2 : i64}
// CHECK:         return %[[P]]#0, %[[P]]#1
// CUDA-LABEL: static int32_t infer(
// CUDA:         ampc::cuda::launch("layerNormGradByWarp<{{.*}}>", {{.*}}, 16LL, 32LL, reinterpret_cast<float *>(state + {{[0-9]+}}));
func.func @forward(%x: tensor<16x32xf32>, %dy: tensor<16x32xf32>, %s: tensor<32xf32>, %b: tensor<32xf32>) -> (tensor<32xf32>, tensor<32xf32>) {
  %y:3 = ampc.layer_normalization %x, %s, %b : (tensor<16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> (tensor<16x32xf32>, tensor<16x1xf32>, tensor<16x1xf32>)
  %1 = ampc.sub %x, %y#1 : (tensor<16x32xf32>, tensor<16x1xf32>) -> tensor<16x32xf32>
  %2 = ampc.mul %1, %y#2 : (tensor<16x32xf32>, tensor<16x1xf32>) -> tensor<16x32xf32>
  %3 = ampc.mul %dy, %2 : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %4 = ampc.reduce_sum %3 {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x32xf32>) -> tensor<32xf32>
  %5 = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x32xf32>) -> tensor<32xf32>
  return %4, %5 : tensor<32xf32>, tensor<32xf32>
}

// -----

// F16 data keeps the ReduceSums (the elementwise ops round to f16 between
// steps, the kernel would not).
// CHECK-LABEL: func.func @forward
// CHECK:         ampc.layer_norm_grad {{.*}} -> tensor<2x32xf16>
// CHECK:         ampc.reduce_sum
func.func @forward(%dy: tensor<2x32xf16>, %x: tensor<2x32xf16>, %s: tensor<32xf16>, %m: tensor<2x1xf16>, %r: tensor<2x1xf16>) -> (tensor<2x32xf16>, tensor<32xf16>) {
  %0 = ampc.layer_norm_grad %dy, %x, %s, %m, %r : (tensor<2x32xf16>, tensor<2x32xf16>, tensor<32xf16>, tensor<2x1xf16>, tensor<2x1xf16>) -> tensor<2x32xf16>
  %1 = ampc.sub %x, %m : (tensor<2x32xf16>, tensor<2x1xf16>) -> tensor<2x32xf16>
  %2 = ampc.mul %1, %r : (tensor<2x32xf16>, tensor<2x1xf16>) -> tensor<2x32xf16>
  %3 = ampc.mul %dy, %2 : (tensor<2x32xf16>, tensor<2x32xf16>) -> tensor<2x32xf16>
  %4 = ampc.reduce_sum %3 {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x32xf16>) -> tensor<32xf16>
  return %0, %4 : tensor<2x32xf16>, tensor<32xf16>
}
