// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// The CPU target's elementwise code from kernel-level MLIR: each fusion (or
// lone elementwise op) is one ampc::cpu::parallelForEach loop nest over the output,
// with a stride list per input (0 where it broadcasts), a scalar expression
// per op, and exact rounding where a 16-bit value is stored.

// Bias add, Relu and the cast to f16 fuse into one loop writing the arena at
// offset 0; the bias row broadcasts along dimension 0; the only rounding is
// the f16 store.
// CHECK-LABEL: static int32_t infer(
// CHECK-NEXT:    unsigned char *state
// CHECK-NEXT:    (void)state;
// CHECK-NEXT:    ampc::cpu::PoolScope threads(ampc::cpu::threadsAt(state + {{[0-9]+}}));
// CHECK-NEXT:    const float *[[X:in0]] = static_cast<const float *>(inputs[0]);
// CHECK-NEXT:    const float *[[B:in1]] = static_cast<const float *>(inputs[1]);
// CHECK-NEXT:    uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    { static const int64_t dims[] = {8LL, 64LL};
// CHECK-NEXT:      static const int64_t s0[] = {64LL, 1LL};
// CHECK-NEXT:      static const int64_t s1[] = {0LL, 1LL};
// CHECK-NEXT:      const int64_t *strides[] = {s0, s1};
// CHECK-NEXT:      ampc::cpu::parallelForEach<2>(2, dims, strides, [&](int64_t o, int64_t i0, int64_t i1) {
// CHECK-NEXT:        const float x0 = [[X]][i0];
// CHECK-NEXT:        const float x1 = [[B]][i1];
// CHECK-NEXT:        const float t0 = static_cast<float>((x0 + x1));
// CHECK-NEXT:        const float t1 = static_cast<float>((!(t0 <= 0) ? t0 : float(0)));
// CHECK-NEXT:        [[Y]][o] = ampc::cpu::storeF16((t1));
// CHECK-NEXT:      }); }
// CHECK-NEXT:    std::memcpy(outputs[0], [[Y]], 1024ULL);
func.func @forward(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> tensor<8x64xf16> {
  %0 = ampc.add %x, %b : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %1 = ampc.relu %0 : tensor<8x64xf32>
  %2 = ampc.cast %1 : tensor<8x64xf32> to tensor<8x64xf16>
  return %2 : tensor<8x64xf16>
}

// -----

// An f16 chain: the intermediates stay in registers but are rounded to f16
// after each op, as an f16 tensor between two kernels would be, so that
// fusing changes no result; the cast to f32 is exact.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK:         ampc::cpu::parallelForEach<2>(2, dims, strides, [&](int64_t o, int64_t i0, int64_t i1) {
// CHECK-NEXT:      const float x0 = ampc::cpu::loadF16(in0[i0]);
// CHECK-NEXT:      const float x1 = ampc::cpu::loadF16(in1[i1]);
// CHECK-NEXT:      const float t0 = ampc::cpu::loadF16(ampc::cpu::storeF16((x0 * x1)));
// CHECK-NEXT:      const float t1 = ampc::cpu::loadF16(ampc::cpu::storeF16((std::exp(t0))));
// CHECK-NEXT:      [[Y]][o] = static_cast<float>((t1));
// CHECK-NEXT:    }); }
// CHECK-NEXT:    std::memcpy(outputs[0], [[Y]], 256ULL);
func.func @forward(%x: tensor<4x16xf16>, %y: tensor<4x16xf16>) -> tensor<4x16xf32> {
  %0 = ampc.mul %x, %y : (tensor<4x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %1 = ampc.exp %0 : tensor<4x16xf16>
  %2 = ampc.cast %1 : tensor<4x16xf16> to tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}

// -----

// A value also returned is computed once (its own loop, at offset 0) and
// read by the fusion (at offset 64); Equal and Where fuse with a boolean in
// between; tanh-Gelu's expression; the store to bf16 rounds.
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK:           [[E]][o] = static_cast<float>((std::exp(x0)));
// CHECK:         uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 128);
// CHECK:         ampc::cpu::parallelForEach<2>(1, dims, strides, [&](int64_t o, int64_t i0, int64_t i1) {
// CHECK-NEXT:      const float x0 = [[E]][i0];
// CHECK-NEXT:      const float x1 = in1[i1];
// CHECK-NEXT:      const bool t0 = (static_cast<uint8_t>((x0 == x1)) != 0);
// CHECK-NEXT:      const float t1 = static_cast<float>((t0 ? x0 : x1));
// CHECK-NEXT:      const float t2 = static_cast<float>((float(0.5) * t1 * (float(1) + std::tanh(float(0.7978845608028654) * (t1 + float(0.044715) * t1 * t1 * t1)))));
// CHECK-NEXT:      [[H]][o] = ampc::cpu::storeBf16((t2));
// CHECK-NEXT:    }); }
// CHECK-NEXT:    std::memcpy(outputs[0], [[H]], 32ULL);
// CHECK-NEXT:    std::memcpy(outputs[1], [[E]], 64ULL);
func.func @forward(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xbf16>, tensor<16xf32>) {
  %e = ampc.exp %x : tensor<16xf32>
  %c = ampc.equal %e, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %w = ampc.where %c, %e, %y : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %g = ampc.gelu %w {approximate = #ampc<approximate tanh>} : tensor<16xf32>
  %h = ampc.cast %g : tensor<16xf32> to tensor<16xbf16>
  return %h, %e : tensor<16xbf16>, tensor<16xf32>
}

// -----

// f64 computes in double (LeakyRelu's alpha is the f32 attribute's exact
// value); a scalar exponent broadcasts to every element (strides 0);
// integers divide as integers, operands in order.
// CHECK-LABEL: static int32_t infer(
// CHECK:         double *[[Y:v[0-9]+]] = reinterpret_cast<double *>(state + 64);
// CHECK-NEXT:    { static const int64_t dims[] = {2LL, 3LL};
// CHECK-NEXT:      static const int64_t s0[] = {3LL, 1LL};
// CHECK-NEXT:      static const int64_t s1[] = {0LL, 0LL};
// CHECK:           const double x0 = in0[i0];
// CHECK-NEXT:      const int32_t x1 = in2[i1];
// CHECK-NEXT:      const double t0 = static_cast<double>((x0 >= 0 ? x0 : double(2.000000030e-01) * x0));
// CHECK-NEXT:      const double t1 = static_cast<double>((double(1) / (double(1) + std::exp(-t0))));
// CHECK-NEXT:      [[Y]][o] = static_cast<double>((std::pow(t1, x1)));
// CHECK:         int64_t *[[Q:v[0-9]+]] = reinterpret_cast<int64_t *>(state + 128);
// CHECK:           const int64_t x0 = in1[i0];
// CHECK-NEXT:      const int64_t x1 = in3[i1];
// CHECK-NEXT:      [[Q]][o] = static_cast<int64_t>((x0 / x1));
func.func @forward(%x: tensor<2x3xf64>, %i: tensor<3xi64>, %e: tensor<i32>, %j: tensor<3xi64>) -> (tensor<2x3xf64>, tensor<3xi64>) {
  %0 = ampc.leaky_relu %x {alpha = 0.2 : f32} : tensor<2x3xf64>
  %1 = ampc.sigmoid %0 : tensor<2x3xf64>
  %2 = ampc.pow %1, %e : (tensor<2x3xf64>, tensor<i32>) -> tensor<2x3xf64>
  %3 = ampc.div %i, %j : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %2, %3 : tensor<2x3xf64>, tensor<3xi64>
}

// -----

// Clip with the bounds ONNX leaves out at their extremes (-inf, +inf) and a
// NaN constant: C++ has no literals for them (formatv printed "INF", which
// did not compile), so the source names std::numeric_limits. The clip body
// is numpy's min(max(x, lo), hi); Mod with fmod 0 takes the divisor's sign
// and gives 0 for a zero divisor instead of trapping.
// CHECK: static const float c{{[0-9]+}}[] = {-std::numeric_limits<float>::infinity()};
// CHECK: static const float c{{[0-9]+}}[] = {std::numeric_limits<float>::infinity()};
// CHECK: static const float c{{[0-9]+}}[] = {std::numeric_limits<float>::quiet_NaN()};
// CHECK-LABEL: static int32_t infer(
// CHECK:         [[Y:v[0-9]+]][o] = static_cast<float>(([&] { const float v = x0 < x1 ? x1 : x0; return v > x2 ? x2 : v; }()));
// CHECK:         [[M:v[0-9]+]][o] = static_cast<int64_t>((x1 == 0 ? int64_t(0) : [&] { const int64_t r = x0 % x1; return (r != 0 && ((r < 0) != (x1 < 0))) ? int64_t(r + x1) : r; }()));
func.func @forward(%x: tensor<4xf32>, %a: tensor<4xi64>, %b: tensor<4xi64>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xi64>) {
  %lo = ampc.constant dense<0xFF800000> : tensor<f32>
  %hi = ampc.constant dense<0x7F800000> : tensor<f32>
  %nan = ampc.constant dense<0x7FC00000> : tensor<f32>
  %0 = ampc.clip %x, %lo, %hi : (tensor<4xf32>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
  %1 = ampc.add %x, %nan : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %2 = ampc.mod %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  return %0, %1, %2 : tensor<4xf32>, tensor<4xf32>, tensor<4xi64>
}

// -----

// A fusion with two results (ampc-fuse-horizontal): one loop writing both
// outputs, each value rounded once to its type and stored.
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cpu::parallelForEach<2>(1, dims, strides, [&](int64_t o, int64_t i0, int64_t i1) {
// CHECK-NEXT:      const float x0 = in0[i0];
// CHECK-NEXT:      const float x1 = ampc::cpu::loadF16(in1[i1]);
// CHECK-NEXT:      const float t0 = static_cast<float>((std::exp(x0)));
// CHECK-NEXT:      const float t1 = ampc::cpu::loadF16(ampc::cpu::storeF16((-x1)));
// CHECK-NEXT:      [[A:v[0-9]+]][o] = static_cast<float>(t0);
// CHECK-NEXT:      [[B:v[0-9]+]][o] = ampc::cpu::storeF16(t1);
// CHECK-NEXT:    }); }
func.func @forward(%x: tensor<8xf32>, %y: tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  %0:2 = ampc.fusion(%x, %y) : (tensor<8xf32>, tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf16>):
    %e = ampc.exp %a : tensor<8xf32>
    %n = ampc.neg %b : tensor<8xf16>
    ampc.yield %e, %n : tensor<8xf32>, tensor<8xf16>
  }
  return %0#0, %0#1 : tensor<8xf32>, tensor<8xf16>
}
