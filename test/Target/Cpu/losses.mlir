// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | ampc-translate --split-input-file --ampc-to-cpp | FileCheck %s

// The losses on the CPU target. SoftmaxCrossEntropyLoss is a LogSoftmax in
// FP32 (its second result) then the negative log-likelihood with
// (log-probabilities, labels, weights, N, classes, inner, has
// ignore_index, ignore_index, reduction, out); a label out of range fails
// the call with a message naming the op, through the error slot.

// Mean reduction without weights; then reduction "none" with class weights
// and ignore_index -100 (4 losses, one per sample).
// CHECK-LABEL: static int32_t infer(
// CHECK:         float *[[L:v[0-9]+]] = reinterpret_cast<float *>(state + 64);
// CHECK-NEXT:    float *[[P:v[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK-NEXT:    {
// CHECK-NEXT:      float *logp = reinterpret_cast<float *>(state + 320);
// CHECK-NEXT:      ampc::cpu::softmax<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(in0, logp, 4LL, 10LL, 1LL, true);
// CHECK-NEXT:      for (int64_t i = 0; i < 40LL; ++i) [[P]][i] = static_cast<float>(logp[i]);
// CHECK-NEXT:      float *loss = reinterpret_cast<float *>(state + 512);
// CHECK-NEXT:      if (!(ampc::cpu::nllLoss<float>(logp, in1, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cpu::LossMean, loss, reinterpret_cast<float *>(state + 576), reinterpret_cast<float *>(state + 640)))) return ampc::cpu::fail(state + [[SLOT:[0-9]+]], "ampc.softmax_cross_entropy_loss: a label is out of range");
// CHECK-NEXT:      for (int64_t i = 0; i < 1LL; ++i) [[L]][i] = static_cast<float>(loss[i]);
// CHECK:         float *[[LN:v[0-9]+]] = reinterpret_cast<float *>(state + 320);
// CHECK:           float *weights = reinterpret_cast<float *>(state + 768);
// CHECK-NEXT:      ampc::cpu::convert<float, ampc::cpu::As<float>>(in2, 10LL, weights);
// CHECK-NEXT:      float *loss = reinterpret_cast<float *>(state + 832);
// CHECK-NEXT:      if (!(ampc::cpu::nllLoss<float>(logp, in1, weights, 4LL, 10LL, 1LL, true, -100LL, ampc::cpu::LossNone, loss, reinterpret_cast<float *>(state + 896), reinterpret_cast<float *>(state + 960)))) return ampc::cpu::fail(state + [[SLOT]],
// CHECK-NEXT:      for (int64_t i = 0; i < 4LL; ++i) [[LN]][i] = static_cast<float>(loss[i]);
func.func @forward(%scores: tensor<4x10xf32>, %labels: tensor<4xi64>, %w: tensor<10xf32>) -> (tensor<f32>, tensor<4x10xf32>, tensor<4xf32>) {
  %0:2 = ampc.softmax_cross_entropy_loss %scores, %labels : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %1:2 = ampc.softmax_cross_entropy_loss %scores, %labels, %w {reduction = #ampc<reduction none>, ignore_index = -100 : i64} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<4xf32>, tensor<4x10xf32>)
  return %0#0, %0#1, %1#0 : tensor<f32>, tensor<4x10xf32>, tensor<4xf32>
}

// -----

// NegativeLogLikelihoodLoss over a spatial axis (N 2, 10 classes, 5
// positions, int32 labels) summed; its adjoint scatters the mean's gradient
// over 4x10.
// CHECK-LABEL: static int32_t infer(
// CHECK:         if (!(ampc::cpu::nllLoss<float>(logp, in1, nullptr, 2LL, 10LL, 5LL, false, 0LL, ampc::cpu::LossSum, loss, reinterpret_cast<float *>(state + 640), reinterpret_cast<float *>(state + 704)))) return ampc::cpu::fail(state + {{[0-9]+}}, "ampc.negative_log_likelihood_loss: a label is out of range");
// CHECK:         float *[[G:v[0-9]+]] = reinterpret_cast<float *>(state + 128);
// CHECK:           float *out = reinterpret_cast<float *>(state + 384);
// CHECK-NEXT:      if (!(ampc::cpu::nllLossGrad<float>(grad, in3, nullptr, 4LL, 10LL, 1LL, false, 0LL, ampc::cpu::LossMean, out))) return ampc::cpu::fail(state + {{[0-9]+}}, "ampc.nll_loss_grad: a label is out of range");
// CHECK-NEXT:      for (int64_t i = 0; i < 40LL; ++i) [[G]][i] = static_cast<float>(out[i]);
func.func @forward(%s3: tensor<2x10x5xf32>, %l3: tensor<2x5xi32>, %d: tensor<f32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %0 = ampc.negative_log_likelihood_loss %s3, %l3 {reduction = #ampc<reduction sum>} : (tensor<2x10x5xf32>, tensor<2x5xi32>) -> tensor<f32>
  %1 = ampc.nll_loss_grad %d, %t : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  return %0, %1 : tensor<f32>, tensor<4x10xf32>
}

// -----

// SoftmaxCrossEntropyLoss's adjoint as one op (nll_loss_grad with
// log_prob): the NLL gradient, then softmaxLossGrad in place over the
// FP32 log-probabilities, rounded once to the f16 result. The loss reads
// 16-bit scores through their codec.
// CHECK-LABEL: static int32_t infer(
// CHECK:           if (!(ampc::cpu::nllLossGrad<float>(grad, in1, weights, 2LL, 10LL, 3LL, true, -100LL, ampc::cpu::LossMean, out))) return
// CHECK-NEXT:      float *logp = reinterpret_cast<float *>(state + {{[0-9]+}});
// CHECK-NEXT:      ampc::cpu::convert<float, ampc::cpu::As<float>>(in3, 60LL, logp);
// CHECK-NEXT:      ampc::cpu::softmaxLossGrad<float>(out, logp, in1, 2LL, 10LL, 3LL, true, -100LL);
// CHECK-NEXT:      for (int64_t i = 0; i < 60LL; ++i) v{{[0-9]+}}[i] = ampc::cpu::storeF16(out[i]);
// CHECK:           ampc::cpu::softmax<float, ampc::cpu::AsF16, ampc::cpu::As<float>>(in4, logp, 2LL, 10LL, 3LL, true);
func.func @forward(%d: tensor<f32>, %t: tensor<2x3xi64>, %w: tensor<10xf32>, %lp: tensor<2x10x3xf32>, %s: tensor<2x10x3xf16>) -> (tensor<2x10x3xf16>, tensor<f32>, tensor<2x10x3xf32>) {
  %0 = ampc.nll_loss_grad %d, %t, %w log_prob(%lp) {ignore_index = -100 : i64} : (tensor<f32>, tensor<2x3xi64>, tensor<10xf32>, tensor<2x10x3xf32>) -> tensor<2x10x3xf16>
  %1:2 = ampc.softmax_cross_entropy_loss %s, %t : (tensor<2x10x3xf16>, tensor<2x3xi64>) -> (tensor<f32>, tensor<2x10x3xf32>)
  return %0, %1#0, %1#1 : tensor<2x10x3xf16>, tensor<f32>, tensor<2x10x3xf32>
}
