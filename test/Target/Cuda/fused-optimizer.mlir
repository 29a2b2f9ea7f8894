// RUN: ampc-opt %s --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s
// RUN: sed 's/^ *\/\/ LATE://' %s | ampc-opt --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s --check-prefix=HAZARD

// The optimizer step in place (issue 37, item 5): every AdamW update of the
// step in one multi-tensor launch that updates each FP32 master and its
// moments in place and writes the FP16 and BF16 weight copies (the casts of
// the new masters) in the same pass; per tensor its gradient, learning rate
// (b's group: lr·0.5, a product in the arena) and weight decay. No store
// copies anything and no cast kernel remains.

// Offsets: w 0, b 64, loss_scale 128, lr 192, step 256, w.f16 320, w.bf16
// 384, w.exp_avg 448, w.exp_avg_sq 512, b.exp_avg 576, b.exp_avg_sq 640.
// The launch reads found_inf (the unscale's) and skips itself.
// CHECK-LABEL: static int32_t trainStepKernels(
// CHECK-NOT:     cudaMemcpyDeviceToDevice
// CHECK:         ampc::cuda::launch("unscale<float>", {{.*}}, [[FOUND:v[0-9]+]]);
// CHECK-NOT:     cudaMemcpyDeviceToDevice
// CHECK:         static const ampc::cuda::OptimizerHyper<float> [[HYPER:hyper[0-9]+]] = {true, true, false};
// CHECK-NEXT:    static const ampc::cuda::OptimizerList<float> [[LIST:list[0-9]+]] = {2, {0ULL, 64ULL, }, {{{[0-9]+}}ULL, {{[0-9]+}}ULL, }, {448ULL, 576ULL, }, {512ULL, 640ULL, }, {320ULL, ampc::cuda::kNoTensor, }, {384ULL, ampc::cuda::kNoTensor, }, {192ULL, {{[0-9]+}}ULL, }, {float(9.999999776e-03), float(0.000000000e+00), }, {float(0.000000000e+00), float(0.000000000e+00), }, {float(0.000000000e+00), float(0.000000000e+00), }, {float(8.999999762e-01), float(8.999999762e-01), }, {float(9.990000129e-01), float(9.990000129e-01), }, {float(9.999999939e-09), float(9.999999939e-09), }, {12LL, 3LL, }, {0LL, 0LL, }, {0LL, 0LL, }, {0, 1, 2}};
// CHECK-NEXT:    ampc::cuda::launch("optimizerStep<float>", ampc::cuda::optimizerStep<float>, 2, ampc::cuda::kThreads, 0, ctx.stream, state, [[LIST]], [[HYPER]], {{s[0-9]+}}, reinterpret_cast<const uint8_t *>([[FOUND]]));
// CHECK-NOT:     adamStep
// CHECK-NOT:     "ampc.cast"
// CHECK-NOT:     cudaMemcpyDeviceToDevice
// CHECK:         returnLoss

// With a read of w's old value after the updates (the LATE lines), w cannot be
// written in place before that read: the updates keep a kernel each, w's
// new value its planned buffer and its store a copy; the moments and b
// still go in place.
// HAZARD-LABEL: static int32_t trainStepKernels(
// HAZARD-NOT:   optimizerStep
// HAZARD:       ampc::cuda::launch("unscale<float>"
// HAZARD-NEXT:  AMPC_LAUNCHED
// HAZARD-NEXT:  float *[[NW:v[0-9]+]] = reinterpret_cast<float *>(state + {{[0-9]+}});
// HAZARD-NEXT:  float *{{v[0-9]+}} = reinterpret_cast<float *>(state + 448);
// HAZARD-NEXT:  float *{{v[0-9]+}} = reinterpret_cast<float *>(state + 512);
// HAZARD-NEXT:  ampc::cuda::launch("adamStep<float>", ampc::cuda::adamStep<float>, ampc::cuda::blocks(12LL),
// HAZARD:       ampc::cuda::launch("adamStep<float>", ampc::cuda::adamStep<float>, ampc::cuda::blocks(3LL),
// HAZARD:       AMPC_CUDA(ctx, cudaMemcpyAsync(state + 0, [[NW]], 48ULL, cudaMemcpyDeviceToDevice, ctx.stream), "ampc.store");
// HAZARD-NOT:   cudaMemcpyDeviceToDevice
// HAZARD:       returnLoss
module attributes {ampc.optimizer = #ampc<optimizer adamw>, ampc.hyperparameters = "lr=1.000000e-03", ampc.loss_scaling = #ampc<loss_scaling static>} {
  ampc.parameter @w : tensor<4x3xf32> = dense<5.000000e-01> : tensor<4x3xf32>
  ampc.parameter @b : tensor<3xf32> = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00]> : tensor<3xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<1.000000e+00> : tensor<f32>
  ampc.state @ampc.lr : tensor<f32> = dense<1.000000e-03> : tensor<f32>
  ampc.state @ampc.step : tensor<i64> = dense<0> : tensor<i64>
  ampc.state @w.f16 {derived_from = @w} : tensor<4x3xf16> = dense<0.000000e+00> : tensor<4x3xf16>
  ampc.state @w.bf16 {derived_from = @w} : tensor<4x3xbf16> = dense<0.000000e+00> : tensor<4x3xbf16>
  ampc.state @w.exp_avg : tensor<4x3xf32> = dense<0.000000e+00> : tensor<4x3xf32>
  ampc.state @w.exp_avg_sq : tensor<4x3xf32> = dense<0.000000e+00> : tensor<4x3xf32>
  ampc.state @b.exp_avg : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32>
  ampc.state @b.exp_avg_sq : tensor<3xf32> = dense<0.000000e+00> : tensor<3xf32>
  func.func @forward(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = ampc.load_parameter @w : tensor<4x3xf32>
    %y = ampc.gemm %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %l = ampc.reduce_sum %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = ampc.load_parameter @w : tensor<4x3xf32>
    %b = ampc.load_parameter @b : tensor<3xf32>
    %s = ampc.load_state @ampc.loss_scale : tensor<f32>
    %lr = ampc.load_state @ampc.lr : tensor<f32>
    %half = ampc.constant dense<5.000000e-01> : tensor<f32>
    %lrb = ampc.mul %lr, %half : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %step = ampc.load_state @ampc.step : tensor<i64>
    %m = ampc.load_state @w.exp_avg : tensor<4x3xf32>
    %v = ampc.load_state @w.exp_avg_sq : tensor<4x3xf32>
    %bm = ampc.load_state @b.exp_avg : tensor<3xf32>
    %bv = ampc.load_state @b.exp_avg_sq : tensor<3xf32>
    %y = ampc.gemm %x, %w : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32>
    %l = ampc.reduce_sum %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
    %dy = ampc.expand %l : tensor<f32> to tensor<2x3xf32>
    %gw = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<2x4xf32>, tensor<2x3xf32>) -> tensor<4x3xf32>
    %gb = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<3xf32>
    %u:2, %found = ampc.unscale %s, %gw, %gb : (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<i1>)
    %nw, %nm:2 = ampc.optimizer_update %w, %u#0, %lr, %step found_inf %found moments %m, %v {kind = #ampc<optimizer adamw>, weight_decay = 0.01 : f32} : (tensor<4x3xf32>, tensor<4x3xf32>, tensor<f32>, tensor<i64>, tensor<i1>, tensor<4x3xf32>, tensor<4x3xf32>) -> (tensor<4x3xf32>, tensor<4x3xf32>, tensor<4x3xf32>)
    %nb, %nbm:2 = ampc.optimizer_update %b, %u#1, %lrb, %step found_inf %found moments %bm, %bv {kind = #ampc<optimizer adamw>, weight_decay = 0.0 : f32} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>, tensor<i1>, tensor<3xf32>, tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
    // LATE: %late = ampc.reduce_sum %w {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x3xf32>) -> tensor<f32>
    // LATE: ampc.store @ampc.lr, %late : tensor<f32>
    ampc.store @w, %nw : tensor<4x3xf32>
    ampc.store @w.exp_avg, %nm#0 : tensor<4x3xf32>
    ampc.store @w.exp_avg_sq, %nm#1 : tensor<4x3xf32>
    %wc = ampc.cast %nw : tensor<4x3xf32> to tensor<4x3xf16>
    ampc.store @w.f16, %wc : tensor<4x3xf16>
    %wbc = ampc.cast %nw : tensor<4x3xf32> to tensor<4x3xbf16>
    ampc.store @w.bf16, %wbc : tensor<4x3xbf16>
    ampc.store @b, %nb : tensor<3xf32>
    ampc.store @b.exp_avg, %nbm#0 : tensor<3xf32>
    ampc.store @b.exp_avg_sq, %nbm#1 : tensor<3xf32>
    %one = ampc.constant dense<1> : tensor<i64>
    %step1 = ampc.add %step, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
    ampc.store @ampc.step, %step1 : tensor<i64>
    return %l : tensor<f32>
  }
}
