// RUN: ampc-opt %s --split-input-file --ampc-insert-loss-scaling | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-insert-loss-scaling="mode=static init-scale=128" | FileCheck %s --check-prefix=STATIC
// RUN: ampc-opt %s --split-input-file --ampc-insert-loss-scaling="mode=none" | FileCheck %s --check-prefix=NONE
// RUN: ampc-opt %s --split-input-file --ampc-insert-loss-scaling="growth-interval=10 min-scale=1 max-scale=1048576" | FileCheck %s --check-prefix=BOUNDS
// RUN: not ampc-opt %s --split-input-file --ampc-insert-loss-scaling="mode=sometimes" 2>&1 | FileCheck %s --check-prefix=BADMODE --implicit-check-not="Cannot find option"
// RUN: not ampc-opt %s --split-input-file --ampc-insert-loss-scaling="backoff-factor=2" 2>&1 | FileCheck %s --check-prefix=BADFACTOR

// The seed of the backward becomes the scale times the seed (the marked
// constant 1 stays for ampc-accumulate-gradients; the canonicalizer folds
// the product), the gradient goes through one ampc.unscale, the scale and
// the skipped-step count are updated and stored at the end.
// CHECK: ampc.state @ampc.loss_scale : tensor<f32> = dense<6.553600e+04>
// CHECK: ampc.state @ampc.growth_tracker : tensor<i32> = dense<0>
// CHECK: ampc.state @ampc.skipped_steps : tensor<i64> = dense<0>
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[SKIPPED:.+]] = ampc.load_state @ampc.skipped_steps
// CHECK-DAG: %[[TRACKER:.+]] = ampc.load_state @ampc.growth_tracker
// CHECK-DAG: %[[SCALE:.+]] = ampc.load_state @ampc.loss_scale
// CHECK: %[[ONE:.+]] = ampc.constant dense<1.000000e+00> : tensor<f32> {ampc.loss_seed}
// CHECK-NEXT: %[[SEED:.+]] = ampc.mul %[[SCALE]], %[[ONE]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK: ampc.reshape %[[SEED]] : tensor<f32> to tensor<1x1xf32>
// CHECK: %[[G:.+]] = ampc.gemm
// CHECK-NEXT: %[[U:.+]], %[[F:.+]] = ampc.unscale %[[SCALE]], %[[G]] : (tensor<f32>, tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<i1>)
// CHECK-NEXT: %[[S:.+]], %[[T:.+]] = ampc.update_scale %[[SCALE]], %[[TRACKER]], %[[F]] : tensor<f32>, tensor<i32>, tensor<i1>
// CHECK: %[[COUNT:.+]] = ampc.where %[[F]], %{{.+}}, %[[SKIPPED]]
// CHECK-NEXT: ampc.store @ampc.loss_scale, %[[S]]
// CHECK-NEXT: ampc.store @ampc.growth_tracker, %[[T]]
// CHECK-NEXT: ampc.store @ampc.skipped_steps, %[[COUNT]]
// CHECK-NEXT: return %{{.+}}, %[[U]]

// A fixed scale: the unscale and found_inf, no update.
// STATIC: ampc.state @ampc.loss_scale : tensor<f32> = dense<1.280000e+02>
// STATIC: ampc.state @ampc.skipped_steps : tensor<i64>
// STATIC-NOT: ampc.state @ampc.growth_tracker
// STATIC: ampc.unscale
// STATIC-NOT: ampc.update_scale
// Skipped steps are counted with a static scale too; the scale never changes.
// STATIC: %[[SKIPPED:.+]] = ampc.where
// STATIC-NEXT: ampc.store @ampc.skipped_steps, %[[SKIPPED]]
// STATIC-NOT: ampc.store

// NONE-NOT: ampc.state
// NONE: ampc.constant dense<1.000000e+00> : tensor<f32> {ampc.loss_seed}
// NONE-NOT: ampc.unscale

// BOUNDS: ampc.update_scale {{.*}} {growth_interval = 10 : i64, max_scale = 0x49800000 : f32, min_scale = 1.000000e+00 : f32}

// BADMODE: error: ampc-insert-loss-scaling: mode must be dynamic, static or none, got 'sometimes'
// BADFACTOR: error: ampc-insert-loss-scaling: expected init-scale > 0, growth-factor > 1, 0 < backoff-factor < 1
module {
  ampc.parameter @w : tensor<2x3xf32> = dense<[[1.000000e-01, -2.000000e-01, 3.000000e-01], [4.000000e-01, 5.000000e-01, -6.000000e-01]]> : tensor<2x3xf32>
  func.func @train_step(%arg0: tensor<2x3xf32> {ampc.name = "x"}, %arg1: tensor<2x2xf32> {ampc.label, ampc.name = "label"}) -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf32> {ampc.gradient_of = @w}) {
    %0 = ampc.load_parameter @w : tensor<2x3xf32>
    %1 = ampc.gemm %arg0, %0 {transB = 1 : i64} : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
    %2 = ampc.sub %1, %arg1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %3 = ampc.mul %2, %2 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %4 = ampc.reduce_mean %3 {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x2xf32>) -> tensor<f32>
    %5 = ampc.constant dense<1.000000e+00> : tensor<f32> {ampc.loss_seed}
    %6 = ampc.reshape %5 : tensor<f32> to tensor<1x1xf32>
    %9 = ampc.expand %6 : tensor<1x1xf32> to tensor<2x2xf32>
    %10 = ampc.mul %9, %2 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
    %13 = ampc.gemm %10, %arg0 {transA = 1 : i64} : (tensor<2x2xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    return %4, %13 : tensor<f32>, tensor<2x3xf32>
  }
}
