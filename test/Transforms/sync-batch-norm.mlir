// ampc-sync-batch-norm (issue 41, --sync-batchnorm): in a data-parallel
// step, every training-mode BatchNorm and BatchNorm adjoint gets the
// request number of its all-reduce, after the buckets' (0 and 1 here), in
// the step's order; inference-mode ones and functions without buckets are
// left alone.
// RUN: ampc-opt --ampc-sync-batch-norm %s | FileCheck %s

// CHECK-LABEL: func.func @step
// CHECK: ampc.batch_normalization {{.+}} {ampc.sync_request = 2 : i64, saved_statistics, training_mode = 1 : i64}
// CHECK: ampc.batch_normalization %{{[a-z_0-9]+}}, %arg2, %arg2, %running_mean, %running_var :
// CHECK: ampc.batch_norm_grad {{.+}} {ampc.sync_request = 3 : i64} :
// CHECK: ampc.batch_norm_grad {{.+}} {training_mode = 0 : i64} :
// CHECK: ampc.all_reduce_start {{.+}} {bucket = 1 : i64}
// CHECK: ampc.all_reduce_start {{.+}} {bucket = 0 : i64}
func.func @step(%x: tensor<2x3x4xf32>, %dy: tensor<2x3x4xf32>, %s: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>, tensor<2x3x4xf32>) {
  %y, %rm, %rv, %mean, %rstd = ampc.batch_normalization %x, %s, %s, %s, %s {saved_statistics, training_mode = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>)
  %e, %em, %ev = ampc.batch_normalization %y, %s, %s, %rm, %rv {training_mode = 0 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %dx, %ds, %db = ampc.batch_norm_grad %dy, %x, %s, %mean, %rstd {training_mode = 1 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %ex, %es, %eb = ampc.batch_norm_grad %dy, %x, %s, %mean, %rstd {training_mode = 0 : i64} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  %p1 = ampc.all_reduce_start %db {bucket = 1 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  %p0 = ampc.all_reduce_start %ds {bucket = 0 : i64} : (tensor<3xf32>) -> tensor<3xf32>
  %m0 = ampc.all_reduce_wait %p0, %ds : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %m1 = ampc.all_reduce_wait %p1, %db : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  return %m0, %m1, %dx : tensor<3xf32>, tensor<3xf32>, tensor<2x3x4xf32>
}

// Not a data-parallel step (no buckets): nothing to synchronise with.
// CHECK-LABEL: func.func @alone
// CHECK-NOT: ampc.sync_request
func.func @alone(%x: tensor<2x3x4xf32>, %s: tensor<3xf32>) -> tensor<2x3x4xf32> {
  %y, %rm, %rv = ampc.batch_normalization %x, %s, %s, %s, %s {training_mode = 1 : i64} : (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<2x3x4xf32>, tensor<3xf32>, tensor<3xf32>)
  return %y : tensor<2x3x4xf32>
}
