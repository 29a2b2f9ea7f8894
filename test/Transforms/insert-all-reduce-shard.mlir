// ampc-insert-all-reduce in a module marked ampc.shard_optimizer (ZeRO-1,
// --shard-optimizer; issue 41, item 3).
// RUN: ampc-opt --split-input-file --verify-diagnostics --ampc-insert-all-reduce="bucket-bytes=4" %s | FileCheck %s --check-prefix=SHARD

// Every gradient in one bucket whatever
// the bucket size, its start marked ampc.shard_optimizer; the second update
// moved up next to the first, before the first's readers, so that the
// target's all-gather can follow both.
// SHARD-LABEL: func.func @sharded
// SHARD: ampc.all_reduce_start {{.+}} {ampc.overlap = 0 : i64, ampc.shard_optimizer, bucket = 0 : i64} : (tensor<3xf32>, tensor<8xf32>) -> tensor<11xf32>
// SHARD-NOT: ampc.all_reduce_start
// SHARD: %[[N1:.+]] = ampc.optimizer_update %arg0
// SHARD-NEXT: %[[N2:.+]] = ampc.optimizer_update %arg1
// SHARD-NEXT: ampc.relu %[[N1]]
// SHARD-NEXT: ampc.relu %[[N2]]
module attributes {ampc.shard_optimizer} {
func.func @sharded(%w1: tensor<3xf32>, %w2: tensor<8xf32>, %x: tensor<3xf32>, %y: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<i64>) -> (tensor<3xf32>, tensor<8xf32>) {
  %g1 = ampc.relu %x : tensor<3xf32>
  %g2 = ampc.relu %y : tensor<8xf32>
  %n1 = ampc.optimizer_update %w1, %g1, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  %r1 = ampc.relu %n1 : tensor<3xf32>
  %n2 = ampc.optimizer_update %w2, %g2, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>) -> tensor<8xf32>
  %r2 = ampc.relu %n2 : tensor<8xf32>
  return %r1, %r2 : tensor<3xf32>, tensor<8xf32>
}
}

// -----

// An update that reads what is computed after the first cannot be moved.
module attributes {ampc.shard_optimizer} {
func.func @unmovable(%w1: tensor<3xf32>, %w2: tensor<3xf32>, %x: tensor<3xf32>, %lr: tensor<f32>, %step: tensor<i64>) -> (tensor<3xf32>, tensor<3xf32>) {
  %g1 = ampc.relu %x : tensor<3xf32>
  %g2 = ampc.relu %w2 : tensor<3xf32>
  %n1 = ampc.optimizer_update %w1, %g1, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  %lr2 = ampc.relu %lr : tensor<f32>
  // expected-error @+1 {{ampc-insert-all-reduce: --shard-optimizer cannot move this update next to the first (it reads a value computed after it)}}
  %n2 = ampc.optimizer_update %w2, %g2, %lr2, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  return %n1, %n2 : tensor<3xf32>, tensor<3xf32>
}
}

// -----

// Unmarked, the same function keeps its buckets and its order.
// SHARD-LABEL: func.func @unsharded
// SHARD: ampc.all_reduce_start {{.+}} {ampc.overlap = {{[0-9]+}} : i64, bucket = 0 : i64}
// SHARD: ampc.all_reduce_start {{.+}} {ampc.overlap = 0 : i64, bucket = 1 : i64}
// SHARD: ampc.optimizer_update %arg0
// SHARD-NEXT: ampc.relu
// SHARD-NEXT: ampc.optimizer_update %arg1
func.func @unsharded(%w1: tensor<3xf32>, %w2: tensor<8xf32>, %x: tensor<3xf32>, %y: tensor<8xf32>, %lr: tensor<f32>, %step: tensor<i64>) -> (tensor<3xf32>, tensor<8xf32>) {
  %g1 = ampc.relu %x : tensor<3xf32>
  %g2 = ampc.relu %y : tensor<8xf32>
  %n1 = ampc.optimizer_update %w1, %g1, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<3xf32>, tensor<3xf32>, tensor<f32>, tensor<i64>) -> tensor<3xf32>
  %r1 = ampc.relu %n1 : tensor<3xf32>
  %n2 = ampc.optimizer_update %w2, %g2, %lr, %step {kind = #ampc<optimizer sgd>} : (tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i64>) -> tensor<8xf32>
  %r2 = ampc.relu %n2 : tensor<8xf32>
  return %r1, %r2 : tensor<3xf32>, tensor<8xf32>
}
