// RUN: ampc-opt %s --split-input-file --ampc-running-statistics -verify-diagnostics | FileCheck %s

// The running mean and variance of a training-mode BatchNormalization become
// state of the same name and value, read with load_state by both functions;
// the step stores the op's running results last, also when the scaler
// found an overflow (torch's forward updates them before GradScaler skips
// optimizer.step()), and the variance's batch term is unbiased.
// CHECK-LABEL: module
// CHECK-NEXT: ampc.parameter @scale
// CHECK-NEXT: ampc.parameter @bias
// CHECK-NEXT: ampc.state @mean {ampc.buffer} : tensor<2xf32> = dense<[1.000000e-01, 2.000000e-01]>
// CHECK-NEXT: ampc.state @var {ampc.buffer} : tensor<2xf32> = dense<[1.000000e+00, 2.000000e+00]>
// CHECK-NOT: ampc.parameter @mean
// CHECK-NOT: num_batches_tracked
// CHECK-LABEL: func.func @forward
// CHECK-DAG: %[[M:.+]] = ampc.load_state @mean : tensor<2xf32>
// CHECK-DAG: %[[V:.+]] = ampc.load_state @var : tensor<2xf32>
// CHECK: ampc.batch_normalization %{{.+}}, %{{.+}}, %{{.+}}, %[[M]], %[[V]] :
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[SM:.+]] = ampc.load_state @mean : tensor<2xf32>
// CHECK-DAG: %[[SV:.+]] = ampc.load_state @var : tensor<2xf32>
// CHECK: %{{.+}}, %[[RM:.+]], %[[RV:.+]] = ampc.batch_normalization %{{.+}}, %{{.+}}, %{{.+}}, %[[SM]], %[[SV]] {training_mode = 1 : i64, unbiased_running_var}
// CHECK: %[[U:.+]], %[[F:.+]] = ampc.unscale
// CHECK: ampc.store @ampc.step
// CHECK-NEXT: ampc.store @mean, %[[RM]]
// CHECK-NEXT: ampc.store @var, %[[RV]]
// CHECK-NEXT: return
module {
  ampc.parameter @scale : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  ampc.parameter @bias : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  ampc.parameter @mean : tensor<2xf32> = dense<[0.1, 0.2]> : tensor<2xf32>
  ampc.parameter @var : tensor<2xf32> = dense<[1.0, 2.0]> : tensor<2xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32>
  ampc.state @ampc.step : tensor<i64> = dense<0> : tensor<i64>
  func.func @forward(%x: tensor<4x2xf32>) -> tensor<4x2xf32> {
    %s = ampc.load_parameter @scale : tensor<2xf32>
    %b = ampc.load_parameter @bias : tensor<2xf32>
    %m = ampc.load_parameter @mean : tensor<2xf32>
    %v = ampc.load_parameter @var : tensor<2xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %b, %m, %v {training_mode = 0 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    return %y : tensor<4x2xf32>
  }
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<f32> {
    %sc = ampc.load_state @ampc.loss_scale : tensor<f32>
    %step = ampc.load_state @ampc.step : tensor<i64>
    %s = ampc.load_parameter @scale : tensor<2xf32>
    %b = ampc.load_parameter @bias : tensor<2xf32>
    %m = ampc.load_parameter @mean : tensor<2xf32>
    %v = ampc.load_parameter @var : tensor<2xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %b, %m, %v {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %l = ampc.reduce_mean %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
    %u, %f = ampc.unscale %sc, %s : (tensor<f32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<i1>)
    ampc.store @scale, %u : tensor<2xf32>
    ampc.store @ampc.step, %step : tensor<i64>
    return %l : tensor<f32>
  }
}

// -----

// Without loss scaling the new values are stored as they are; statistics
// that are computed, not parameters, and eval-mode ops are left alone.
// CHECK-LABEL: module
// CHECK: ampc.state @mean
// CHECK: ampc.parameter @other
// CHECK-LABEL: func.func @train_step
// CHECK: %{{.+}}, %[[RM:.+]], %[[RV:.+]] = ampc.batch_normalization {{.*}}unbiased_running_var
// CHECK: ampc.batch_normalization %{{[^{]*}} :
// CHECK: ampc.batch_normalization {{.*}} {training_mode = 1 : i64}
// CHECK-NEXT: ampc.store @mean, %[[RM]]
// CHECK-NEXT: ampc.store @var, %[[RV]]
// CHECK-NEXT: return
module {
  ampc.parameter @mean : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  ampc.parameter @var : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  ampc.parameter @other : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  func.func @train_step(%x: tensor<4x2xf32>, %c: tensor<2xf32>) -> tensor<4x2xf32> {
    %m = ampc.load_parameter @mean : tensor<2xf32>
    %v = ampc.load_parameter @var : tensor<2xf32>
    %o = ampc.load_parameter @other : tensor<2xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %o, %o, %m, %v {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %y2, %a, %b = ampc.batch_normalization %y, %o, %o, %o, %o {training_mode = 0 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %y3, %c1, %c2 = ampc.batch_normalization %y2, %o, %o, %c, %c {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    return %y3 : tensor<4x2xf32>
  }
}

// -----

// One running statistic updated by two nodes cannot be kept.
module {
  ampc.parameter @mean : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  ampc.parameter @var : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  func.func @train_step(%x: tensor<4x2xf32>, %s: tensor<2xf32>) -> tensor<4x2xf32> {
    %m = ampc.load_parameter @mean : tensor<2xf32>
    %v = ampc.load_parameter @var : tensor<2xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %s, %m, %v {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    // expected-error @+1 {{the running statistic 'mean' is also updated by another BatchNormalization node}}
    %y2, %a, %b = ampc.batch_normalization %y, %s, %s, %m, %v {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    return %y2 : tensor<4x2xf32>
  }
}

// -----

// torch's names: PREFIX.running_mean gets the batch counter torch keeps as
// PREFIX.num_batches_tracked (an i64 buffer the export drops), incremented
// by every step as torch's forward does, skipped optimizer update or not.
// CHECK-LABEL: module
// CHECK: ampc.state @bn.running_mean {ampc.buffer}
// CHECK: ampc.state @bn.running_var {ampc.buffer}
// CHECK: ampc.state @bn.num_batches_tracked {ampc.buffer} : tensor<i64> = dense<0> : tensor<i64>
// CHECK-LABEL: func.func @train_step
// CHECK: %[[N:.+]] = ampc.load_state @bn.num_batches_tracked : tensor<i64>
// CHECK: ampc.unscale
// CHECK: %[[ONE:.+]] = ampc.constant dense<1> : tensor<i64>
// CHECK-NEXT: %[[NEXT:.+]] = ampc.add %[[N]], %[[ONE]]
// CHECK-NEXT: ampc.store @bn.num_batches_tracked, %[[NEXT]]
// CHECK-NOT: ampc.where
module {
  ampc.parameter @scale : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  ampc.parameter @bias : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  ampc.parameter @bn.running_mean : tensor<2xf32> = dense<0.0> : tensor<2xf32>
  ampc.parameter @bn.running_var : tensor<2xf32> = dense<1.0> : tensor<2xf32>
  ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04> : tensor<f32>
  func.func @train_step(%x: tensor<4x2xf32>) -> tensor<f32> {
    %sc = ampc.load_state @ampc.loss_scale : tensor<f32>
    %s = ampc.load_parameter @scale : tensor<2xf32>
    %b = ampc.load_parameter @bias : tensor<2xf32>
    %m = ampc.load_parameter @bn.running_mean : tensor<2xf32>
    %v = ampc.load_parameter @bn.running_var : tensor<2xf32>
    %y, %rm, %rv = ampc.batch_normalization %x, %s, %b, %m, %v {training_mode = 1 : i64} : (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x2xf32>, tensor<2xf32>, tensor<2xf32>)
    %l = ampc.reduce_mean %y {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
    %u, %f = ampc.unscale %sc, %s : (tensor<f32>, tensor<2xf32>) -> (tensor<2xf32>, tensor<i1>)
    ampc.store @scale, %u : tensor<2xf32>
    return %l : tensor<f32>
  }
}
