// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Pooling on the CPU target: ampc::cpu kernels over NCHW with the window
// as ampc::cpu::Window = {spatial rank, input size, output size, kernel,
// strides, begin pads, end pads, dilations}, the channel count N*C, and the
// load and store of the element type (FP32 arithmetic, one rounding).

// MaxPool with indices (int64, offset 256 after the 256-byte values),
// AveragePool counting pads (the `true`), padded at the top and right only
// (begin pads {1, 0}, end pads {0, 1}: 7x7), GlobalAveragePool over 64
// elements per channel.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[M:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    int64_t *[[I:v[0-9]+]] = reinterpret_cast<int64_t *>(state + 320);
// CHECK-NEXT:    {
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {4LL, 4LL}, {3LL, 3LL}, {2LL, 2LL}, {1LL, 1LL}, {1LL, 1LL}, {1LL, 1LL}};
// CHECK-NEXT:      ampc::cpu::maxPool<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[M]], [[I]], 4LL, win, false, reinterpret_cast<int64_t *>(state + 832), nullptr);
// CHECK-NEXT:    }
// CHECK-NEXT:    float *[[A:v[0-9]+]] = reinterpret_cast<float *>(state + 832);
// CHECK-NEXT:    {
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {7LL, 7LL}, {3LL, 3LL}, {1LL, 1LL}, {1LL, 0LL}, {0LL, 1LL}, {1LL, 1LL}};
// CHECK-NEXT:      ampc::cpu::averagePool<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[A]], 4LL, win, true, reinterpret_cast<int64_t *>(state + 1664));
// CHECK-NEXT:    }
// CHECK-NEXT:    float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 1664);
// CHECK-NEXT:    ampc::cpu::globalAveragePool<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, [[G]], 4LL, 64LL);
func.func @forward(%img: tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>, tensor<1x4x7x7xf32>, tensor<1x4x1x1xf32>) {
  %0:2 = ampc.max_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x4x8x8xf32>) -> (tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>)
  %1 = ampc.average_pool %img {kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 0, 0, 1>, count_include_pad = 1 : i64} : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
  %2 = ampc.global_average_pool %img : (tensor<1x4x8x8xf32>) -> tensor<1x4x1x1xf32>
  return %0#0, %0#1, %1, %2 : tensor<1x4x4x4xf32>, tensor<1x4x4x4xi64>, tensor<1x4x7x7xf32>, tensor<1x4x1x1xf32>
}

// -----

// The adjoints in f16: MaxPool's scatters through the indices into an 8x8
// input, AveragePool's (ceil mode: 7x7 from 4x4 with kernel and stride 2,
// pads counted) spreads each gradient over its window; f16 loads and
// stores.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[GM:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    {
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {8LL, 8LL}, {4LL, 4LL}, {2LL, 2LL}, {2LL, 2LL}, {0LL, 0LL}, {0LL, 0LL}, {1LL, 1LL}};
// CHECK-NEXT:      ampc::cpu::maxPoolGrad<float, ampc::cpu::AsF16, ampc::cpu::AsF16>(in0, in1, [[GM]], 8LL, win, false, reinterpret_cast<float *>(state + 1088));
// CHECK-NEXT:    }
// CHECK-NEXT:    uint16_t *[[GA:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 1088);
// CHECK-NEXT:    {
// CHECK-NEXT:      static const ampc::cpu::Window win = {2, {7LL, 7LL}, {4LL, 4LL}, {2LL, 2LL}, {2LL, 2LL}, {0LL, 0LL}, {0LL, 0LL}, {1LL, 1LL}};
// CHECK-NEXT:      ampc::cpu::averagePoolGrad<float, ampc::cpu::AsF16, ampc::cpu::AsF16>(in0, [[GA]], 8LL, win, true, reinterpret_cast<int64_t *>(state + 1920), reinterpret_cast<int64_t *>(state + 2432), reinterpret_cast<float *>(state + 2560));
func.func @forward(%p: tensor<1x8x4x4xf16>, %i: tensor<1x8x4x4xi64>) -> (tensor<1x8x8x8xf16>, tensor<1x8x7x7xf16>) {
  %0 = ampc.max_pool_grad %p, %i {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>} : (tensor<1x8x4x4xf16>, tensor<1x8x4x4xi64>) -> tensor<1x8x8x8xf16>
  %1 = ampc.average_pool_grad %p {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>, ceil_mode = 1 : i64, count_include_pad = 1 : i64} : (tensor<1x8x4x4xf16>) -> tensor<1x8x7x7xf16>
  return %0, %1 : tensor<1x8x8x8xf16>, tensor<1x8x7x7xf16>
}
