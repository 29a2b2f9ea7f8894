// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Convolutions on the CPU target: im2col + GEMM in ampc::cpu::conv (and
// its adjoints), with the window as ampc::cpu::Window = {spatial rank, input
// size, output size, kernel, strides, begin pads, end pads, dilations} and
// (input, weight, bias, output, N, C, M, group, window) arguments, then
// (conv and the data gradient) the images per GEMM and the scratch: the
// columns and the staging of a chunk of images (null for one image; the
// weight gradient takes one image per GEMM and the columns only). FP32
// results are written in place; 16-bit operands are widened and the result
// rounded once from an FP32 accumulator.

// A 2-D f32 convolution with bias, pads 1 and strides 2: 1x3x8x8 by
// 16x3x3x3 into 1x16x4x4 at offset 0.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      const float *w_in0 = in0;
// CHECK-NEXT:      const float *w_in1 = in1;
// CHECK-NEXT:      const float *w_in2 = in2;
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}};
// CHECK-NEXT:      ampc::cpu::conv<float>(w_in0, w_in1, w_in2, [[Y]], 1LL, 3LL, 16LL, 1LL, win, 1LL, reinterpret_cast<float *>(state + 1088), nullptr);
// CHECK-NEXT:    }
// CHECK-NEXT:    std::memcpy(outputs[0], [[Y]], 1024ULL);
func.func @forward(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x16x4x4xf32> {
  %0 = ampc.conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  return %0 : tensor<1x16x4x4xf32>
}

// -----

// A 1-D grouped, dilated f16 convolution without bias: group 2, dilation 2
// (7 -> 3), widened operands, FP32 accumulator, f16 store. Output planes of
// 3 positions: both images in one GEMM per group (cpuConvImagesPerGemm),
// through the columns and the staging.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *w_in0 = reinterpret_cast<float *>(state + 128); ampc::cpu::widen<ampc::cpu::AsF16>(in0, 56LL, w_in0);
// CHECK-NEXT:      float *w_in1 = reinterpret_cast<float *>(state + 384); ampc::cpu::widen<ampc::cpu::AsF16>(in1, 24LL, w_in1);
// CHECK-NEXT:      static const ampc::cpu::Window win = {1, {7LL}, {3LL}, {3LL}, {1LL}, {0LL}, {0LL}, {2LL}};
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:      ampc::cpu::conv<float>(w_in0, w_in1, nullptr, acc, 2LL, 4LL, 4LL, 2LL, win, 2LL, reinterpret_cast<float *>(state + 640), reinterpret_cast<float *>(state + 832));
// CHECK-NEXT:      for (int64_t i = 0; i < 24LL; ++i) [[Y]][i] = ampc::cpu::storeF16(acc[i]);
func.func @forward(%x: tensor<2x4x7xf16>, %w: tensor<4x2x3xf16>) -> tensor<2x4x3xf16> {
  %0 = ampc.conv %x, %w {group = 2 : i64, dilations = array<i64: 2>} : (tensor<2x4x7xf16>, tensor<4x2x3xf16>) -> tensor<2x4x3xf16>
  return %0 : tensor<2x4x3xf16>
}

// -----

// The adjoints in f16: the data gradient from (dy, W) and the weight
// gradient from (x, dy), each with the forward convolution's window, into
// offsets 0 and 384 (the 384-byte data gradient before it).
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[DX:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *w_in2 = reinterpret_cast<float *>(state + 448); ampc::cpu::widen<ampc::cpu::AsF16>(in2, 256LL, w_in2);
// CHECK-NEXT:      float *w_in1 = reinterpret_cast<float *>(state + 1472); ampc::cpu::widen<ampc::cpu::AsF16>(in1, 432LL, w_in1);
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}};
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 3200);
// CHECK-NEXT:      ampc::cpu::convBackwardData<float>(w_in2, w_in1, acc, 1LL, 3LL, 16LL, 1LL, win, 1LL, reinterpret_cast<float *>(state + 3968), nullptr);
// CHECK-NEXT:      for (int64_t i = 0; i < 192LL; ++i) [[DX]][i] = ampc::cpu::storeF16(acc[i]);
// CHECK-NEXT:    }
// CHECK-NEXT:    uint16_t *[[DW:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 448);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *w_in0 = reinterpret_cast<float *>(state + 1344); ampc::cpu::widen<ampc::cpu::AsF16>(in0, 192LL, w_in0);
// CHECK-NEXT:      float *w_in2 = reinterpret_cast<float *>(state + 2112); ampc::cpu::widen<ampc::cpu::AsF16>(in2, 256LL, w_in2);
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}};
// CHECK-NEXT:      float *acc = reinterpret_cast<float *>(state + 3136);
// CHECK-NEXT:      ampc::cpu::convBackwardWeight<float>(w_in0, w_in2, acc, 1LL, 3LL, 16LL, 1LL, win, reinterpret_cast<float *>(state + 4864));
// CHECK-NEXT:      for (int64_t i = 0; i < 432LL; ++i) [[DW]][i] = ampc::cpu::storeF16(acc[i]);
func.func @forward(%x: tensor<1x3x8x8xf16>, %w: tensor<16x3x3x3xf16>, %dy: tensor<1x16x4x4xf16>) -> (tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>) {
  %0 = ampc.conv_backward_data %dy, %w {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x16x4x4xf16>, tensor<16x3x3x3xf16>) -> tensor<1x3x8x8xf16>
  %1 = ampc.conv_backward_weight %x, %dy {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<1x16x4x4xf16>) -> tensor<16x3x3x3xf16>
  return %0, %1 : tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>
}
