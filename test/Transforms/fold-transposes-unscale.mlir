// RUN: ampc-opt %s --ampc-fold-transposes | FileCheck %s
// RUN: ampc-opt %s --ampc-fold-transposes --ampc-fold-casts | FileCheck %s --check-prefix=CASTS

// A channels-last convolution's weight gradient (M, kH, kW, C), transposed
// back to the weight's layout (M, C, kH, kW) and widened for the loss
// scaler (the adjoints of ampc-channels-last's weight transpose and of
// autocast's cast): the unscale reads it channels-last in place, the cast
// applied untransposed; ampc-fold-casts then folds the cast too, so no
// kernel transposes or widens the gradient. A transpose something else
// reads too stays.
// CHECK-LABEL: func.func @step
// CHECK: %[[DW:.+]] = ampc.conv_backward_weight
// CHECK-NOT: ampc.transpose %[[DW]]
// CHECK: %[[W:.+]] = ampc.cast %[[DW]] : tensor<4x3x3x2xf16> to tensor<4x3x3x2xf32>
// CHECK: %[[KEPT:.+]] = ampc.transpose %{{.+}} {perm = array<i64: 0, 3, 1, 2>} : (tensor<4x3x3x2xf16>) -> tensor<4x2x3x3xf16>
// CHECK: ampc.unscale %{{.+}}, %{{.+}}, %[[W]], %{{.+}} {channels_last = array<i64: 1>} : (tensor<f32>, tensor<4xf32>, tensor<4x3x3x2xf32>, tensor<4x2x3x3xf16>) -> (tensor<4xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<i1>)
// CASTS: %[[DW:.+]] = ampc.conv_backward_weight
// CASTS-NOT: ampc.cast %[[DW]]
// CASTS: ampc.unscale %{{.+}}, %{{.+}}, %[[DW]], %{{.+}} {channels_last = array<i64: 1>} : (tensor<f32>, tensor<4xf32>, tensor<4x3x3x2xf16>, tensor<4x2x3x3xf16>)
func.func @step(%x: tensor<2x5x5x2xf16>, %dy: tensor<2x3x3x4xf16>, %s: tensor<f32>, %b: tensor<4xf32>, %other: tensor<4x3x3x2xf16>) -> (tensor<4xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf16>) {
  %dw = ampc.conv_backward_weight %x, %dy {channels_last} : (tensor<2x5x5x2xf16>, tensor<2x3x3x4xf16>) -> tensor<4x3x3x2xf16>
  %t = ampc.transpose %dw {perm = array<i64: 0, 3, 1, 2>} : (tensor<4x3x3x2xf16>) -> tensor<4x2x3x3xf16>
  %w = ampc.cast %t : tensor<4x2x3x3xf16> to tensor<4x2x3x3xf32>
  %t2 = ampc.transpose %other {perm = array<i64: 0, 3, 1, 2>} : (tensor<4x3x3x2xf16>) -> tensor<4x2x3x3xf16>
  %u:3, %found = ampc.unscale %s, %b, %w, %t2 : (tensor<f32>, tensor<4xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf16>) -> (tensor<4xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<i1>)
  return %u#0, %u#1, %u#2, %t2 : tensor<4xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf32>, tensor<4x2x3x3xf16>
}
