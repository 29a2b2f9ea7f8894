// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s

// The losses on the CUDA target. SoftmaxCrossEntropyLoss: a LogSoftmax
// kernel into scratch for the loss and one into the op's second result,
// then nllLoss with (log-probabilities, labels, weights, N, classes,
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
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<{{.*}}>", ampc::cuda::softmaxByWarp<{{.*}}>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + [[LOGP:[0-9]+]]), 4LL, 10LL, 1LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    ampc::cuda::launch("softmaxByWarp<{{.*}}>", ampc::cuda::softmaxByWarp<{{.*}}>, 1u, ampc::cuda::kThreads, 0, ctx.stream, in0, [[P]], 4LL, 10LL, 1LL, true, float(1), nullptr, ampc::cuda::Strided{});
// CHECK-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax_cross_entropy_loss");
// CHECK-NEXT:    ampc::cuda::launch("nllLoss<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, int64_t>", ampc::cuda::nllLoss<float, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, int64_t>, ampc::cuda::blocks(1LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + [[LOGP]]), in1, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cuda::LossMean, [[L]], reinterpret_cast<int32_t *>(state + [[SLOT:[0-9]+]]), 1);
// CHECK:         float *[[LN:v[0-9]+]] = reinterpret_cast<float *>(state + 640);
// CHECK:         ampc::cuda::launch("nllLoss<{{.*}}, int64_t>", ampc::cuda::nllLoss<{{.*}}, int64_t>, ampc::cuda::blocks(4LL), ampc::cuda::kThreads, 0, ctx.stream, reinterpret_cast<float *>(state + {{[0-9]+}}), in1, in2, 4LL, 10LL, 1LL, true, -100LL, ampc::cuda::LossNone, [[LN]], reinterpret_cast<int32_t *>(state + [[SLOT]]), 2);
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
// CHECK-NEXT:    ampc::cuda::launch("nllLossGrad<{{.*}}, int64_t>", ampc::cuda::nllLossGrad<{{.*}}, int64_t>, ampc::cuda::blocks(40LL), ampc::cuda::kThreads, 0, ctx.stream, in2, in3, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cuda::LossMean, [[G]], reinterpret_cast<int32_t *>(state + [[SLOT]]), 2);
func.func @forward(%s3: tensor<2x10x5xf32>, %l3: tensor<2x5xi32>, %d: tensor<f32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %0 = ampc.negative_log_likelihood_loss %s3, %l3 {reduction = #ampc<reduction sum>} : (tensor<2x10x5xf32>, tensor<2x5xi32>) -> tensor<f32>
  %1 = ampc.nll_loss_grad %d, %t : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  return %0, %1 : tensor<f32>, tensor<4x10xf32>
}
