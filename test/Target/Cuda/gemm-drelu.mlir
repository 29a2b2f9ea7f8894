// RUN: ampc-opt %s --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" \
// RUN:   | ampc-translate --ampc-to-cuda | FileCheck %s
// RUN: ampc-opt %s --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" --ampc-fold-transposes --ampc-fuse --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory \
// RUN:   | not ampc-translate --ampc-to-cpp 2>&1 | FileCheck %s --check-prefix=CPU

// A Linear + ReLU, the next layer's input gradient and the ReLU's backward
// (issue 37, item 3), FP32: the forward GEMM is cuBLASLt's RELU_AUX_BIAS
// with the ReLU bit mask through CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
// (the call's last argument) and AUX_LD 128 bits (16 columns rounded up to
// 128, after the packed leading dimensions); the dX GEMM is DRELU_BGRAD
// reading the same mask, its bias gradient through the bias pointer. No
// relu_grad kernel, no reduce, and the weight gradient's GEMM is DEFAULT.
// CHECK-NOT: ampc::cuda::reduce
// CHECK: static const ampc::cuda::Gemm g = {false, true, 8LL, 16LL, 4LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_RELU_AUX_BIAS, 0LL, 0LL, 0LL, 128LL};
// CHECK-NEXT: ampc::cuda::gemm(ctx, "ampc.gemm", g, [[X:in[0-9]+]], [[W1:in[0-9]+]], [[H:v[0-9]+]], [[B1:in[0-9]+]], [[MASK:v[0-9]+]])
// CHECK: CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT: ampc::cuda::gemm(ctx, "ampc.gemm", g, [[DY:in[0-9]+]], [[H]], v{{[0-9]+}}, nullptr)
// CHECK: static const ampc::cuda::Gemm g = {false, false, 8LL, 16LL, 3LL, 1LL, 0LL, 0LL, 0LL, CUDA_R_32F, CUDA_R_32F, 1.000000000e+00f, 0.000000000e+00f, CUBLASLT_EPILOGUE_DRELU_BGRAD, 0LL, 0LL, 0LL, 128LL};
// CHECK-NEXT: ampc::cuda::gemm(ctx, "ampc.gemm", g, [[DY]], [[W2:in[0-9]+]], [[DZ:v[0-9]+]], [[DB:v[0-9]+]], [[MASK]])
// CHECK: CUBLASLT_EPILOGUE_DEFAULT};
// CHECK-NEXT: ampc::cuda::gemm(ctx, "ampc.gemm", g, [[DZ]], [[X]], v{{[0-9]+}}, nullptr)
// CHECK-NOT: ampc::cuda::reduce
//
// The CPU target (the reference) keeps relu_grad and the ReduceSum: its
// pipeline never asks for these epilogues, and its emitter refuses them.
// CPU: the CPU target does not take epilogue 'relu_aux_bias' (a cuBLASLt ReLU mask; the CUDA target's)
func.func @forward(%x: tensor<8x4xf32>, %w1: tensor<16x4xf32>, %b1: tensor<16xf32>, %w2: tensor<3x16xf32>, %dy: tensor<8x3xf32>) -> (tensor<16x4xf32>, tensor<16xf32>, tensor<3x16xf32>) {
  %h0 = ampc.gemm %x, %w1, %b1 {transB = 1 : i64} : (tensor<8x4xf32>, tensor<16x4xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %h = ampc.relu %h0 : tensor<8x16xf32>
  %dw2 = ampc.gemm %dy, %h {transA = 1 : i64} : (tensor<8x3xf32>, tensor<8x16xf32>) -> tensor<3x16xf32>
  %dh = ampc.gemm %dy, %w2 : (tensor<8x3xf32>, tensor<3x16xf32>) -> tensor<8x16xf32>
  %dz = ampc.relu_grad %dh, %h : tensor<8x16xf32>
  %db1 = ampc.reduce_sum %dz {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<8x16xf32>) -> tensor<16xf32>
  %dw1 = ampc.gemm %dz, %x {transA = 1 : i64} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<16x4xf32>
  return %dw1, %db1, %dw2 : tensor<16x4xf32>, tensor<16xf32>, tensor<3x16xf32>
}
