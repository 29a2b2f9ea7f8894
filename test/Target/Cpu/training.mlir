// RUN: ampc-opt %s --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --ampc-to-cpp | FileCheck %s

// The training ops on the CPU target, in a hand-written @train_step: the
// state layout (parameters, then the state that starts non-zero: both in
// the blob; then the state that starts at zero, then the arena), load_state
// binding state in place, unscale with found_inf, clip_grad_norm, AdamW and
// SGD updates that copy their inputs through when found_inf is set,
// update_scale, stores into the parameters' and states' own bytes, the
// low-precision weight copy table, and the descriptor's training fields.

// The blob is the parameters (w at 0, b at 64) and the loss scale and
// learning rate (128, 192): 256 bytes. The f16 copy of w (at 384) is
// refreshed from w (at 0), 12 elements, f16.
// CHECK:       static const ampc::WeightCopy kCopies[] = {
// CHECK-NEXT:    {0, 0ULL, 384ULL, 12LL, false, 0LL, 0LL},
// CHECK-NEXT:    {-1, 0, 0, 0, false, 0, 0},
// CHECK:       std::memcpy(raw, ampc_parameter_blob, 256ULL);

// CHECK-LABEL: static int32_t trainStepBody(
// CHECK:         float *[[W:p[0-9]+]] = reinterpret_cast<float *>(state + 0);
// CHECK-NEXT:    float *[[B:p[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    float *[[SCALE:s[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:    int32_t *[[TRACKER:s[0-9]+]] = reinterpret_cast<int32_t *>(state + 256);
// CHECK-NEXT:    float *[[LR:s[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK-NEXT:    int64_t *[[STEP:s[0-9]+]] = reinterpret_cast<int64_t *>(state + 320);
// CHECK-NEXT:    float *[[M:s[0-9]+]] = reinterpret_cast<float *>(state + 448);
// CHECK-NEXT:    float *[[V:s[0-9]+]] = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:    float *[[BM:s[0-9]+]] = reinterpret_cast<float *>(state + 576);
// The arena starts at 640 with the error slot; the gradients (dW at 832,
// db at 896) are unscaled by 1/scale into 704 and 960; found_inf is one
// byte at 1024.
// CHECK:         float *[[GW:v[0-9]+]] = reinterpret_cast<float *>(state + 832);
// CHECK:         float *[[GB:v[0-9]+]] = reinterpret_cast<float *>(state + 896);
// CHECK:         float *[[UW:v[0-9]+]] = reinterpret_cast<float *>(state + 704);
// CHECK-NEXT:    float *[[UB:v[0-9]+]] = reinterpret_cast<float *>(state + 960);
// CHECK-NEXT:    uint8_t *[[FOUND:v[0-9]+]] = reinterpret_cast<uint8_t *>(state + 1024);
// CHECK-NEXT:    { const float inv = ampc::cpu::inverseScale([[SCALE]][0]); bool found = false;
// CHECK-NEXT:      found |= ampc::cpu::unscale<ampc::cpu::As<float>>([[GW]], [[UW]], 12LL, inv);
// CHECK-NEXT:      found |= ampc::cpu::unscale<ampc::cpu::As<float>>([[GB]], [[UB]], 3LL, inv);
// CHECK-NEXT:      [[FOUND]][0] = found; }
// Clipping: one global norm over both gradients, max_norm 1.
// CHECK-NEXT:    float *[[CW:v[0-9]+]] = reinterpret_cast<float *>(state + 832);
// CHECK-NEXT:    float *[[CB:v[0-9]+]] = reinterpret_cast<float *>(state + 896);
// CHECK-NEXT:    { float sum = 0;
// CHECK-NEXT:      sum += ampc::cpu::sumOfSquares([[UW]], 12LL);
// CHECK-NEXT:      sum += ampc::cpu::sumOfSquares([[UB]], 3LL);
// CHECK-NEXT:      const float coef = std::min<float>(float(1), float(1.000000000e+00) / (std::sqrt(sum) + float(1e-6)));
// CHECK-NEXT:      for (int64_t i = 0; i < 12LL; ++i) [[CW]][i] = [[UW]][i] * coef;
// CHECK-NEXT:      for (int64_t i = 0; i < 3LL; ++i) [[CB]][i] = [[UB]][i] * coef;
// CHECK-NEXT:    }
// AdamW on w with its two moments (betas, eps, weight decay 0.01); skipped
// (inputs copied through) when found_inf.
// CHECK-NEXT:    float *[[NW:v[0-9]+]] = reinterpret_cast<float *>(state + 704);
// CHECK-NEXT:    float *[[NM:v[0-9]+]] = reinterpret_cast<float *>(state + 960);
// CHECK-NEXT:    float *[[NV:v[0-9]+]] = reinterpret_cast<float *>(state + 1088);
// CHECK-NEXT:    if ([[FOUND]][0]) {
// CHECK-NEXT:      std::memcpy([[NW]], [[W]], 48ULL);
// CHECK-NEXT:      std::memcpy([[NM]], [[M]], 48ULL);
// CHECK-NEXT:      std::memcpy([[NV]], [[V]], 48ULL);
// CHECK-NEXT:    } else {
// CHECK-NEXT:      ampc::cpu::adamStep<float>([[W]], [[CW]], [[M]], [[V]], [[NW]], [[NM]], [[NV]], 12LL, float([[LR]][0]), [[STEP]][0], float(8.999999762e-01), float(9.990000129e-01), float(9.999999939e-09), float(9.999999776e-03), true);
// CHECK-NEXT:    }
// SGD with Nesterov momentum 0.9 on b.
// CHECK:         if ([[FOUND]][0]) {
// CHECK-NEXT:      std::memcpy([[NB:v[0-9]+]], [[B]], 12ULL);
// CHECK-NEXT:      std::memcpy([[NBM:v[0-9]+]], [[BM]], 12ULL);
// CHECK-NEXT:    } else {
// CHECK-NEXT:      ampc::cpu::sgdStep<float>([[B]], [[CB]], [[BM]], [[NB]], [[NBM]], 3LL, float([[LR]][0]), [[STEP]][0], float(8.999999762e-01), float(0.000000000e+00), true, float(0.000000000e+00));
// The scaler: growth 2, backoff 0.5, interval 100, no bounds.
// CHECK:         float *[[NS:v[0-9]+]] = reinterpret_cast<float *>(state + 896);
// CHECK-NEXT:    int32_t *[[NT:v[0-9]+]] = reinterpret_cast<int32_t *>(state + 1216);
// CHECK-NEXT:    ampc::cpu::updateScale([[SCALE]][0], [[TRACKER]][0], [[FOUND]][0], 2.000000000e+00f, 5.000000000e-01f, 100LL, 0.000000000e+00f, 0.000000000e+00f, [[NS]], [[NT]]);
// CHECK:         v{{[0-9]+}}[o] = static_cast<int64_t>((x0 + x1));
// The stores, in program order, into each symbol's offset; the f16 copy of
// the new w (rounded) into w.f16 at 384.
// CHECK:         std::memmove(state + 0, [[NW]], 48ULL);
// CHECK-NEXT:    std::memmove(state + 448, [[NM]], 48ULL);
// CHECK-NEXT:    std::memmove(state + 512, [[NV]], 48ULL);
// CHECK:           [[WC:v[0-9]+]][o] = ampc::cpu::storeF16((x0));
// CHECK:         std::memmove(state + 384, [[WC]], 24ULL);
// CHECK-NEXT:    std::memmove(state + 64, [[NB]], 12ULL);
// CHECK-NEXT:    std::memmove(state + 576, [[NBM]], 12ULL);
// CHECK-NEXT:    std::memmove(state + 128, [[NS]], 4ULL);
// CHECK-NEXT:    std::memmove(state + 256, [[NT]], 4ULL);
// CHECK-NEXT:    std::memmove(state + 320, v{{[0-9]+}}, 8ULL);
// CHECK-NEXT:    std::memcpy(outputs[0], v{{[0-9]+}}, 4ULL);

// The checkpointed state: every ampc.state but the derived weight copy,
// with its offset and size.
// CHECK:       static const uint64_t kStateOffsets[] = {0ULL, 64ULL, 128ULL, 256ULL, 192ULL, 320ULL, 448ULL, 512ULL, 576ULL, 0};
// CHECK-NEXT:  static const uint64_t kStateBytes[] = {48ULL, 12ULL, 4ULL, 4ULL, 4ULL, 8ULL, 48ULL, 48ULL, 12ULL, 0};
// CHECK:       "model", "cpu", "fp16", "train",
// CHECK:       kNumStateTensors, stateTensors, readState, writeState, trainStep, "adamw", ampc_hyperparameters, "dynamic",
// The hyperparameters' text is data, after the code (the compile cache).
// CHECK:       // ---- ampc: data below, compiled apart from the code above ----
// CHECK:       extern "C" const char ampc_hyperparameters[] = "lr=1.000000e-03";
module attributes {ampc.optimizer = #ampc<optimizer adamw>, ampc.hyperparameters = "lr=1.000000e-03", ampc.loss_scaling = #ampc<loss_scaling dynamic>} {
  ampc.parameter @w : tensor<4x3xf32> = dense<5.000000e-01> : tensor<4x3xf32>
  ampc.parameter @b : tensor<3xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32>
  ampc.state @ampc.growth_tracker : tensor<i32> = dense<0> : tensor<i32>
  ampc.state @ampc.lr : tensor<f32> = dense<1.000000e-03> : tensor<f32>
  ampc.state @ampc.step : tensor<i64> = dense<0> : tensor<i64>
  ampc.state @w.f16 {derived_from = @w} : tensor<4x3xf16> = dense<0.000000e+00> : tensor<4x3xf16>
  ampc.state @w.exp_avg : tensor<4x3xf32> = dense<0.000000e+00> : tensor<4x3xf32>
  ampc.state @w.exp_avg_sq : tensor<4x3xf32> = dense<0.000000e+00> : tensor<4x3xf32>
  ampc.state @b.momentum_buffer : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = ampc.load_parameter @w : tensor<4x3xf32>
    %b = ampc.load_parameter @b : tensor<3xf32>
    %y = ampc.gemm %x, %w, %b : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = ampc.reduce_sum %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = ampc.load_parameter @w : tensor<4x3xf32>
    %b = ampc.load_parameter @b : tensor<3xf32>
    %s = ampc.load_state @ampc.loss_scale : tensor<f32>
    %t = ampc.load_state @ampc.growth_tracker : tensor<i32>
    %lr = ampc.load_state @ampc.lr : tensor<f32>
    %step = ampc.load_state @ampc.step : tensor<i64>
    %m = ampc.load_state @w.exp_avg : tensor<4x3xf32>
    %v = ampc.load_state @w.exp_avg_sq : tensor<4x3xf32>
    %bm = ampc.load_state @b.momentum_buffer : tensor<3xf32>
    %y = ampc.gemm %x, %w, %b : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
    %l = ampc.reduce_sum %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %dy = ampc.expand %s : tensor<f32> to tensor<2x3xf32>
    %gw = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gb = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %u:2, %found = ampc.unscale %s, %gw, %gb : (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<i1>)
    %c:2 = ampc.clip_grad_norm %u#0, %u#1 {max_norm = 1.0 : f32} : (tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>)
    %nw, %nm:2 = ampc.optimizer_update %w, %c#0, %lr, %step found_inf %found moments %m, %v {kind = #ampc<optimizer adamw>, weight_decay = 0.01 : f32} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i64>, tensor<i1>, tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    %nb, %nbm = ampc.optimizer_update %b, %c#1, %lr, %step found_inf %found moments %bm {kind = #ampc<optimizer sgd>, momentum = 0.9 : f32, nesterov = true} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<i1>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>)
    %ns, %nt = ampc.update_scale %s, %t, %found {growth_interval = 100 : i64} : tensor<f32>, tensor<i32>, tensor<i1>
    %one = ampc.constant dense<1> : tensor<i64>
    %step1 = ampc.add %step, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    ampc.store @w, %nw : tensor<4x3xf32>
    ampc.store @w.exp_avg, %nm#0 : tensor<4x3xf32>
    ampc.store @w.exp_avg_sq, %nm#1 : tensor<4x3xf32>
    %wc = ampc.cast %nw : tensor<4x3xf32> to tensor<4x3xf16>
    ampc.store @w.f16, %wc : tensor<4x3xf16>
    ampc.store @b, %nb : tensor<3xf32>
    ampc.store @b.momentum_buffer, %nbm : tensor<3xf32>
    ampc.store @ampc.loss_scale, %ns : tensor<f32>
    ampc.store @ampc.growth_tracker, %nt : tensor<i32>
    ampc.store @ampc.step, %step1 : tensor<i64>
    return %l : tensor<f32>
  }
}
