// RUN: ampc-opt %s --ampc-widen-to-f64 | FileCheck %s

// --precision=fp64: every f32 tensor becomes f64 (signature, parameters and
// constants with their values converted exactly, every result, a fusion's block arguments,
// LayerNormalization's stash); integer tensors and f16 stay as they are.
// CHECK: ampc.parameter @w : tensor<4x4xf64> = dense<5.000000e-01> : tensor<4x4xf64>
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.+}}: tensor<2x4xf64>, %{{.+}}: tensor<2xi64>, %{{.+}}: tensor<4xf16>) -> (tensor<2x4xf64>, tensor<2x1xf64>)
// CHECK-NEXT: ampc.load_parameter @w : tensor<4x4xf64>
// CHECK-NEXT: ampc.constant dense<0.10000000149011612> : tensor<4xf64>
// CHECK-NEXT: ampc.gemm {{.+}} -> tensor<2x4xf64>
// CHECK-NEXT: ampc.cast %{{.+}} : tensor<4xf16> to tensor<4xf64>
// CHECK-NEXT: ampc.layer_normalization {{.+}}stash_type = 11 : i64{{.+}} -> (tensor<2x4xf64>, tensor<2x1xf64>, tensor<2x1xf64>)
// CHECK-NEXT: return
ampc.parameter @w : tensor<4x4xf32> = dense<0.5> : tensor<4x4xf32>
func.func @forward(%x: tensor<2x4xf32>, %i: tensor<2xi64>, %h: tensor<4xf16>) -> (tensor<2x4xf32>, tensor<2x1xf32>) {
  %w = ampc.load_parameter @w : tensor<4x4xf32>
  %c = ampc.constant dense<0.1> : tensor<4xf32>
  %g = ampc.gemm %x, %w, %c : (tensor<2x4xf32>, tensor<4x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %s = ampc.cast %h : tensor<4xf16> to tensor<4xf32>
  %y, %m, %r = ampc.layer_normalization %g, %s {axis = -1 : i64} : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x1xf32>, tensor<2x1xf32>)
  return %y, %m : tensor<2x4xf32>, tensor<2x1xf32>
}
