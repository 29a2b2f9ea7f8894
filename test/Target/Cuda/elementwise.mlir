// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// The CUDA target's elementwise kernels from kernel-level MLIR: each fusion
// (or lone elementwise op) is one generated __global__ kernel, a grid-stride
// loop over the output that computes each input's index from the output
// index (broadcast dimensions drop out), with the CPU target's scalar
// expressions and rounding, launched on the model's stream.

// Bias add, Relu and the cast to f16: one kernel; the bias index is the
// output index modulo 64; the f16 store is the only rounding. The launch
// covers 512 elements and writes the arena at offset 0.
// CHECK-LABEL: // k0: ampc.add ampc.relu ampc.cast
// CHECK-NEXT:  __global__ void __launch_bounds__(ampc::cuda::kThreads) k0(const float *__restrict__ a0, const float *__restrict__ a1, uint16_t *__restrict__ out) {
// CHECK-NEXT:    AMPC_FOR(o, 512LL) {
// CHECK-NEXT:      const float x0 = a0[o];
// CHECK-NEXT:      int64_t i1 = 0; { int64_t r = o; i1 += (r % 64LL) * 1LL; r /= 64LL; }
// CHECK-NEXT:      const float x1 = a1[i1];
// CHECK-NEXT:      const float t0 = static_cast<float>((x0 + x1));
// CHECK-NEXT:      const float t1 = static_cast<float>((!(t0 <= 0) ? t0 : float(0)));
// CHECK-NEXT:      out[o] = ampc::cuda::storeF16((t1));
// CHECK-NEXT:    }
// CHECK-NEXT:  }
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[Y:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 2368);
// CHECK-NEXT:    ampc::cuda::launch("k0", k0, ampc::cuda::blocks(512LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in1, [[Y]]);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.cast");
// CHECK-NEXT:    AMPC_CUDA(ctx, cudaMemcpyAsync(outputs[0], [[Y]], 1024ULL, ampc::cuda::toCaller(ctx), ctx.stream), "output 0");
// CHECK-NEXT:    return ampc::cuda::synchronize(ctx);
func.func @forward(%x: tensor<8x64xf32>, %b: tensor<64xf32>) -> tensor<8x64xf16> {
  %0 = ampc.add %x, %b : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
  %1 = ampc.relu %0 : tensor<8x64xf32>
  %2 = ampc.cast %1 : tensor<8x64xf32> to tensor<8x64xf16>
  return %2 : tensor<8x64xf16>
}

// -----

// An f16 chain: each intermediate is rounded to f16 in registers, as the
// CPU target does, so the two targets agree bit for bit.
// CHECK-LABEL: // k0: ampc.mul ampc.exp ampc.cast
// CHECK-NEXT:  k0(const uint16_t *__restrict__ a0, const uint16_t *__restrict__ a1, float *__restrict__ out) {
// CHECK-NEXT:    AMPC_FOR(o, 64LL) {
// CHECK-NEXT:      const float x0 = ampc::cuda::loadF16(a0[o]);
// CHECK-NEXT:      const float x1 = ampc::cuda::loadF16(a1[o]);
// CHECK-NEXT:      const float t0 = ampc::cuda::loadF16(ampc::cuda::storeF16((x0 * x1)));
// CHECK-NEXT:      const float t1 = ampc::cuda::loadF16(ampc::cuda::storeF16((std::exp(t0))));
// CHECK-NEXT:      out[o] = static_cast<float>((t1));
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[Y:v[0-9]+]] = reinterpret_cast<float *>(state + 320);
// CHECK-NEXT:    ampc::cuda::launch("k0", k0, ampc::cuda::blocks(64LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in1, [[Y]]);
func.func @forward(%x: tensor<4x16xf16>, %y: tensor<4x16xf16>) -> tensor<4x16xf32> {
  %0 = ampc.mul %x, %y : (tensor<4x16xf16>, tensor<4x16xf16>) -> tensor<4x16xf16>
  %1 = ampc.exp %0 : tensor<4x16xf16>
  %2 = ampc.cast %1 : tensor<4x16xf16> to tensor<4x16xf32>
  return %2 : tensor<4x16xf32>
}

// -----

// A value also returned is its own kernel (k0, offset 0) that the fusion
// (k1, offset 64) reads; Equal, Where, tanh-Gelu and the bf16 store.
// CHECK-LABEL: // k0: ampc.exp
// CHECK-NEXT:  k0(const float *__restrict__ a0, float *__restrict__ out) {
// CHECK-NEXT:    AMPC_FOR(o, 16LL) {
// CHECK-NEXT:      const float x0 = a0[o];
// CHECK-NEXT:      out[o] = static_cast<float>((std::exp(x0)));
// CHECK:       // k1: ampc.equal ampc.where ampc.gelu ampc.cast
// CHECK-NEXT:  k1(const float *__restrict__ a0, const float *__restrict__ a1, uint16_t *__restrict__ out) {
// CHECK-NEXT:    AMPC_FOR(o, 16LL) {
// CHECK-NEXT:      const float x0 = a0[o];
// CHECK-NEXT:      const float x1 = a1[o];
// CHECK-NEXT:      const bool t0 = (static_cast<uint8_t>((x0 == x1)) != 0);
// CHECK-NEXT:      const float t1 = static_cast<float>((t0 ? x0 : x1));
// CHECK-NEXT:      const float t2 = static_cast<float>((float(0.5) * t1 * (float(1) + std::tanh(float(0.7978845608028654) * (t1 + float(0.044715) * t1 * t1 * t1)))));
// CHECK-NEXT:      out[o] = ampc::cuda::storeBf16((t2));
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[E:v[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK-NEXT:    ampc::cuda::launch("k0", k0, ampc::cuda::blocks(16LL), ampc::cuda::kThreads, 0, ctx.stream, in0, [[E]]);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.exp");
// CHECK-NEXT:    uint16_t *[[H:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("k1", k1, ampc::cuda::blocks(16LL), ampc::cuda::kThreads, 0, ctx.stream, [[E]], in1, [[H]]);
// CHECK:         cudaMemcpyAsync(outputs[0], [[H]], 32ULL,
// CHECK-NEXT:    cudaMemcpyAsync(outputs[1], [[E]], 64ULL,
func.func @forward(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xbf16>, tensor<16xf32>) {
  %e = ampc.exp %x : tensor<16xf32>
  %c = ampc.equal %e, %y : (tensor<16xf32>, tensor<16xf32>) -> tensor<16xi1>
  %w = ampc.where %c, %e, %y : (tensor<16xi1>, tensor<16xf32>, tensor<16xf32>) -> tensor<16xf32>
  %g = ampc.gelu %w {approximate = #ampc<approximate tanh>} : tensor<16xf32>
  %h = ampc.cast %g : tensor<16xf32> to tensor<16xbf16>
  return %h, %e : tensor<16xbf16>, tensor<16xf32>
}

// -----

// f64 in double; a scalar exponent's index gets no term from the output
// index (it stays 0); integers divide as integers, operands in order.
// CHECK-LABEL: // k0: ampc.leaky_relu ampc.sigmoid ampc.pow
// CHECK-NEXT:  k0(const double *__restrict__ a0, const int32_t *__restrict__ a1, double *__restrict__ out) {
// CHECK-NEXT:    AMPC_FOR(o, 6LL) {
// CHECK-NEXT:      const double x0 = a0[o];
// CHECK-NEXT:      int64_t i1 = 0; { int64_t r = o; r /= 3LL; }
// CHECK-NEXT:      const int32_t x1 = a1[i1];
// CHECK-NEXT:      const double t0 = static_cast<double>((x0 >= 0 ? x0 : double(2.000000030e-01) * x0));
// CHECK-NEXT:      const double t1 = static_cast<double>((double(1) / (double(1) + std::exp(-t0))));
// CHECK-NEXT:      out[o] = static_cast<double>((std::pow(t1, x1)));
// CHECK:       // k1: ampc.div
// CHECK-NEXT:  k1(const int64_t *__restrict__ a0, const int64_t *__restrict__ a1, int64_t *__restrict__ out) {
// CHECK:           out[o] = static_cast<int64_t>((x0 / x1));
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("k0", k0, ampc::cuda::blocks(6LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in2, v{{[0-9]+}});
// CHECK:         int64_t *[[Q:v[0-9]+]] = reinterpret_cast<int64_t *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("k1", k1, ampc::cuda::blocks(3LL), ampc::cuda::kThreads, 0, ctx.stream, in1, in3, [[Q]]);
func.func @forward(%x: tensor<2x3xf64>, %i: tensor<3xi64>, %e: tensor<i32>, %j: tensor<3xi64>) -> (tensor<2x3xf64>, tensor<3xi64>) {
  %0 = ampc.leaky_relu %x {alpha = 0.2 : f32} : tensor<2x3xf64>
  %1 = ampc.sigmoid %0 : tensor<2x3xf64>
  %2 = ampc.pow %1, %e : (tensor<2x3xf64>, tensor<i32>) -> tensor<2x3xf64>
  %3 = ampc.div %i, %j : (tensor<3xi64>, tensor<3xi64>) -> tensor<3xi64>
  return %2, %3 : tensor<2x3xf64>, tensor<3xi64>
}

// -----

// A fusion with two results (ampc-fuse-horizontal): one kernel writing
// both outputs, each value rounded once to its type and stored.
// CHECK-LABEL: // k0: ampc.exp ampc.neg
// CHECK-NEXT:  k0(const float *__restrict__ a0, const uint16_t *__restrict__ a1, float *__restrict__ out0, uint16_t *__restrict__ out1) {
// CHECK-NEXT:    AMPC_FOR(o, 8LL) {
// CHECK-NEXT:      const float x0 = a0[o];
// CHECK-NEXT:      const float x1 = ampc::cuda::loadF16(a1[o]);
// CHECK-NEXT:      const float t0 = static_cast<float>((std::exp(x0)));
// CHECK-NEXT:      const float t1 = ampc::cuda::loadF16(ampc::cuda::storeF16((-x1)));
// CHECK-NEXT:      out0[o] = static_cast<float>(t0);
// CHECK-NEXT:      out1[o] = ampc::cuda::storeF16(t1);
// CHECK-NEXT:    }
// CHECK-NEXT:  }
func.func @forward(%x: tensor<8xf32>, %y: tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  %0:2 = ampc.fusion(%x, %y) : (tensor<8xf32>, tensor<8xf16>) -> (tensor<8xf32>, tensor<8xf16>) {
  ^bb0(%a: tensor<8xf32>, %b: tensor<8xf16>):
    %e = ampc.exp %a : tensor<8xf32>
    %n = ampc.neg %b : tensor<8xf16>
    ampc.yield %e, %n : tensor<8xf32>, tensor<8xf16>
  }
  return %0#0, %0#1 : tensor<8xf32>, tensor<8xf16>
}
