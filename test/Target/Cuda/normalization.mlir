// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// Layer and batch normalisation on the CUDA target: templated kernels
// instantiated with the FP32 accumulator and each operand's load/store
// (ampc::cuda::As<float>, AsF16); epsilon and momentum are the f32
// attributes' exact values.

// LayerNormalization over the last axis of f16 data: a warp per row (32
// rows of 64, 8 warps to a block: 4 blocks); scale and bias read through strides; mean and inverse
// standard deviation in f32 at offsets 4096 and 4224.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 4416);
// CHECK-NEXT:    float *[[MEAN:v[0-9]+]] = reinterpret_cast<float *>(state + 8512);
// CHECK-NEXT:    float *[[RSTD:v[0-9]+]] = reinterpret_cast<float *>(state + 8640);
// CHECK-NEXT:    ampc::cuda::launch("layerNormByWarp<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::AsF16>", ampc::cuda::layerNormByWarp<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::AsF16>, 4u, ampc::cuda::kThreads, 0, ctx.stream, in0, [[Y]], [[MEAN]], [[RSTD]], 32LL, 64LL, in1, ampc::cuda::Strided{1, {64LL}, {1LL}}, in2, ampc::cuda::Strided{1, {64LL}, {1LL}}, float(1.00000004749745131e-03));
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.layer_normalization"); // ampc.parallelism: row-by-warp 32 rows of 64 (ampc.layer_normalization)
func.func @forward(%x: tensor<2x16x64xf16>, %g: tensor<64xf16>, %b: tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) {
  %y:3 = ampc.layer_normalization %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-03 : f32} : (tensor<2x16x64xf16>, tensor<64xf16>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return %y#0, %y#1, %y#2 : tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>
}

// -----

// BatchNormalization in inference mode uses the running statistics, a
// thread per element (epsilon 1e-5; no saved statistics: nullptr); in
// training mode one cooperative launch of at most a block per work item
// (a channel here: 8 items, 1 split; 32 threads, cudaBatchNormThreads: its
// 32 elements are one node of the tree, one thread's): batchNormTrain
// writes each item's node of the channel's moments (mean, M2) to the
// partials and, after a grid barrier, combines them, normalises (epsilon
// 1e-3) and writes the running update with momentum 0.9 and the saved mean
// and inverse standard deviation.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("batchNorm<{{.*}}>", ampc::cuda::batchNorm<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, float>, ampc::cuda::blocks(256LL), ampc::cuda::kThreads, 0, ctx.stream, in0, v0, 2LL, 8LL, 16LL, in1, in2, in3, in4, float(9.99999974737875164e-06), v1, v2, nullptr, nullptr, nullptr, false);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.batch_normalization");
// CHECK-NEXT:    float *[[T:v[0-9]+]] = reinterpret_cast<float *>(state + 2368);
// CHECK-NEXT:    float *[[RM:v[0-9]+]] = reinterpret_cast<float *>(state + 3392);
// CHECK-NEXT:    float *[[RV:v[0-9]+]] = reinterpret_cast<float *>(state + 3456);
// CHECK-NEXT:    float *[[SM:v[0-9]+]] = reinterpret_cast<float *>(state + 3520);
// CHECK-NEXT:    float *[[SR:v[0-9]+]] = reinterpret_cast<float *>(state + 3584);
// CHECK-NEXT:    ampc::cuda::launchCooperative("batchNormTrain<{{.*}}>", ampc::cuda::batchNormTrain<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, float>, 8u, 32, 0, ctx.stream, in0, [[T]], 2LL, 8LL, 16LL, 1LL, reinterpret_cast<float *>(state + {{[0-9]+}}), in1, in2, in3, in4, float(1.00000004749745131e-03), float(8.99999976158142090e-01), float(1.00000000000000000e+00), [[RM]], [[RV]], [[SM]], [[SR]], nullptr, false);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.batch_normalization"); // ampc.parallelism: row-by-block 8 rows of 32 (ampc.batch_normalization)
// CHECK-NOT:     ampc::cuda::launch
func.func @forward(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>, %bias: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e:3 = ampc.batch_normalization %x, %s, %bias, %m, %v : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %t:5 = ampc.batch_normalization %x, %s, %bias, %m, %v {epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %e#0, %t#0, %t#1, %t#2, %t#3, %t#4 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The adjoints: BatchNorm's (f16 data and data gradient, FP32 scale and
// parameter gradients, from the saved mean and inverse standard deviation)
// in one cooperative launch: a work item per channel sums g and g·x̂ into
// the partials, then, after a grid barrier, combines them, writes the
// input gradient and (the channel's first item) the Scale and B gradients;
// LayerNorm's a warp per row.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[DX:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 9984);
// CHECK-NEXT:    float *[[DS:v[0-9]+]] = reinterpret_cast<float *>(state + 10496);
// CHECK-NEXT:    float *[[DB:v[0-9]+]] = reinterpret_cast<float *>(state + 10560);
// CHECK-NEXT:    ampc::cuda::launchCooperative("batchNormGrad<{{.*}}>", ampc::cuda::batchNormGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, float>, 8u, 32, 0, ctx.stream, in0, in1, [[DX]], 2LL, 8LL, 16LL, 1LL, reinterpret_cast<float *>(state + {{[0-9]+}}), in2, in3, in4, true, [[DS]], [[DB]], nullptr, nullptr, nullptr);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.batch_norm_grad"); // ampc.parallelism: row-by-block 8 rows of 32 (ampc.batch_norm_grad)
// CHECK:         float *[[DL:v[0-9]+]] = reinterpret_cast<float *>(state + 10624);
// CHECK-NEXT:    ampc::cuda::launch("layerNormGradByWarp<{{.*}}>", ampc::cuda::layerNormGradByWarp<{{.*}}>, 4u, ampc::cuda::kThreads, 0, ctx.stream, in5, in5, in6, ampc::cuda::Strided{1, {64LL}, {1LL}}, in7, in8, [[DL]], 32LL, 64LL, nullptr);
func.func @forward(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %s: tensor<8xf32>, %bm: tensor<8xf32>, %br: tensor<8xf32>, %lx: tensor<2x16x64xf32>, %g: tensor<64xf32>, %lm: tensor<2x16x1xf32>, %lr: tensor<2x16x1xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x16x64xf32>) {
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %bm, %br : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  %1 = ampc.layer_norm_grad %lx, %lx, %g, %lm, %lr {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  return %0#0, %0#1, %0#2, %1 : tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x16x64xf32>
}

// -----

// Few channels of many elements (2 channels of 4·64·64): each channel's
// elements split over 2 work items (cudaBatchNormSplits), 4 in all (at
// most 4 blocks), then combined per channel by each item of the apply; 128
// threads a block (the tree's nodes below each item: 16384 / (2 · 128) =
// 64 terms each).
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launchCooperative("batchNormTrain<{{.*}}>", {{.*}}, 4u, 128, 0, ctx.stream, in0, v0, 4LL, 2LL, 4096LL, 2LL, reinterpret_cast<float *>(state + {{[0-9]+}}), in1, in2, in3, in4, float(9.99999974737875164e-06), float(8.99999976158142090e-01), float(1.00000000000000000e+00), v1, v2, nullptr, nullptr, nullptr, false);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.batch_normalization"); // ampc.parallelism: split 2 rows of 16384 (ampc.batch_normalization)
func.func @forward(%x: tensor<4x2x64x64xf32>, %s: tensor<2xf32>, %bias: tensor<2xf32>, %m: tensor<2xf32>, %v: tensor<2xf32>) -> (tensor<4x2x64x64xf32>, tensor<2xf32>, tensor<2xf32>) {
  %t:3 = ampc.batch_normalization %x, %s, %bias, %m, %v {training_mode = 1 : i64} : (tensor<4x2x64x64xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2x64x64xf32>, tensor<2xf32>, tensor<2xf32>)
  return %t#0, %t#1, %t#2 : tensor<4x2x64x64xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Rows of 1024 (a transformer's model dimension) run a block per row
// (layerNormByBlock, the grid the 8 rows).
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("layerNormByBlock<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>>", ampc::cuda::layerNormByBlock<{{.*}}>, 8u, ampc::cuda::kThreads, 0, ctx.stream, in0, {{v[0-9]+}}, {{v[0-9]+}}, {{v[0-9]+}}, 8LL, 1024LL, in1,
func.func @forward(%x: tensor<8x1024xf32>, %g: tensor<1024xf32>) -> (tensor<8x1024xf32>, tensor<8x1xf32>, tensor<8x1xf32>) {
  %y:3 = ampc.layer_normalization %x, %g {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<8x1024xf32>, tensor<1024xf32>) -> (tensor<8x1024xf32>, tensor<8x1xf32>, tensor<8x1xf32>)
  return %y#0, %y#1, %y#2 : tensor<8x1024xf32>, tensor<8x1xf32>, tensor<8x1xf32>
}

// -----

// A LayerNorm of FP32 data whose Y ampc-fold-casts gave the f16 of the
// cast it replaced (stored by the kernel, rounded once from FP32), and a
// layer_norm_grad reading f16 dY beside FP32 X (loaded by dY's own codec).
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("layerNormByWarp<float, ampc::cuda::As<float>, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::As<float>>", {{.*}}, ctx.stream, in0,
// CHECK:         ampc::cuda::launch("layerNormGradByWarp<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::AsF16>", {{.*}}, ctx.stream, in2, in0,
func.func @forward(%x: tensor<32x64xf32>, %g: tensor<64xf32>, %dy: tensor<32x64xf16>) -> (tensor<32x64xf16>, tensor<32x64xf32>) {
  %y:3 = ampc.layer_normalization %x, %g : (tensor<32x64xf32>, tensor<64xf32>) -> (tensor<32x64xf16>, tensor<32x1xf32>, tensor<32x1xf32>)
  %dx = ampc.layer_norm_grad %dy, %x, %g, %y#1, %y#2 : (tensor<32x64xf16>, tensor<32x64xf32>, tensor<64xf32>, tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x64xf32>
  return %y#0, %dx : tensor<32x64xf16>, tensor<32x64xf32>
}
