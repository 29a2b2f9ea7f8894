// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Pooling on the CUDA target: templated kernels of CudaKernels.cuh
// instantiated with the accumulator and the element types' load/store
// (ampc::cuda::As<float>, AsF16), one thread per output element, the
// window as ampc::cuda::Window = {spatial rank, input size, output size,
// kernel, strides, begin pads, end pads, dilations}.

// MaxPool (values at 0, int64 indices at 256), AveragePool counting pads
// (top and right only: begin {1, 0}, end {0, 1}, 7x7 outputs),
// and GlobalAveragePool as a mean reduction over the 8x8 plane of each of
// the 4 channels.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[M:v[0-9]+]] = reinterpret_cast<float *>(state + 1088);
// CHECK-NEXT:    int64_t *[[I:v[0-9]+]] = reinterpret_cast<int64_t *>(state + 1344);
// CHECK-NEXT:    ampc::cuda::launch("maxPool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::maxPool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(64LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[M]], [[I]], 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}}, false, 0LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.max_pool");
// CHECK-NEXT:    float *[[A:v[0-9]+]] = reinterpret_cast<float *>(state + 1856);
// CHECK-NEXT:    ampc::cuda::launch("averagePool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::averagePool<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(196LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[A]], 4LL, ampc::cuda::Window{2, {8LL, 8LL}, {7LL, 7LL}, {3LL, 3LL}, {1LL, 1LL}, {1LL, 0LL}, {0LL, 1LL}, {1LL, 1LL}}, true, 0LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.average_pool");
// CHECK-NEXT:    float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 2688);
// CHECK-NEXT:    ampc::cuda::launch("reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::reduce<float, ampc::cuda::As<float>, ampc::cuda::As<float>>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[G]], 4LL, ampc::cuda::Strided{2, {1LL, 4LL}, {256LL, 64LL}}, ampc::cuda::Strided{2, {8LL, 8LL}, {8LL, 1LL}}, 64LL, ampc::cuda::ReduceMean);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.global_average_pool");
func.func @forward(%img: tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>, tensor<1x4x7x7xf32>, tensor<1x4x1x1xf32>) {
  %0:2 = ampc.max_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
  %1 = ampc.average_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 0, 1>, count_include_pad = 1 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
  %2 = ampc.global_average_pool %img : (tensor<1x4x8x8xf32>) -> tensor<1x4x1x1xf32>
  return %0#0, %0#1, %1, %2 : tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>, tensor<1x4x7x7xf32>, tensor<1x4x1x1xf32>
}

// -----

// The adjoints in f16. MaxPool's gradient (the forward's window: 3x3,
// stride 2, pad 1, so windows overlap) is one kernel, a thread per input
// element gathering the gradients of the windows whose index picked it (no
// zeroed scratch, no atomics, no convert); AveragePool's (ceil mode, 7x7)
// is gathered per input element.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[GM:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1344);
// CHECK-NEXT:    ampc::cuda::launch("maxPoolGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16>", ampc::cuda::maxPoolGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16>, ampc::cuda::blocks(512LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in1, [[GM]], 8LL, ampc::cuda::Window{2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}}, false, 0LL);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.max_pool_grad");
// CHECK-NEXT:    uint16_t *[[GA:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 320);
// CHECK-NEXT:    ampc::cuda::launch("averagePoolGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16>", ampc::cuda::averagePoolGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16>, ampc::cuda::blocks(392LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[GA]], 8LL, ampc::cuda::Window{2, {7LL, 7LL}, {4LL, 4LL}, {2LL, 2LL}, {2LL, 2LL}, {0LL, 0LL}, {0LL, 0LL}, {1LL, 1LL}}, true, 0LL);
func.func @forward(%p: tensor<1x8x4x4xf16>, %i: tensor<1x8x4x4xi64>) -> (tensor<1x8x8x8xf16>, tensor<1x8x7x7xf16>) {
  %0 = ampc.max_pool_grad %p, %i {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf16>
  %1 = ampc.average_pool_grad %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x8x4x4xf16>) -> tensor<1x8x7x7xf16>
  return %0, %1 : tensor<1x8x8x8xf16>, tensor<1x8x7x7xf16>
}
