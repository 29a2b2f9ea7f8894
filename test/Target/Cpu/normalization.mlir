// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Layer and batch normalisation on the CPU target: FP32 statistics (the
// scale and bias converted or broadcast to FP32 first), the element type's
// load and store around them, epsilon as the f32 attribute's exact value.

// LayerNormalization over the last axis of f16 data: 32 rows of 64, mean
// and inverse standard deviation kept in f32 (offsets 4096 and 4224 after
// the 4096-byte f16 result), epsilon 1e-3.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    float *[[MEAN:v[0-9]+]] = reinterpret_cast<float *>(state + 4160);
// CHECK-NEXT:    float *[[RSTD:v[0-9]+]] = reinterpret_cast<float *>(state + 4288);
// CHECK-NEXT:    { static const int64_t dims[] = {64LL};
// CHECK-NEXT:      static const int64_t scaleStrides[] = {1LL};
// CHECK-NEXT:      float *scale = reinterpret_cast<float *>(state + 4416);
// CHECK-NEXT:      ampc::cpu::broadcast<float, ampc::cpu::AsF16>(in1, 1, dims, scaleStrides, scale);
// CHECK-NEXT:      static const int64_t biasStrides[] = {1LL};
// CHECK-NEXT:      float *bias = reinterpret_cast<float *>(state + 4672);
// CHECK-NEXT:      ampc::cpu::broadcast<float, ampc::cpu::AsF16>(in2, 1, dims, biasStrides, bias);
// CHECK-NEXT:      ampc::cpu::layerNorm<float, ampc::cpu::AsF16, ampc::cpu::AsF16, ampc::cpu::As<float>>(in0, [[Y]], [[MEAN]], [[RSTD]], 32LL, 64LL, scale, bias, float(1.00000004749745131e-03)); }
func.func @forward(%x: tensor<2x16x64xf16>, %g: tensor<64xf16>, %b: tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) {
  %y:3 = ampc.layer_normalization %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-03 : f32} : (tensor<2x16x64xf16>, tensor<64xf16>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return %y#0, %y#1, %y#2 : tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>
}

// -----

// BatchNormalization in inference mode normalises with the running
// statistics (N 2, C 8, 16 elements per plane, default epsilon 1e-5) and
// passes them through; in training mode it computes the batch statistics
// first (one pass: math::pairwiseMoments), normalises with them (epsilon
// 1e-3), returns the running statistics updated with ONNX's momentum 0.9
// (running * 0.9 + batch * 0.1) and, with saved_statistics, the batch mean
// and inverse standard deviation.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cpu::batchNorm<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, v0, 2LL, 8LL, 16LL, scale, bias, mean, variance, float(9.99999974737875164e-06), nullptr);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) v1[i] = static_cast<float>(mean[i]);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) v2[i] = static_cast<float>(variance[i]);
// CHECK:         float *[[T:v[0-9]+]] = reinterpret_cast<float *>(state + 1088);
// CHECK-NEXT:    float *[[RM:v[0-9]+]] = reinterpret_cast<float *>(state + 2112);
// CHECK-NEXT:    float *[[RV:v[0-9]+]] = reinterpret_cast<float *>(state + 2176);
// CHECK-NEXT:    float *[[SM:v[0-9]+]] = reinterpret_cast<float *>(state + 2240);
// CHECK-NEXT:    float *[[SR:v[0-9]+]] = reinterpret_cast<float *>(state + 2304);
// CHECK:         float *batchMean = reinterpret_cast<float *>(state + 2624);
// CHECK-NEXT:         float *batchVariance = reinterpret_cast<float *>(state + 2688);
// CHECK-NEXT:    ampc::cpu::channelStatistics<float, ampc::cpu::As<float>>(in0, 2LL, 8LL, 16LL, batchMean, batchVariance);
// CHECK-NEXT:    float *invStdDev = reinterpret_cast<float *>(state + 2752);
// CHECK-NEXT:    ampc::cpu::batchNorm<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[T]], 2LL, 8LL, 16LL, scale, bias, batchMean, batchVariance, float(1.00000004749745131e-03), invStdDev);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[SM]][i] = static_cast<float>(batchMean[i]);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[SR]][i] = static_cast<float>(invStdDev[i]);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[RM]][i] = static_cast<float>(mean[i] * float(8.99999976158142090e-01) + batchMean[i] * float(1.00000023841857910e-01));
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[RV]][i] = static_cast<float>(variance[i] * float(8.99999976158142090e-01) + batchVariance[i] * float(1.00000023841857910e-01));
func.func @forward(%x: tensor<2x8x4x4xf32>, %s: tensor<8xf32>, %bias: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) {
  %e:3 = ampc.batch_normalization %x, %s, %bias, %m, %v : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %t:5 = ampc.batch_normalization %x, %s, %bias, %m, %v {epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %e#0, %t#0, %t#1, %t#2, %t#3, %t#4 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

// The adjoints: BatchNorm's (training mode, from the saved mean and inverse
// standard deviation, f16 data, FP32 scale and parameter gradients) and LayerNorm's over the last axis (32 rows of 64,
// from the saved mean and inverse standard deviation).
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[DX:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    float *[[DS:v[0-9]+]] = reinterpret_cast<float *>(state + 576);
// CHECK-NEXT:    float *[[DB:v[0-9]+]] = reinterpret_cast<float *>(state + 640);
// CHECK:         ampc::cpu::batchNormGrad<float, ampc::cpu::AsF16, ampc::cpu::AsF16>(in0, in1, [[DX]], 2LL, 8LL, 16LL, scale, mean, invStdDev, true, gradScale, gradBias);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[DS]][i] = static_cast<float>(gradScale[i]);
// CHECK-NEXT:    for (int64_t i = 0; i < 8LL; ++i) [[DB]][i] = static_cast<float>(gradBias[i]);
// CHECK:         float *[[DL:v[0-9]+]] = reinterpret_cast<float *>(state + 704);
// CHECK:         ampc::cpu::layerNormGrad<float, ampc::cpu::As<float>, ampc::cpu::As<float>, ampc::cpu::As<float>, ampc::cpu::As<float>>(in5, in5, scale, in7, in8, [[DL]], 32LL, 64LL);
func.func @forward(%dy: tensor<2x8x4x4xf16>, %x: tensor<2x8x4x4xf16>, %s: tensor<8xf32>, %bm: tensor<8xf32>, %br: tensor<8xf32>, %lx: tensor<2x16x64xf32>, %g: tensor<64xf32>, %lm: tensor<2x16x1xf32>, %lr: tensor<2x16x1xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x16x64xf32>) {
  %0:3 = ampc.batch_norm_grad %dy, %x, %s, %bm, %br : (tensor<2x8x4x4xf16>, tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>)
  %1 = ampc.layer_norm_grad %lx, %lx, %g, %lm, %lr {axis = 2 : i64} : (tensor<2x16x64xf32>, tensor<2x16x64xf32>, tensor<64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>) -> tensor<2x16x64xf32>
  return %0#0, %0#1, %0#2, %1 : tensor<2x8x4x4xf16>, tensor<8xf32>, tensor<8xf32>, tensor<2x16x64xf32>
}

// -----

// A LayerNorm of FP32 data whose Y ampc-fold-casts gave the f16 of the
// cast it replaced (stored by the kernel, rounded once from FP32), and a
// layer_norm_grad reading f16 dY beside FP32 X (loaded by dY's own codec).
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cpu::layerNorm<float, ampc::cpu::As<float>, ampc::cpu::AsF16, ampc::cpu::As<float>>(in0,
// CHECK:         ampc::cpu::layerNormGrad<float, ampc::cpu::As<float>, ampc::cpu::As<float>, ampc::cpu::As<float>, ampc::cpu::AsF16>(in2, in0,
func.func @forward(%x: tensor<32x64xf32>, %g: tensor<64xf32>, %dy: tensor<32x64xf16>) -> (tensor<32x64xf16>, tensor<32x64xf32>) {
  %y:3 = ampc.layer_normalization %x, %g : (tensor<32x64xf32>, tensor<64xf32>) -> (tensor<32x64xf16>, tensor<32x1xf32>, tensor<32x1xf32>)
  %dx = ampc.layer_norm_grad %dy, %x, %g, %y#1, %y#2 : (tensor<32x64xf16>, tensor<32x64xf32>, tensor<64xf32>, tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x64xf32>
  return %y#0, %dx : tensor<32x64xf16>, tensor<32x64xf32>
}
