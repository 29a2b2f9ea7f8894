// RUN: ampc-opt %s --ampc-assign-accumulation --ampc-assign-launch-geometry --ampc-plan-memory | not ampc-translate --ampc-to-cpp 2>&1 | FileCheck %s

// ampc-fuse-batch-norm-epilogue's backward half is the CUDA target's: the
// CPU target computes the ReLU mask and the residual sum of a BatchNorm's
// adjoint as their own ops, and names a prologue it is given.
// CHECK: error: {{.*}}: the CPU target computes a BatchNorm adjoint's ReLU mask and residual sum as their own ops (no addend, relu_output or keep_grad)
func.func @forward(%dy: tensor<2x4x3x3xf32>, %x: tensor<2x4x3x3xf32>, %y: tensor<2x4x3x3xf32>, %s: tensor<4xf32>) -> tensor<2x4x3x3xf32> {
  %dx, %ds, %db = ampc.batch_norm_grad %dy, %x, %s, %s, %s relu_output %y : (tensor<2x4x3x3xf32>, tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<2x4x3x3xf32>) -> (tensor<2x4x3x3xf32>, tensor<4xf32>, tensor<4xf32>)
  return %dx : tensor<2x4x3x3xf32>
}
