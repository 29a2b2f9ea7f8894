// RUN: ampc-opt %s --split-input-file --ampc-attach-loss | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-attach-loss="loss=mse label=target" | FileCheck %s --check-prefix=MSE
// RUN: ampc-opt %s --split-input-file --ampc-attach-loss=loss=none | FileCheck %s --check-prefix=NONE
// RUN: ampc-opt %s --split-input-file --ampc-attach-loss -mlir-print-debuginfo | FileCheck %s --check-prefix=LOC

// ampc-attach-loss makes the first result of @forward a scalar loss. When
// the model does not end in one, loss=cross_entropy (the default) or
// loss=mse appends a label input and computes the loss in FP32 on the first
// output; the model's outputs follow the loss. loss=none adds nothing.

// Logits (N, C) in f16: cross entropy against int64 class ids (N), the
// logits cast up to f32 first; the loss is result 0 and the logits stay.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<2x3xf16> {ampc.name = "x"}, %[[LABEL:.+]]: tensor<2xi64> {ampc.label, ampc.name = "label"})
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf16> {ampc.name = "logits"})
// CHECK-NEXT: %[[Y:.+]] = ampc.relu %[[X]]
// CHECK-NEXT: %[[Y32:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<2x3xf16> to tensor<2x3xf32>
// CHECK-NEXT: %[[LOSS:.+]], %{{.+}} = ampc.softmax_cross_entropy_loss %[[Y32]], %[[LABEL]] : (tensor<2x3xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x3xf32>)
// CHECK-NEXT: return %[[LOSS]], %[[Y]] : tensor<f32>, tensor<2x3xf16>

// Mean squared error: the label has the output's shape in f32, and the loss
// is mean((y - label)^2) over every element.
// MSE-LABEL: func.func @forward
// MSE-SAME: (%[[X:.+]]: tensor<2x3xf16> {ampc.name = "x"}, %[[T:.+]]: tensor<2x3xf32> {ampc.label, ampc.name = "target"})
// MSE-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<2x3xf16> {ampc.name = "logits"})
// MSE-NEXT: %[[Y:.+]] = ampc.relu %[[X]]
// MSE-NEXT: %[[Y32:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<2x3xf16> to tensor<2x3xf32>
// MSE-NEXT: %[[D:.+]] = ampc.sub %[[Y32]], %[[T]] : (tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// MSE-NEXT: %[[SQ:.+]] = ampc.mul %[[D]], %[[D]]
// MSE-NEXT: %[[LOSS:.+]] = ampc.reduce_mean %[[SQ]] {axes = array<i64>, keepdims = 0 : i64} : (tensor<2x3xf32>) -> tensor<f32>
// MSE-NEXT: return %[[LOSS]], %[[Y]]

// NONE-LABEL: func.func @forward
// NONE-SAME: (%{{.+}}: tensor<2x3xf16> {ampc.name = "x"}) -> (tensor<2x3xf16> {ampc.name = "logits"})

// The added ops are located at node "ampc.loss" (diagnostics, the precision
// report and node: rules name it); the label input like an imported input.
// LOC-LABEL: func.func @forward
// LOC-SAME: {ampc.label, ampc.name = "label"} loc("label"(
// LOC: ampc.cast {{.+}} loc(#[[CAST:.+]])
// LOC: ampc.softmax_cross_entropy_loss {{.+}} loc(#[[SCE:.+]])
// LOC-DAG: #[[CAST]] = loc("ampc.loss"(#[[CASTF:.+]]))
// LOC-DAG: #[[CASTF]] = loc(fused<"Cast">
// LOC-DAG: #[[SCE]] = loc("ampc.loss"(#[[SCEF:.+]]))
// LOC-DAG: #[[SCEF]] = loc(fused<"SoftmaxCrossEntropyLoss">
func.func @forward(%x: tensor<2x3xf16> {ampc.name = "x"}) -> (tensor<2x3xf16> {ampc.name = "logits"}) {
  %y = ampc.relu %x : tensor<2x3xf16>
  return %y : tensor<2x3xf16>
}

// -----

// An output that is a Softmax over the classes: the loss takes the Softmax's
// input, so the probabilities are not normalised twice. Scores (N, C, D)
// take labels (N, D).
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x5xf32> {ampc.name = "x"}, %[[LABEL:.+]]: tensor<2x5xi64> {ampc.label, ampc.name = "label"})
// CHECK-NEXT: %[[P:.+]] = ampc.softmax %[[X]] {axis = 1 : i64}
// CHECK-NEXT: %[[LOSS:.+]], %{{.+}} = ampc.softmax_cross_entropy_loss %[[X]], %[[LABEL]] : (tensor<2x3x5xf32>, tensor<2x5xi64>)
// CHECK-NEXT: return %[[LOSS]], %[[P]]
// MSE-LABEL: func.func @forward
// MSE: ampc.sub %{{.+}}, %{{.+}} : (tensor<2x3x5xf32>, tensor<2x3x5xf32>)
// NONE-LABEL: func.func @forward
func.func @forward(%x: tensor<2x3x5xf32> {ampc.name = "x"}) -> (tensor<2x3x5xf32> {ampc.name = "probs"}) {
  %p = ampc.softmax %x {axis = 1 : i64} : tensor<2x3x5xf32>
  return %p : tensor<2x3x5xf32>
}

// -----

// A LogSoftmax output over the classes gets NegativeLogLikelihoodLoss.
// CHECK-LABEL: func.func @forward
// CHECK: %[[LP:.+]] = ampc.log_softmax
// CHECK-NEXT: %[[LOSS:.+]] = ampc.negative_log_likelihood_loss %[[LP]], %{{.+}} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT: return %[[LOSS]], %[[LP]]
// MSE-LABEL: func.func @forward
// NONE-LABEL: func.func @forward
func.func @forward(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %lp = ampc.log_softmax %x : tensor<4x10xf32>
  return %lp : tensor<4x10xf32>
}

// -----

// A Softmax over another axis is just an output: the loss takes it as it is.
// CHECK-LABEL: func.func @forward
// CHECK: %[[P:.+]] = ampc.softmax %{{.+}} {axis = 0 : i64}
// CHECK-NEXT: ampc.softmax_cross_entropy_loss %[[P]],
// MSE-LABEL: func.func @forward
// NONE-LABEL: func.func @forward
func.func @forward(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %p = ampc.softmax %x {axis = 0 : i64} : tensor<4x10xf32>
  return %p : tensor<4x10xf32>
}

// -----

// A model that ends in a loss is left as it is, whatever the option.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.+}}: tensor<4x10xf32>, %{{.+}}: tensor<4xi64> {ampc.label}) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NOT: ampc.name = "label"
// CHECK: return %{{.+}}, %{{.+}} : tensor<f32>, tensor<4x10xf32>
// MSE-LABEL: func.func @forward
// MSE-SAME: (%{{.+}}: tensor<4x10xf32>, %{{.+}}: tensor<4xi64> {ampc.label}) -> (tensor<f32>, tensor<4x10xf32>)
// MSE-NOT: ampc.sub
// NONE-LABEL: func.func @forward
func.func @forward(%x: tensor<4x10xf32>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %loss, %logp = ampc.softmax_cross_entropy_loss %x, %t : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return %loss, %x : tensor<f32>, tensor<4x10xf32>
}

// -----

// An MSE the model computes (ReduceMean of Pow(Sub, 2)) as its second
// output becomes the first, with its name; nothing is added.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.+}}: tensor<4x2xf32>, %{{.+}}: tensor<4x2xf32>) -> (tensor<f32> {ampc.name = "mse"}, tensor<4x2xf32> {ampc.name = "y"})
// CHECK: %[[LOSS:.+]] = ampc.reduce_mean
// CHECK-NEXT: return %[[LOSS]], %{{.+}} : tensor<f32>, tensor<4x2xf32>
// NONE-LABEL: func.func @forward
// NONE-SAME: -> (tensor<f32> {ampc.name = "mse"}, tensor<4x2xf32> {ampc.name = "y"})
// MSE-LABEL: func.func @forward
func.func @forward(%x: tensor<4x2xf32>, %t: tensor<4x2xf32>) -> (tensor<4x2xf32> {ampc.name = "y"}, tensor<f32> {ampc.name = "mse"}) {
  %y = ampc.relu %x : tensor<4x2xf32>
  %d = ampc.sub %y, %t : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x2xf32>
  %two = ampc.constant dense<2.0> : tensor<f32>
  %sq = ampc.pow %d, %two : (tensor<4x2xf32>, tensor<f32>) -> tensor<4x2xf32>
  %loss = ampc.reduce_mean %sq {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
  return %y, %loss : tensor<4x2xf32>, tensor<f32>
}

// -----

// A mean of something else is not a loss: cross entropy is attached to the
// first output as usual.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<4x2xf32>, tensor<f32>)
// CHECK: ampc.softmax_cross_entropy_loss
// MSE-LABEL: func.func @forward
// NONE-LABEL: func.func @forward
func.func @forward(%x: tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<f32>) {
  %m = ampc.reduce_mean %x {axes = array<i64>, keepdims = 0 : i64} : (tensor<4x2xf32>) -> tensor<f32>
  return %x, %m : tensor<4x2xf32>, tensor<f32>
}
