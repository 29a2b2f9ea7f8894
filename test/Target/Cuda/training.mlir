// RUN: ampc-opt %s --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s

// The training ops on the CUDA target, in a hand-written @train_step: the
// scaler and optimizer stay on the device (found_inf is a device byte the
// unscale kernel writes and every later kernel reads; lr and step are read
// from device memory), multi-tensor lists of (source, destination, count)
// by offset from the state, the scale update in one thread, the loss
// returned without synchronising. AdamW and SGD in one step cannot share
// the fused optimizer's launch (fused-optimizer.mlir): each update is its
// own kernel, but every stored result is still written in place, so no
// store is a device-to-device copy.

// The step increment writes the step in place, over its input: no
// __restrict__ (the f16 copy's cast reads w, apart from its output).
// CHECK:       __global__ void __launch_bounds__(ampc::cuda::kThreads) k1(const int64_t *a0, const int64_t *a1, int64_t *out) {
// CHECK:       __global__ void __launch_bounds__(ampc::cuda::kThreads) k2(const float *__restrict__ a0, uint16_t *__restrict__ out) {
// The f16 copy of w (at 384) is refreshed from w (at 0) on the device.
// CHECK:       static const ampc::WeightCopy kCopies[] = {
// CHECK-NEXT:    {0, 0ULL, 384ULL, 12LL, false, 0LL, 0LL},

// CHECK-LABEL: static int32_t trainStepKernels(
// CHECK:         float *[[W:p[0-9]+]] = reinterpret_cast<float *>(state + 0);
// CHECK-NEXT:    float *[[B:p[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    float *[[SCALE:s[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:    int32_t *[[TRACKER:s[0-9]+]] = reinterpret_cast<int32_t *>(state + 256);
// CHECK-NEXT:    float *[[LR:s[0-9]+]] = reinterpret_cast<float *>(state + 192);
// CHECK-NEXT:    int64_t *[[STEP:s[0-9]+]] = reinterpret_cast<int64_t *>(state + 320);
// CHECK-NEXT:    float *[[M:s[0-9]+]] = reinterpret_cast<float *>(state + 448);
// CHECK-NEXT:    float *[[V:s[0-9]+]] = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:    float *[[BM:s[0-9]+]] = reinterpret_cast<float *>(state + 576);
// The forward Gemm takes its bias row as cuBLASLt's BIAS epilogue.
// CHECK:         { static const ampc::cuda::Gemm g = {false, false, 2LL, 3LL, 4LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_BIAS};
// CHECK-NEXT:      if (int32_t code = ampc::cuda::gemm(ctx, "ampc.gemm", g, in0, [[W]], v{{[0-9]+}}, [[B]])) return code; }
// Unlike the CPU target, the CUDA target keeps every constant in the state
// (here the step increment, at 640), so the arena starts at 704, with the
// error slot (ampc.error_slot) and input 0's staging buffer at 768 (reused
// once the input is read). Unscale: found_inf (a byte at 1088) zeroed on the stream, then one launch
// over both gradients (12 and 3 elements).
// CHECK:         float *[[GW:v[0-9]+]] = reinterpret_cast<float *>(state + 960);
// CHECK:         float *[[GB:v[0-9]+]] = reinterpret_cast<float *>(state + 768);
// CHECK:         float *[[UW:v[0-9]+]] = reinterpret_cast<float *>(state + 832);
// CHECK-NEXT:    float *[[UB:v[0-9]+]] = reinterpret_cast<float *>(state + 1024);
// CHECK-NEXT:    uint8_t *[[FOUND:v[0-9]+]] = reinterpret_cast<uint8_t *>(state + 1088);
// CHECK-NEXT:    AMPC_CUDA(ctx, cudaMemsetAsync([[FOUND]], 0, 1, ctx.stream), "ampc.unscale");
// CHECK-NEXT:    static const ampc::cuda::TensorList<float> [[LIST:list[0-9]+]] = {2, {static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[GW]]) - state), static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[GB]]) - state), }, {static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[UW]]) - state), static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[UB]]) - state), }, {12LL, 3LL, }, {0, 1, 2}};
// CHECK-NEXT:    static const ampc::cuda::GradientStorages [[STORAGES:storages[0-9]+]] = {{[{][{]}}0, 0, }, {0, 0, }, {0, 0, }};
// CHECK-NEXT:    ampc::cuda::launch("unscale<float>", ampc::cuda::unscale<float>, 2, ampc::cuda::kThreads, 0, ctx.stream, state, [[LIST]], [[STORAGES]], [[SCALE]], [[FOUND]]);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.unscale");
// Clipping: the sum of squares of both, deterministic (issue 37): a
// partial per block (two here) in the scratch, added by one block into the
// 8-byte sum, then the scaling by max_norm 1.
// CHECK-NEXT:    float *[[CW:v[0-9]+]] = reinterpret_cast<float *>(state + 768);
// CHECK-NEXT:    float *[[CB:v[0-9]+]] = reinterpret_cast<float *>(state + 960);
// CHECK-NEXT:    static const ampc::cuda::TensorList<float> [[CLIP:list[0-9]+]] = {2, {static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[UW]]) - state), static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[UB]]) - state), }, {static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[CW]]) - state), static_cast<uint64_t>(reinterpret_cast<unsigned char *>([[CB]]) - state), }, {12LL, 3LL, }, {0, 1, 2}};
// CHECK-NOT:     cudaMemsetAsync
// CHECK-NEXT:    ampc::cuda::launch("sumOfSquares<float>", ampc::cuda::sumOfSquares<float>, 2, ampc::cuda::kThreads, 0, ctx.stream, state, [[CLIP]], reinterpret_cast<float *>(state + [[PARTIALS:[0-9]+]]) + 0);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.clip_grad_norm");
// CHECK-NEXT:    ampc::cuda::launch("sumPartials<float>", ampc::cuda::sumPartials<float>, 1, ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + [[PARTIALS]]), 2LL, reinterpret_cast<float *>(state + [[NORM:[0-9]+]]));
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.clip_grad_norm");
// CHECK-NEXT:    ampc::cuda::launch("clipByNorm<float>", ampc::cuda::clipByNorm<float>, 2, ampc::cuda::kThreads, 0, ctx.stream, state, [[CLIP]], reinterpret_cast<float *>(state + [[NORM]]), float(1.000000000e+00));
// AdamW and SGD kernels read lr, step and found_inf on the device and
// write the new w and moments in place: w at 0, its moments at 448 and
// 512; b at 64, its buffer at 576.
// CHECK:         float *[[NW:v[0-9]+]] = reinterpret_cast<float *>(state + 0);
// CHECK-NEXT:    float *[[NM:v[0-9]+]] = reinterpret_cast<float *>(state + 448);
// CHECK-NEXT:    float *[[NV:v[0-9]+]] = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:    ampc::cuda::launch("adamStep<float>", ampc::cuda::adamStep<float>, ampc::cuda::blocks(12LL), ampc::cuda::kThreads, 0, ctx.stream, [[W]], [[CW]], [[M]], [[V]], [[NW]], [[NM]], [[NV]], 12LL, [[LR]], [[STEP]], reinterpret_cast<const uint8_t *>([[FOUND]]), float(8.999999762e-01), float(9.990000129e-01), float(9.999999939e-09), float(9.999999776e-03), true);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.optimizer_update");
// CHECK-NEXT:    float *[[NB:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    float *[[NBM:v[0-9]+]] = reinterpret_cast<float *>(state + 576);
// CHECK-NEXT:    ampc::cuda::launch("sgdStep<float>", ampc::cuda::sgdStep<float>, ampc::cuda::blocks(3LL), ampc::cuda::kThreads, 0, ctx.stream, [[B]], [[CB]], [[BM]], [[NB]], [[NBM]], 3LL, [[LR]], [[STEP]], reinterpret_cast<const uint8_t *>([[FOUND]]), float(8.999999762e-01), float(0.000000000e+00), true, float(0.000000000e+00));
// The scale update writes the scale (128) and tracker (256) in place.
// CHECK:         float *[[NS:v[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:    int32_t *[[NT:v[0-9]+]] = reinterpret_cast<int32_t *>(state + 256);
// CHECK-NEXT:    ampc::cuda::launch("updateScale", ampc::cuda::updateScale, 1, 1, 0, ctx.stream, [[SCALE]], [[TRACKER]], reinterpret_cast<const uint8_t *>([[FOUND]]), 2.000000000e+00f, 5.000000000e-01f, 100LL, 0.000000000e+00f, 0.000000000e+00f, [[NS]], [[NT]]);
// The step increment reads the constant in the state and writes the step
// (320) in place; an in-place elementwise kernel's pointers are not
// __restrict__.
// CHECK:         int64_t *[[ONE:c[0-9]+]] = reinterpret_cast<int64_t *>(state + 640);
// CHECK-NEXT:    int64_t *[[STEP1:v[0-9]+]] = reinterpret_cast<int64_t *>(state + 320);
// CHECK-NEXT:    ampc::cuda::launch("k1", k1, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, [[STEP]], [[ONE]], [[STEP1]]);
// The f16 copy of w, cast from the new w into its slot (384).
// CHECK:         uint16_t *[[WC:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + 384);
// CHECK-NEXT:    ampc::cuda::launch("k2", k2, ampc::cuda::blocks(12LL), ampc::cuda::kThreads, 0, ctx.stream, [[NW]], [[WC]]);
// No store copies anything.
// CHECK-NOT:     cudaMemcpyDeviceToDevice
// The kernels record the loss's address; trainStepBody stages the inputs
// (stageInputs, from the table of their staging offsets and bytes: issue
// 37, item 2), runs them as one CUDA graph (runStep) and returns the loss.
// CHECK:         ctx.stepLoss = v{{[0-9]+}};
// CHECK-NEXT:    return 0;
// CHECK-NEXT:  }
// CHECK:       static const ampc::cuda::StagedInput kStepInputs[] = {{[{][{]}}[[IN:[0-9]+]]ULL, 32ULL}, };
// CHECK-LABEL: static int32_t trainStepBody(
// CHECK:         if (int32_t code = ampc::cuda::stageInputs(ctx, inputs, kStepInputs, 1, [[IN]]ULL, 32ULL)) return code;
// CHECK:         if (int32_t code = ampc::cuda::runStep(ctx, trainStepKernels)) return code;
// CHECK-NEXT:    if (int32_t code = ampc::cuda::returnLoss(ctx, outputs[0], ctx.stepLoss, 4ULL)) return code;
// CHECK-NEXT:    return 0;
// CHECK-NEXT:  }
// CHECK:       "model", "cuda", "fp16", "train",
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
