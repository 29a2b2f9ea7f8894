// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// The losses on the CUDA target. SoftmaxCrossEntropyLoss: one LogSoftmax
// kernel into the op's log_prob result (FP32, the compute type), which
// nllLoss reads with (log-probabilities, labels, weights, N, classes,
// inner, has ignore_index, ignore_index, reduction, out, error slot,
// message code); a label out of range is reported by code through the
// error slot and kDeviceErrors, never by a trap.

// CHECK:       static const char *const kDeviceErrors[] = {
// CHECK-NEXT:    "",
// CHECK-NEXT:    "ampc.softmax_cross_entropy_loss: a label is out of range",
// CHECK-NEXT:    "ampc.softmax_cross_entropy_loss: a label is out of range",
// CHECK-NEXT:  };
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + 384);
// CHECK-NEXT:    float *[[P:v[0-9]+]] = reinterpret_cast<float *>(state + 448);
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<{{.*}}>", ampc::cuda::softmaxByWarp<{{.*}}>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, [[P]], 4LL, 10LL, 1LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    ampc::cuda::launch("nllLoss<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, int64_t>", ampc::cuda::nllLoss<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, int64_t>, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, [[P]], in1, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cuda::LossMean, [[L]], reinterpret_cast<int32_t *>(state + [[SLOT:[0-9]+]]), 1);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    float *[[LN:v[0-9]+]] = reinterpret_cast<float *>(state + 640);
// CHECK-NEXT:    float *[[PN:v[0-9]+]] = reinterpret_cast<float *>(state + 704);
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<{{.*}}>", ampc::cuda::softmaxByWarp<{{.*}}>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, [[PN]], 4LL, 10LL, 1LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    ampc::cuda::launch("nllLoss<{{.*}}, int64_t>", ampc::cuda::nllLoss<{{.*}}, int64_t>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, [[PN]], in1, in2, 4LL, 10LL, 1LL, true, -100LL, ampc::cuda::LossNone, [[LN]], reinterpret_cast<int32_t *>(state + [[SLOT]]), 2);
func.func @forward(%scores: tensor<4x10xf32>, %labels: tensor<4xi64>, %w: tensor<10xf32>) -> (tensor<f32>, tensor<4x10xf32>, tensor<4xf32>) {
  %0:2 = ampc.softmax_cross_entropy_loss %scores, %labels : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %1:2 = ampc.softmax_cross_entropy_loss %scores, %labels, %w {reduction = #ampc<reduction none>, ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4x10xf32>)
  return %0#0, %0#1, %1#0 : tensor<f32>, tensor<4x10xf32>, tensor<4xf32>
}

// -----

// NegativeLogLikelihoodLoss with int32 labels over a spatial axis, summed;
// its adjoint with int64 labels, a thread per gradient element (40).
// CHECK:       static const char *const kDeviceErrors[] = {
// CHECK-NEXT:    "",
// CHECK-NEXT:    "ampc.negative_log_likelihood_loss: a label is out of range",
// CHECK-NEXT:    "ampc.nll_loss_grad: a label is out of range",
// CHECK-LABEL: static int32_t infer(
// CHECK:         ampc::cuda::launch("nllLoss<{{.*}}, int32_t>", ampc::cuda::nllLoss<{{.*}}, int32_t>, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in1, nullptr, 2LL, 10LL, 5LL, false, 0LL, ampc::cuda::LossSum, v0, reinterpret_cast<int32_t *>(state + [[SLOT:[0-9]+]]), 1);
// CHECK:         float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    ampc::cuda::launch("nllLossGrad<{{.*}}, int64_t>", ampc::cuda::nllLossGrad<{{.*}}, int64_t>, ampc::cuda::blocks(40LL), ampc::cuda::kThreads, 0, ctx.stream, in2, in3, nullptr, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cuda::LossMean, [[G]], reinterpret_cast<int32_t *>(state + [[SLOT]]), 2);
func.func @forward(%s3: tensor<2x10x5xf32>, %l3: tensor<2x5xi32>, %d: tensor<f32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %0 = ampc.negative_log_likelihood_loss %s3, %l3 {reduction = #ampc<reduction sum>} : (tensor<2x10x5xf32>, tensor<2x5xi32>) -> tensor<f32>
  %1 = ampc.nll_loss_grad %d, %t : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  return %0, %1 : tensor<f32>, tensor<4x10xf32>
}

// -----

// SoftmaxCrossEntropyLoss's adjoint as one kernel (nll_loss_grad with
// log_prob, here with class weights, ignore_index, a spatial axis and a
// 16-bit result): nllLossGrad reads log_prob after the weights and applies
// LogSoftmax's adjoint per element (a thread per element, no row sums
// launched, no cast). The loss on 16-bit scores with FP32 results reads
// them directly: one LogSoftmax writing log_prob, which the loss reads.
// CHECK-LABEL: static int32_t infer(
// CHECK:         uint16_t *[[G:v[0-9]+]] = reinterpret_cast<uint16_t *>(state + {{[0-9]+}});
// CHECK-NEXT:    ampc::cuda::launch("nllLossGrad<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::AsF16, int64_t>", ampc::cuda::nllLossGrad<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::AsF16, int64_t>, ampc::cuda::blocks(60LL), ampc::cuda::kThreads, 0, ctx.stream, in0, in1, in2, in3, 2LL, 10LL, 3LL, true, -100LL, ampc::cuda::LossMean, [[G]], reinterpret_cast<int32_t *>(state + {{[0-9]+}}), 1);
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.nll_loss_grad");
// CHECK-NEXT:    float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + {{[0-9]+}});
// CHECK-NEXT:    float *[[P:v[0-9]+]] = reinterpret_cast<float *>(state + {{[0-9]+}});
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<float, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::AsF16>", {{.*}}, ctx.stream, in4, [[P]], 2LL, 10LL, 3LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    ampc::cuda::launch("nllLoss<float, ampc::cuda::As<float>, {{.*}}>", {{.*}}, ctx.stream, [[P]], in1, nullptr, 2LL, 10LL, 3LL, false, 0LL, ampc::cuda::LossMean, [[L]],
// CHECK-NOT:     softmaxByWarp
// CHECK-LABEL: static int32_t
func.func @forward(%d: tensor<f32>, %t: tensor<2x3xi64>, %w: tensor<10xf32>, %lp: tensor<2x10x3xf32>, %s: tensor<2x10x3xf16>) -> (tensor<2x10x3xf16>, tensor<f32>, tensor<2x10x3xf32>) {
  %0 = ampc.nll_loss_grad %d, %t, %w log_prob(%lp) {ignore_index = -100 : i64} : (tensor<f32>, tensor<2x3xi64>, tensor<10xf32>, tensor<2x10x3xf32>) -> tensor<2x10x3xf16>
  %1:2 = ampc.softmax_cross_entropy_loss %s, %t : (tensor<2x10x3xf16>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x10x3xf32>)
  return %0, %1#0, %1#1 : tensor<2x10x3xf16>, tensor<f32>, tensor<2x10x3xf32>
}
