// RUN: ampc-opt %s --ampc-eval-forward | FileCheck %s
// The pass is declared on functions: it runs nested in func.func (as
// buildPipeline nests it), and a module pipeline does not take it.
// RUN: ampc-opt %s --pass-pipeline="builtin.module(func.func(ampc-eval-forward))" | FileCheck %s
// RUN: not ampc-opt %s --pass-pipeline="builtin.module(ampc-eval-forward)" 2>&1 | FileCheck %s --check-prefix=NOT-ON-MODULE
// NOT-ON-MODULE: restricted to 'func.func' on a PassManager intended to run on 'builtin.module'

// @forward's Dropout and BatchNormalization run in eval mode, and a fused
// attention's dropout is off (ratio 0); @train_step's keep training mode.
// CHECK-LABEL: func.func @forward
// CHECK: ampc.batch_normalization %arg0, %arg1, %arg1, %arg1, %arg1 :
// CHECK: ampc.dropout %{{.+}} {ratio = 2.500000e-01 : f32} :
// CHECK: ampc.attention %arg2, %arg2, %arg2 {dropout_seed = 7 : i64, scale = 1.000000e+00 : f32} :
// CHECK-LABEL: func.func @train_step
// CHECK: ampc.batch_normalization {{.*}} {training_mode = 1 : i64}
// CHECK: ampc.dropout {{.*}} {ratio = 2.500000e-01 : f32, training_mode = 1 : i64}
// CHECK: ampc.attention %arg2, %arg2, %arg2 {dropout_ratio = 1.000000e-01 : f32, dropout_seed = 7 : i64, scale = 1.000000e+00 : f32} :
module {
  func.func @forward(%x: tensor<4x2xf32>, %p: tensor<2xf32>, %a: tensor<1x1x3x2xf32>) -> (tensor<4x2xf32>, tensor<1x1x3x2xf32>) {
    %y, %rm, %rv = ampc.batch_normalization %x, %p, %p, %p, %p {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %d, %mask = ampc.dropout %y {ratio = 0.25 : f32, training_mode = 1 : i64} : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xi1>)
    %o, %lse = ampc.attention %a, %a, %a {dropout_ratio = 0.1 : f32, dropout_seed = 7 : i64, scale = 1.0 : f32} : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> (tensor<1x1x3x2xf32>, tensor<1x1x3xf32>)
    return %d, %o : tensor<4x2xf32>, tensor<1x1x3x2xf32>
  }
  func.func @train_step(%x: tensor<4x2xf32>, %p: tensor<2xf32>, %a: tensor<1x1x3x2xf32>) -> (tensor<4x2xf32>, tensor<1x1x3x2xf32>) {
    %y, %rm, %rv = ampc.batch_normalization %x, %p, %p, %p, %p {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %d, %mask = ampc.dropout %y {ratio = 0.25 : f32, training_mode = 1 : i64} : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xi1>)
    %o, %lse = ampc.attention %a, %a, %a {dropout_ratio = 0.1 : f32, dropout_seed = 7 : i64, scale = 1.0 : f32} : (tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>, tensor<1x1x3x2xf32>) -> (tensor<1x1x3x2xf32>, tensor<1x1x3xf32>)
    return %d, %o : tensor<4x2xf32>, tensor<1x1x3x2xf32>
  }
}
