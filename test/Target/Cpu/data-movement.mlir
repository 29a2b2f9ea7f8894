// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// Data movement on the CPU target. Transpose and Slice are strided copies
// (output dims; per output dimension the input stride; the first
// element's offset); Concat copies each part into its place; Gather checks
// its indices; Expand is an elementwise loop with stride 0; Reshape,
// Squeeze and the like are views: no code, their users read the operand's
// buffer.

// Transpose (2, 0, 1) of 2x3x4; an f16 Slice with a negative step
// (last column, step -3: start 7, stride -3); Concat of 2x8 and 3x8 rows
// (16 and 24 elements into 40, at 0 and 16); Gather of 2x3 int64 rows of a
// 10x6 table; a Reshape returned as it is (its operand, the input, is
// copied out); Expand of a row.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[T:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    { static const int64_t dims[] = {4LL, 2LL, 3LL}; static const int64_t s0[] = {1LL, 12LL, 4LL}; const int64_t *strides[] = {s0};
// CHECK-NEXT:      ampc::cpu::parallelForEach<1>(3, dims, strides, [&](int64_t o, int64_t a) { [[T]][o] = in0[0LL + a]; }); }
// CHECK-NEXT:    uint16_t *[[S:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 192);
// CHECK-NEXT:    { static const int64_t dims[] = {2LL, 3LL}; static const int64_t s0[] = {8LL, -3LL}; const int64_t *strides[] = {s0};
// CHECK-NEXT:      ampc::cpu::parallelForEach<1>(2, dims, strides, [&](int64_t o, int64_t a) { [[S]][o] = in1[7LL + a]; }); }
// CHECK-NEXT:    uint16_t *[[C:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 256);
// CHECK-NEXT:    ampc::cpu::concatPart(in1, [[C]], 1LL, 16LL, 40LL, 0LL);
// CHECK-NEXT:    ampc::cpu::concatPart(in2, [[C]], 1LL, 24LL, 40LL, 16LL);
// CHECK-NEXT:    float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 384);
// CHECK-NEXT:    if (!(ampc::cpu::gather(in3, in4, [[G]], 1LL, 10LL, 6LL, 6LL))) return ampc::cpu::fail(state + {{[0-9]+}}, "ampc.gather: an index is out of range");
// CHECK-NEXT:    float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 576);
// CHECK-NEXT:    { static const int64_t dims[] = {3LL, 4LL};
// CHECK-NEXT:      static const int64_t s0[] = {0LL, 1LL};
// CHECK:           [[E]][o] = static_cast<float>((x0));
// CHECK:         std::memcpy(outputs[0], [[T]], 96ULL);
// CHECK-NEXT:    std::memcpy(outputs[1], [[S]], 12ULL);
// CHECK-NEXT:    std::memcpy(outputs[2], [[C]], 80ULL);
// CHECK-NEXT:    std::memcpy(outputs[3], [[G]], 144ULL);
// CHECK-NEXT:    std::memcpy(outputs[4], in0, 96ULL);
// CHECK-NEXT:    std::memcpy(outputs[5], [[E]], 48ULL);
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

// A Slice of a Reshape (a view: the slice reads the input at element 8,
// row 2 of 6x4), then a Squeeze (a view of the slice's buffer, which the
// Exp reads); GatherGrad accumulates rows of the 10x6 table in FP32;
// SliceGrad zero-fills 2x8 and scatters with stride 2 from column 0.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[S:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    { static const int64_t dims[] = {1LL, 4LL}; static const int64_t s0[] = {4LL, 1LL}; const int64_t *strides[] = {s0};
// CHECK-NEXT:      ampc::cpu::parallelForEach<1>(2, dims, strides, [&](int64_t o, int64_t a) { [[S]][o] = in0[8LL + a]; }); }
// CHECK-NEXT:    float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK:           const float x0 = [[S]][i0];
// CHECK-NEXT:      [[E]][o] = static_cast<float>((std::exp(x0)));
// CHECK:         float *[[GG:v[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK:           if (!(ampc::cpu::gatherGrad<float>(grad, in2, out, 1LL, 10LL, 6LL, 6LL))) return ampc::cpu::fail(state + {{[0-9]+}}, "ampc.gather_grad: an index is out of range");
// CHECK-NEXT:      for (int64_t i = 0; i < 60LL; ++i) [[GG]][i] = static_cast<float>(out[i]);
// CHECK:         float *[[SG:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    { static const int64_t dims[] = {2LL, 4LL}; static const int64_t strides[] = {8LL, 2LL};
// CHECK-NEXT:      ampc::cpu::sliceGrad(in3, [[SG]], 16LL, 2, dims, strides, 0LL); }
func.func @forward(%x: tensor<2x3x4xf32>, %dg: tensor<2x3x6xf32>, %ids: tensor<2x3xi64>, %ds: tensor<2x4xf32>) -> (tensor<4xf32>, tensor<10x6xf32>, tensor<2x8xf32>) {
  %0 = ampc.reshape %x : tensor<2x3x4xf32> to tensor<6x4xf32>
  %1 = ampc.slice %0 {axes = array<i64: 0>, ends = array<i64: 3>, starts = array<i64: 2>, steps = array<i64: 1>} : (tensor<6x4xf32>) -> tensor<1x4xf32>
  %2 = ampc.squeeze %1 {axes = array<i64: 0>} : (tensor<1x4xf32>) -> tensor<4xf32>
  %3 = ampc.exp %2 : tensor<4xf32>
  %4 = ampc.gather_grad %dg, %ids {axis = 0 : i64} : (tensor<2x3x6xf32>, tensor<2x3xi64>) -> tensor<10x6xf32>
  %5 = ampc.slice_grad %ds {axes = array<i64: 1>, ends = array<i64: 8>, starts = array<i64: 0>, steps = array<i64: 2>} : (tensor<2x4xf32>) -> tensor<2x8xf32>
  return %3, %4, %5 : tensor<4xf32>, tensor<10x6xf32>, tensor<2x8xf32>
}
