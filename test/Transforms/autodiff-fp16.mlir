// RUN: ampc-opt %s --ampc-assign-precision --ampc-autodiff --ampc-optimize-casts | FileCheck %s
// RUN: ampc-opt %s --ampc-assign-precision=dtype=bf16 --ampc-autodiff | FileCheck %s --check-prefix=BF16

// Where the casts land in the backward of a mixed-precision graph: autodiff
// runs after precision assignment, so each backward op runs in its forward
// op's dtype and the adjoint of every cast is the reverse cast. Under f16
// autocast the two MatMuls and the linear layer's bias add run in f16 and
// the Mul by the f32 scale in f32 (promote), as does the loss (deny):
//   - the loss adjoint is f32 and is cast down to f16 where the forward cast
//     the bias add's output up (the reverse of that cast);
//   - the backward GEMMs run in f16;
//   - each f16 use of the f32 weight w contributes an f16 adjoint that the
//     reverse of its autocast brings back to f32, and the two are added in
//     f32: the parameter gradient is accumulated in FP32;
//   - ampc-optimize-casts works on @train_step too: the forward's two casts
//     of w become one.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: -> (tensor<f32> {ampc.name = "loss"}, tensor<8x8xf32> {ampc.gradient_of = @w}, tensor<8xf32> {ampc.gradient_of = @b}, tensor<8xf32> {ampc.gradient_of = @scale})
// CHECK-NEXT: %[[W:.+]] = ampc.load_parameter @w : tensor<8x8xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.load_parameter @b : tensor<8xf32>
// CHECK-NEXT: %[[SCALE:.+]] = ampc.load_parameter @scale : tensor<8xf32>
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %{{.+}} {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x8xf32> to tensor<8x8xf16>
// CHECK-NEXT: %[[H:.+]] = ampc.matmul %[[XH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, {{.+}}>} : (tensor<2x8xf16>, tensor<8x8xf16>) -> tensor<2x8xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[H]]
// CHECK-NEXT: %[[O:.+]] = ampc.matmul %[[A]], %[[WH]]
// CHECK-NEXT: %[[BH:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<8xf32> to tensor<8xf16>
// CHECK-NEXT: %[[OB:.+]] = ampc.add %[[O]], %[[BH]]
// CHECK-NEXT: %[[OB32:.+]] = ampc.cast %[[OB]] {ampc.autocast} : tensor<2x8xf16> to tensor<2x8xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.mul %[[OB32]], %[[SCALE]] {ampc.precision = #ampc.precision<category = promote, compute = f32, {{.+}}>} : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[LOSS:.+]], %[[LOGP:.+]] = ampc.softmax_cross_entropy_loss %[[S]], %{{.+}} {ampc.precision = #ampc.precision<category = deny, compute = f32, {{.+}}>}
// The loss and the Mul's backward in f32.
// CHECK-NEXT: ampc.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT: %[[DS:.+]] = ampc.nll_loss_grad {{.+}} log_prob(%[[LOGP]]) {{.+}} -> tensor<2x8xf32>
// CHECK-NEXT: %[[DOB32:.+]] = ampc.mul %[[DS]], %[[SCALE]] : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[DSC:.+]] = ampc.mul %[[DS]], %[[OB32]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[DSCALE:.+]] = ampc.reduce_sum %[[DSC]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x8xf32>) -> tensor<8xf32>
// The reverse of the up-cast: the rest of the backward is f16.
// CHECK-NEXT: %[[DOB:.+]] = ampc.cast %[[DOB32]] {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xf16>
// CHECK-NEXT: %[[DBH:.+]] = ampc.reduce_sum %[[DOB]] {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<2x8xf16>) -> tensor<8xf16>
// CHECK-NEXT: %[[DB:.+]] = ampc.cast %[[DBH]] {ampc.autocast} : tensor<8xf16> to tensor<8xf32>
// CHECK-NEXT: %[[DA:.+]] = ampc.gemm %[[DOB]], %[[WH]] {transB = 1 : i64} : (tensor<2x8xf16>, tensor<8x8xf16>) -> tensor<2x8xf16>
// CHECK-NEXT: %[[DW2H:.+]] = ampc.gemm %[[A]], %[[DOB]] {transA = 1 : i64} : (tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<8x8xf16>
// CHECK-NEXT: %[[DW2:.+]] = ampc.cast %[[DW2H]] {ampc.autocast} : tensor<8x8xf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[DH:.+]] = ampc.relu_grad %[[DA]], %[[A]] : tensor<2x8xf16>
// CHECK-NEXT: %[[DW1H:.+]] = ampc.gemm %[[XH]], %[[DH]] {transA = 1 : i64} : (tensor<2x8xf16>, tensor<2x8xf16>) -> tensor<8x8xf16>
// CHECK-NEXT: %[[DW1:.+]] = ampc.cast %[[DW1H]] {ampc.autocast} : tensor<8x8xf16> to tensor<8x8xf32>
// CHECK-NEXT: %[[DW:.+]] = ampc.add %[[DW2]], %[[DW1]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: return %[[LOSS]], %[[DW]], %[[DB]], %[[DSCALE]]

// bf16 the same way; without ampc-optimize-casts each use of w has its own
// cast in the forward, and so its own reverse cast.
// BF16-LABEL: func.func @train_step
// BF16: %[[W:.+]] = ampc.load_parameter @w : tensor<8x8xf32>
// BF16: %[[WH1:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x8xf32> to tensor<8x8xbf16>
// BF16: %[[WH2:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x8xf32> to tensor<8x8xbf16>
// BF16: ampc.gemm %{{.+}}, %[[WH2]] {transB = 1 : i64} : (tensor<2x8xbf16>, tensor<8x8xbf16>) -> tensor<2x8xbf16>
// BF16-NEXT: %[[DW2H:.+]] = ampc.gemm {{.+}} {transA = 1 : i64} : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<8x8xbf16>
// BF16-NEXT: %[[DW2:.+]] = ampc.cast %[[DW2H]] {ampc.autocast} : tensor<8x8xbf16> to tensor<8x8xf32>
// BF16-NEXT: ampc.relu_grad {{.+}} : tensor<2x8xbf16>
// BF16-NEXT: %[[DW1H:.+]] = ampc.gemm {{.+}} {transA = 1 : i64} : (tensor<2x8xbf16>, tensor<2x8xbf16>) -> tensor<8x8xbf16>
// BF16-NEXT: %[[DW1:.+]] = ampc.cast %[[DW1H]] {ampc.autocast} : tensor<8x8xbf16> to tensor<8x8xf32>
// BF16-NEXT: %[[DW:.+]] = ampc.add %[[DW2]], %[[DW1]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// BF16-NEXT: return %{{.+}}, %[[DW]],
ampc.parameter @w : tensor<8x8xf32> = dense<0.5> : tensor<8x8xf32>
ampc.parameter @b : tensor<8xf32> = dense<0.0> : tensor<8xf32>
ampc.parameter @scale : tensor<8xf32> = dense<1.0> : tensor<8xf32>
func.func @forward(%x: tensor<2x8xf32>, %label: tensor<2xi64>) -> tensor<f32> {
  %w = ampc.load_parameter @w : tensor<8x8xf32>
  %b = ampc.load_parameter @b : tensor<8xf32>
  %scale = ampc.load_parameter @scale : tensor<8xf32>
  %h = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %a = ampc.relu %h : tensor<2x8xf32>
  %o = ampc.matmul %a, %w : (tensor<2x8xf32>, tensor<8x8xf32>) -> tensor<2x8xf32>
  %ob = ampc.add %o, %b : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %s = ampc.mul %ob, %scale : (tensor<2x8xf32>, tensor<8xf32>) -> tensor<2x8xf32>
  %loss, %logp = ampc.softmax_cross_entropy_loss %s, %label : (tensor<2x8xf32>, tensor<2xi64>) -> (tensor<f32>, tensor<2x8xf32>)
  return %loss : tensor<f32>
}
