// RUN: ampc-opt %s --split-input-file --ampc-input-precision | FileCheck %s

// ampc-input-precision (--input-precision=auto; issue 37, item 2): an f32
// input whose every use, through views, is an autocast to one 16-bit type
// becomes an input of that type; the casts go. Every f32 input it looks at
// says what it takes and why (ampc.input_precision), which --report shows.
// The inputs are written by hand, so each rule is seen alone.

// A Linear's input under autocast: x arrives in f16, the GEMM reads it.
// The label never changes.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf16> {ampc.input_precision = "every use is an autocast to f16", ampc.name = "x"}, %{{.+}}: tensor<2xi64> {ampc.label, ampc.name = "label"})
// CHECK-SAME: -> tensor<2x3xf16>
// CHECK-NEXT: %[[W:.+]] = ampc.load_parameter @w
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast}
// CHECK-NEXT: %[[Y:.+]] = ampc.matmul %[[X]], %[[WH]] : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
// CHECK-NEXT: return %[[Y]]
module {
  ampc.parameter @w : tensor<4x3xf32> = dense<1.0> : tensor<4x3xf32>
  func.func @forward(%x: tensor<2x4xf32> {ampc.name = "x"}, %label: tensor<2xi64> {ampc.label, ampc.name = "label"}) -> tensor<2x3xf16> {
    %w = ampc.load_parameter @w : tensor<4x3xf32>
    %xh = ampc.cast %x {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xf16>
    %wh = ampc.cast %w {ampc.autocast} : tensor<4x3xf32> to tensor<4x3xf16>
    %y = ampc.matmul %xh, %wh : (tensor<2x4xf16>, tensor<4x3xf16>) -> tensor<2x3xf16>
    return %y : tensor<2x3xf16>
  }
}

// -----

// Through a view (Flatten before the Linear), and several casts to bf16:
// the view carries bf16, its decision too, and both casts go.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%[[X:.+]]: tensor<2x2x2xbf16> {ampc.input_precision = "every use is an autocast to bf16", ampc.name = "x"})
// CHECK-NEXT: %[[F:.+]] = ampc.flatten %[[X]] {ampc.precision = #ampc.precision<category = follow, compute = bf16, rule = "follows its input">} : (tensor<2x2x2xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[F]] : tensor<2x4xbf16>
// CHECK-NEXT: %[[B:.+]] = ampc.add %[[F]], %[[A]] : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: return %[[B]]
module {
  func.func @forward(%x: tensor<2x2x2xf32> {ampc.name = "x"}) -> tensor<2x4xbf16> {
    %f = ampc.flatten %x {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follows its input">, axis = 1 : i64} : (tensor<2x2x2xf32>) -> tensor<2x4xf32>
    %c1 = ampc.cast %f {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xbf16>
    %a = ampc.relu %c1 : tensor<2x4xbf16>
    %c2 = ampc.cast %f {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xbf16>
    %b = ampc.add %c2, %a : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
    return %b : tensor<2x4xbf16>
  }
}

// -----

// An input an op reads in f32 (a residual added in f32) stays f32, and
// says which node; so does one returned as an output, one read by the
// model's own Cast, one with no use, and one cast to f16 in one place and
// to bf16 in another. The casts stay.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.+}}: tensor<4xf32> {ampc.input_precision = "node 'residual' (Add) reads it in f32", ampc.name = "a"}
// CHECK-SAME: %{{.+}}: tensor<4xf32> {ampc.input_precision = "it is returned as an output", ampc.name = "b"}
// CHECK-SAME: %{{.+}}: tensor<4xf32> {ampc.input_precision = "node 'mine' (Cast), a cast of the model, reads it", ampc.name = "c"}
// CHECK-SAME: %{{.+}}: tensor<4xf32> {ampc.input_precision = "no op reads it", ampc.name = "d"}
// CHECK-SAME: %{{.+}}: tensor<4xf32> {ampc.input_precision = "it is cast to both {{bf16 and f16|f16 and bf16}}", ampc.name = "e"}
// CHECK-COUNT-3: ampc.cast %{{.+}} {ampc.autocast} : tensor<4xf32>
// CHECK-NOT: ampc.cast %{{.+}} {ampc.autocast} : tensor<4xf32>
module {
  func.func @forward(%a: tensor<4xf32> {ampc.name = "a"}, %b: tensor<4xf32> {ampc.name = "b"}, %c: tensor<4xf32> {ampc.name = "c"}, %d: tensor<4xf32> {ampc.name = "d"}, %e: tensor<4xf32> {ampc.name = "e"}) -> (tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>) {
    %ah = ampc.cast %a {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
    %r = ampc.relu %ah : tensor<4xf16>
    %rf = ampc.cast %r {ampc.autocast} : tensor<4xf16> to tensor<4xf32>
    %sum = ampc.add %rf, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> loc("residual"(fused<"Add">[unknown]))
    %ch = ampc.cast %c : tensor<4xf32> to tensor<4xf16> loc("mine"(fused<"Cast">[unknown]))
    %eh = ampc.cast %e {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
    %eb = ampc.cast %e {ampc.autocast} : tensor<4xf32> to tensor<4xbf16>
    return %sum, %ch, %b, %eh, %eb : tensor<4xf32>, tensor<4xf16>, tensor<4xf32>, tensor<4xf16>, tensor<4xbf16>
  }
}

// -----

// One type per input in @forward and @train_step (the library's
// descriptor has one signature per input): x, cast to f16 in both, is f16
// in both; y, cast in @forward but read in f32 by @train_step, stays f32
// in both, and @train_step is named in the reason.
// CHECK-LABEL: func.func @forward
// CHECK-SAME: (%{{.+}}: tensor<4xf16> {ampc.input_precision = "every use is an autocast to f16", ampc.name = "x"}, %{{.+}}: tensor<4xf32> {ampc.input_precision = "ampc.exp reads it in f32 in @train_step", ampc.name = "y"})
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.+]]: tensor<4xf16> {ampc.input_precision = "every use is an autocast to f16", ampc.name = "x"}, %[[Y:.+]]: tensor<4xf32> {ampc.input_precision = "ampc.exp reads it in f32 in @train_step", ampc.name = "y"})
// CHECK-NEXT: ampc.relu %[[X]] : tensor<4xf16>
// CHECK-NEXT: ampc.exp %[[Y]] : tensor<4xf32>
module {
  func.func @forward(%x: tensor<4xf32> {ampc.name = "x"}, %y: tensor<4xf32> {ampc.name = "y"}) -> (tensor<4xf16>, tensor<4xf16>) {
    %xh = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
    %a = ampc.relu %xh : tensor<4xf16>
    %yh = ampc.cast %y {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
    return %a, %yh : tensor<4xf16>, tensor<4xf16>
  }
  func.func @train_step(%x: tensor<4xf32> {ampc.name = "x"}, %y: tensor<4xf32> {ampc.name = "y"}) -> (tensor<4xf16>, tensor<4xf32>) {
    %xh = ampc.cast %x {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
    %a = ampc.relu %xh : tensor<4xf16>
    %b = ampc.exp %y : tensor<4xf32>
    return %a, %b : tensor<4xf16>, tensor<4xf32>
  }
}
