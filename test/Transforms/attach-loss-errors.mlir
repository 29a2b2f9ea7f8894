// RUN: ampc-opt %s --split-input-file --ampc-attach-loss -verify-diagnostics
// RUN: not ampc-opt %s --split-input-file --ampc-attach-loss=loss=hinge 2>&1 | FileCheck %s --check-prefix=OPTION --implicit-check-not="Cannot find option"

// OPTION: error: ampc-attach-loss: loss must be cross_entropy, bce_with_logits, mse, l1, smooth_l1, huber or none, got 'hinge'

func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @+1 {{ampc-attach-loss: loss=cross_entropy needs class scores of shape (N, C, ...) as the first output, got 'tensor<8xf32>'; use --loss=mse}}
  %y = ampc.relu %x : tensor<8xf32>
  return %y : tensor<8xf32>
}

// -----

func.func @forward(%x: tensor<4x3xi64>) -> tensor<4x3xi64> {
  // expected-error @+1 {{ampc-attach-loss: the first output of @forward must be float to attach a loss, got 'tensor<4x3xi64>'}}
  %y = ampc.neg %x : tensor<4x3xi64>
  return %y : tensor<4x3xi64>
}

// -----

// expected-error @+1 {{ampc-attach-loss: @forward already has an input named 'label'; choose the label's name with --label}}
func.func @forward(%x: tensor<4x3xf32> {ampc.name = "x"}, %l: tensor<4xf32> {ampc.name = "label"}) -> tensor<4x3xf32> {
  return %x : tensor<4x3xf32>
}

// -----

// expected-error @+1 {{ampc-attach-loss: the module has no @forward function}}
module {
}
