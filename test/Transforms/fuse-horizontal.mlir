// RUN: ampc-opt %s --split-input-file --ampc-fuse-horizontal | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse --ampc-fuse-horizontal | FileCheck %s --check-prefix=PIPELINE

// ampc-fuse-horizontal: a run of independent small elementwise ops and
// fusions with only stores between them is one fusion at the first's
// place, yielding every member's values (each BatchNorm's batch counter
// and the step counter are one kernel).

// Three counters, each loaded, incremented and stored, and the step
// counter's fusion before them: one fusion of four results.
// CHECK-LABEL: func.func @counters
// CHECK: %[[F:.+]]:4 = ampc.fusion(%{{.+}}) : ({{.*}}) -> (tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>) {
// CHECK: ampc.where
// CHECK: ampc.yield %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} : tensor<i64>, tensor<i64>, tensor<i64>, tensor<i64>
// CHECK-NEXT: }
// CHECK-NEXT: ampc.store @step, %[[F]]#0
// CHECK-NEXT: ampc.store @a, %[[F]]#1
// CHECK-NEXT: ampc.store @b, %[[F]]#2
// CHECK-NEXT: ampc.store @c, %[[F]]#3
// CHECK-NEXT: return
ampc.state @step : tensor<i64> = dense<0> : tensor<i64>
ampc.state @a : tensor<i64> = dense<0> : tensor<i64>
ampc.state @b : tensor<i64> = dense<0> : tensor<i64>
ampc.state @c : tensor<i64> = dense<0> : tensor<i64>
func.func @counters(%skip: tensor<i1>) {
  %one = ampc.constant dense<1> : tensor<i64>
  %s = ampc.load_state @step : tensor<i64>
  %a = ampc.load_state @a : tensor<i64>
  %b = ampc.load_state @b : tensor<i64>
  %c = ampc.load_state @c : tensor<i64>
  %s1 = ampc.fusion(%s, %one, %skip) : (tensor<i64>, tensor<i64>, tensor<i1>) -> tensor<i64> {
  ^bb0(%x: tensor<i64>, %y: tensor<i64>, %k: tensor<i1>):
    %n = ampc.add %x, %y : (tensor<i64>, tensor<i64>) -> tensor<i64>
    %w = ampc.where %k, %x, %n : (tensor<i1>, tensor<i64>, tensor<i64>) -> tensor<i64>
    ampc.yield %w : tensor<i64>
  }
  ampc.store @step, %s1 : tensor<i64>
  %a1 = ampc.add %a, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  ampc.store @a, %a1 : tensor<i64>
  %b1 = ampc.add %b, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  ampc.store @b, %b1 : tensor<i64>
  %c1 = ampc.add %c, %one : (tensor<i64>, tensor<i64>) -> tensor<i64>
  ampc.store @c, %c1 : tensor<i64>
  return
}

// -----

// A run ends at: a member reading another's result (%d reads %a1), a
// different shape, a cast, any op that is not a store. Large results are
// left alone.
// CHECK-LABEL: func.func @ends
// CHECK-NEXT: ampc.load_state
// CHECK-NEXT: ampc.add
// CHECK-NEXT: ampc.store @a
// CHECK-NEXT: ampc.mul
// CHECK-NEXT: ampc.neg
// CHECK-NEXT: ampc.cast
// CHECK-NEXT: ampc.reduce_sum
// CHECK-NEXT: ampc.exp
// CHECK-NEXT: ampc.exp
// CHECK-NEXT: ampc.fusion
// CHECK-NOT: ampc.fusion
// CHECK: return
ampc.state @a : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @ends(%x: tensor<3xf32>, %y: tensor<4xf32>, %big: tensor<5000xf32>, %big2: tensor<5000xf32>) -> (tensor<3xf32>, tensor<4xf32>, tensor<3xf16>, tensor<f32>, tensor<5000xf32>, tensor<5000xf32>, tensor<3xf32>, tensor<3xf32>) {
  %a = ampc.load_state @a : tensor<3xf32>
  %a1 = ampc.add %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  ampc.store @a, %a1 : tensor<3xf32>
  %d = ampc.mul %a1, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = ampc.neg %y : tensor<4xf32>
  %h = ampc.cast %x : tensor<3xf32> to tensor<3xf16>
  %r = ampc.reduce_sum %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<3xf32>) -> tensor<f32>
  %e1 = ampc.exp %big : tensor<5000xf32>
  %e2 = ampc.exp %big2 : tensor<5000xf32>
  %p = ampc.relu %x : tensor<3xf32>
  %q = ampc.abs %x : tensor<3xf32>
  return %d, %n, %h, %r, %e1, %e2, %p, %q : tensor<3xf32>, tensor<4xf32>, tensor<3xf16>, tensor<f32>, tensor<5000xf32>, tensor<5000xf32>, tensor<3xf32>, tensor<3xf32>
}

// -----

// After ampc-fuse: a chain and a lone op, independent, side by side.
// PIPELINE-LABEL: func.func @after_fuse
// PIPELINE-NEXT: %[[F:.+]]:2 = ampc.fusion(%{{.+}}, %{{.+}}) : (tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
// PIPELINE: ampc.relu
// PIPELINE: ampc.exp
// PIPELINE: ampc.neg
// PIPELINE: ampc.yield
// PIPELINE-NEXT: }
// PIPELINE-NEXT: return %[[F]]#0, %[[F]]#1
func.func @after_fuse(%x: tensor<8xf32>, %y: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %r = ampc.relu %x : tensor<8xf32>
  %e = ampc.exp %r : tensor<8xf32>
  %n = ampc.neg %y : tensor<8xf32>
  return %e, %n : tensor<8xf32>, tensor<8xf32>
}

// -----

// A member that reads a state in place after a store in the run wrote it
// would read the stored value at the run's start: it starts a new run.
// CHECK-LABEL: func.func @stored_in_run
// CHECK: %[[A:.+]] = ampc.load_state @a
// CHECK-NEXT: %[[A1:.+]] = ampc.add %[[A]]
// CHECK-NEXT: ampc.store @a, %[[A1]]
// CHECK-NEXT: ampc.fusion
// CHECK: ampc.sub
// CHECK: ampc.neg
ampc.state @a : tensor<3xf32> = dense<0.0> : tensor<3xf32>
func.func @stored_in_run(%x: tensor<3xf32>) -> (tensor<3xf32>, tensor<3xf32>) {
  %a = ampc.load_state @a : tensor<3xf32>
  %a1 = ampc.add %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  ampc.store @a, %a1 : tensor<3xf32>
  %z = ampc.sub %a, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %n = ampc.neg %x : tensor<3xf32>
  return %z, %n : tensor<3xf32>, tensor<3xf32>
}
