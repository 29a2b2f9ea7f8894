// RUN: ampc-opt %s | ampc-opt | FileCheck %s
// RUN: ampc-opt %s --mlir-print-op-generic | ampc-opt | FileCheck %s

// Round trip of the dialect's attributes: the enums as `#ampc<NAME value>`,
// the precision decision as `#ampc.precision<...>`, and the discardable
// attributes the passes write, well formed (invalid-attributes.mlir has the
// malformed ones).

// CHECK: module attributes {ampc.hyperparameters = "lr=1e-3", ampc.loss_scaling = #ampc<loss_scaling static>, ampc.optimizer = #ampc<optimizer sgd>}
module attributes {ampc.hyperparameters = "lr=1e-3", ampc.loss_scaling = #ampc<loss_scaling static>, ampc.optimizer = #ampc<optimizer sgd>} {

// CHECK: ampc.parameter @w {ampc.frozen} : tensor<4x8xf32>
ampc.parameter @w {ampc.frozen} : tensor<4x8xf32> = dense<1.0> : tensor<4x8xf32>
// CHECK: ampc.parameter @mask {ampc.frozen = "--freeze mask"} : tensor<2xf32>
ampc.parameter @mask {ampc.frozen = "--freeze mask"} : tensor<2xf32> = dense<1.0> : tensor<2xf32>
// CHECK: ampc.state @bn.num_batches_tracked {ampc.buffer} : tensor<i64>
ampc.state @bn.num_batches_tracked {ampc.buffer} : tensor<i64> = dense<0> : tensor<i64>

// CHECK-LABEL: func.func @step
// CHECK-SAME: (%{{.+}}: tensor<4x8xf32> {ampc.name = "x"}, %{{.+}}: tensor<4xi64> {ampc.label, ampc.name = "y"})
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<4x8xf32> {ampc.gradient_of = @w})
// CHECK-SAME: attributes {ampc.arena_bytes = 256 : i64}
// CHECK-NEXT: ampc.constant dense<1.000000e+00> : tensor<f32> {ampc.loss_seed}
// CHECK-NEXT: ampc.cast %{{.+}} {ampc.autocast, ampc.offsets = array<i64: 0>} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: ampc.gelu %{{.+}} {ampc.offsets = array<i64: 64>, ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, approximate = #ampc<approximate tanh>} : tensor<4x8xf16>
// CHECK-NEXT: ampc.gelu %{{.+}} {ampc.offsets = array<i64: 128>} : tensor<4x8xf16>
// CHECK-NEXT: ampc.reshape %{{.+}} {ampc.offsets = array<i64: -1>} : tensor<4x8xf16> to tensor<32xf16>
func.func @step(%x: tensor<4x8xf32> {ampc.name = "x"}, %y: tensor<4xi64> {ampc.label, ampc.name = "y"}) -> (tensor<f32> {ampc.name = "loss"}, tensor<4x8xf32> {ampc.gradient_of = @w}) attributes {ampc.arena_bytes = 256 : i64} {
  %seed = ampc.constant dense<1.0> : tensor<f32> {ampc.loss_seed}
  %h = ampc.cast %x {ampc.autocast, ampc.offsets = array<i64: 0>} : tensor<4x8xf32> to tensor<4x8xf16>
  %g = ampc.gelu %h {ampc.offsets = array<i64: 64>, ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, approximate = #ampc<approximate tanh>} : tensor<4x8xf16>
  // The last bytes of the arena: 128 + 64 * 2 = 256.
  %e = ampc.gelu %g {ampc.offsets = array<i64: 128>, approximate = #ampc<approximate none>} : tensor<4x8xf16>
  %r = ampc.reshape %e {ampc.offsets = array<i64: -1>} : tensor<4x8xf16> to tensor<32xf16>
  return %seed, %x : tensor<f32>, tensor<4x8xf32>
}

}
