// RUN: ampc-opt %s --split-input-file --ampc-assign-precision | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=dtype=bf16 | FileCheck %s --check-prefix=BF16
// RUN: ampc-opt %s --split-input-file --ampc-assign-precision=dtype=f32 | FileCheck %s --check-prefix=F32

// ampc-assign-precision in autocast mode (the default): every op with a
// precision category and float data operands gets a compute dtype from its
// category (AMPCOps.td), an `ampc.autocast` cast on each data operand whose
// element type differs (one per use: ampc-optimize-casts shares them later),
// result types re-derived, and an `ampc.precision` attribute saying why.
// The expected IR is worked out from the PyTorch autocast rules, not copied
// from the output. CHECK is dtype=f16 (the default); BF16 and F32 repeat
// representative cases with the other low-precision dtypes.

// Allow: matmul runs in f16. Both operands are cast, the result is f16, and
// the function result is cast back because the signature stays f32.
// CHECK-LABEL: func.func @allow_matmul
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xf32> to tensor<8x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[XH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">} : (tensor<2x8xf16>, tensor<8x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x4xf32>

// BF16-LABEL: func.func @allow_matmul
// BF16-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>) -> tensor<2x4xf32>
// BF16-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xbf16>
// BF16-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xf32> to tensor<8x4xbf16>
// BF16-NEXT: %[[M:.+]] = ampc.matmul %[[XH]], %[[WH]] {ampc.precision = #ampc.precision<category = allow, compute = bf16, rule = "allow list">} : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// BF16-NEXT: %[[R:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xbf16> to tensor<2x4xf32>
// BF16-NEXT: return %[[R]] : tensor<2x4xf32>

// dtype=f32 lowers nothing: no casts at all, the decision still recorded.
// F32-LABEL: func.func @allow_matmul
// F32-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>) -> tensor<2x4xf32>
// F32-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "allow list">} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// F32-NEXT: return %[[M]] : tensor<2x4xf32>
func.func @allow_matmul(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  return %m : tensor<2x4xf32>
}

// -----

// Allow: Gemm casts all three operands, the bias C included.
// CHECK-LABEL: func.func @allow_gemm_bias
// CHECK-SAME: (%[[A:.+]]: tensor<4x8xf32>, %[[B:.+]]: tensor<16x8xf32>, %[[C:.+]]: tensor<16xf32>)
// CHECK-NEXT: %[[AH:.+]] = ampc.cast %[[A]] {ampc.autocast} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: %[[BH:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<16x8xf32> to tensor<16x8xf16>
// CHECK-NEXT: %[[CH:.+]] = ampc.cast %[[C]] {ampc.autocast} : tensor<16xf32> to tensor<16xf16>
// CHECK-NEXT: %[[Y:.+]] = ampc.gemm %[[AH]], %[[BH]], %[[CH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">, transB = 1 : i64} : (tensor<4x8xf16>, tensor<16x8xf16>, tensor<16xf16>) -> tensor<4x16xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<4x16xf16> to tensor<4x16xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x16xf32>

// BF16-LABEL: func.func @allow_gemm_bias
// BF16: ampc.cast %{{.+}} {ampc.autocast} : tensor<4x8xf32> to tensor<4x8xbf16>
// BF16-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<16x8xf32> to tensor<16x8xbf16>
// BF16-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<16xf32> to tensor<16xbf16>
// BF16-NEXT: %[[Y:.+]] = ampc.gemm {{.+}} {ampc.precision = #ampc.precision<category = allow, compute = bf16, rule = "allow list">, transB = 1 : i64} : (tensor<4x8xbf16>, tensor<16x8xbf16>, tensor<16xbf16>) -> tensor<4x16xbf16>
// BF16-NEXT: %[[R:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<4x16xbf16> to tensor<4x16xf32>
// BF16-NEXT: return %[[R]]
func.func @allow_gemm_bias(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>, %c: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = ampc.gemm %a, %b, %c {transB = 1 : i64} : (tensor<4x8xf32>, tensor<16x8xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  return %y : tensor<4x16xf32>
}

// -----

// Allow: Conv with its bias.
// CHECK-LABEL: func.func @allow_conv
// CHECK-SAME: (%[[X:.+]]: tensor<1x3x8x8xf32>, %[[W:.+]]: tensor<16x3x3x3xf32>, %[[B:.+]]: tensor<16xf32>)
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<1x3x8x8xf32> to tensor<1x3x8x8xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<16x3x3x3xf32> to tensor<16x3x3x3xf16>
// CHECK-NEXT: %[[BH:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<16xf32> to tensor<16xf16>
// CHECK-NEXT: %[[Y:.+]] = ampc.conv %[[XH]], %[[WH]], %[[BH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list">, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf16>, tensor<16x3x3x3xf16>, tensor<16xf16>) -> tensor<1x16x4x4xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<1x16x4x4xf16> to tensor<1x16x4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<1x16x4x4xf32>
func.func @allow_conv(%x: tensor<1x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %b: tensor<16xf32>) -> tensor<1x16x4x4xf32> {
  %y = ampc.conv %x, %w, %b {pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x3x8x8xf32>, tensor<16x3x3x3xf32>, tensor<16xf32>) -> tensor<1x16x4x4xf32>
  return %y : tensor<1x16x4x4xf32>
}

// -----

// Deny: exp, log, pow and reciprocal of f16 values run in f32; the f16
// function result is cast back to f16.
// CHECK-LABEL: func.func @deny_elementwise
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[X1:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[X1]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<2x4xf32>
// CHECK-NEXT: %[[X2:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[L:.+]] = ampc.log %[[X2]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<2x4xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.pow %[[E]], %[[L]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[Q:.+]] = ampc.reciprocal %[[P]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<2x4xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[Q]] {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xf16>
// CHECK-NEXT: return %[[R]] : tensor<2x4xf16>

// Under bf16 the rules are the same: deny means f32.
// BF16-LABEL: func.func @deny_elementwise
// BF16-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// BF16-NEXT: ampc.exp %{{.+}} {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<2x4xf32>

// F32-LABEL: func.func @deny_elementwise
// F32-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// F32-NEXT: ampc.exp %{{.+}} {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : tensor<2x4xf32>
func.func @deny_elementwise(%x: tensor<2x4xf16>) -> tensor<2x4xf16> {
  %e = ampc.exp %x : tensor<2x4xf16>
  %l = ampc.log %x : tensor<2x4xf16>
  %p = ampc.pow %e, %l : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x4xf16>
  %q = ampc.reciprocal %p : tensor<2x4xf16>
  return %q : tensor<2x4xf16>
}

// -----

// Deny: LayerNormalization casts every float operand that is not f32 (here
// the input and the bias; the scale already is f32). All three results are
// f32; only the returned one is cast back.
// CHECK-LABEL: func.func @deny_layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<2x16x64xf16>, %[[G:.+]]: tensor<64xf32>, %[[B:.+]]: tensor<64xf16>)
// CHECK-NEXT: %[[X32:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x16x64xf16> to tensor<2x16x64xf32>
// CHECK-NEXT: %[[B32:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<64xf16> to tensor<64xf32>
// CHECK-NEXT: %[[Y:.+]], %{{.+}}, %{{.+}} = ampc.layer_normalization %[[X32]], %[[G]], %[[B32]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : (tensor<2x16x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<2x16x64xf32>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<2x16x64xf32> to tensor<2x16x64xf16>
// CHECK-NEXT: return %[[R]] : tensor<2x16x64xf16>
func.func @deny_layer_norm(%x: tensor<2x16x64xf16>, %g: tensor<64xf32>, %b: tensor<64xf16>) -> tensor<2x16x64xf16> {
  %y, %mean, %rstd = ampc.layer_normalization %x, %g, %b {axis = -1 : i64, epsilon = 1.0e-05 : f32} : (tensor<2x16x64xf16>, tensor<64xf32>, tensor<64xf16>) -> (tensor<2x16x64xf16>, tensor<2x16x1xf32>, tensor<2x16x1xf32>)
  return %y : tensor<2x16x64xf16>
}

// -----

// Deny: the losses cast their float operands to f32; the integer labels are
// left alone.
// CHECK-LABEL: func.func @deny_losses
// CHECK-SAME: (%[[S:.+]]: tensor<4x10xf16>, %[[L:.+]]: tensor<4xi64>, %[[W:.+]]: tensor<10xf16>)
// CHECK-NEXT: %[[S32:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<4x10xf16> to tensor<4x10xf32>
// CHECK-NEXT: %[[W32:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<10xf16> to tensor<10xf32>
// CHECK-NEXT: %[[LOSS:.+]], %[[LOGP:.+]] = ampc.softmax_cross_entropy_loss %[[S32]], %[[L]], %[[W32]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">} : (tensor<4x10xf32>, tensor<4xi64>, tensor<10xf32>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: %[[NLL:.+]] = ampc.negative_log_likelihood_loss %[[LOGP]], %[[L]] {ampc.precision = #ampc.precision<category = deny, compute = f32, rule = "deny list">, reduction = #ampc<reduction sum>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
// CHECK-NEXT: %[[R1:.+]] = ampc.cast %[[LOSS]] {ampc.autocast} : tensor<f32> to tensor<f16>
// CHECK-NEXT: %[[R2:.+]] = ampc.cast %[[NLL]] {ampc.autocast} : tensor<f32> to tensor<f16>
// CHECK-NEXT: return %[[R1]], %[[R2]] : tensor<f16>, tensor<f16>
func.func @deny_losses(%s: tensor<4x10xf16>, %l: tensor<4xi64>, %w: tensor<10xf16>) -> (tensor<f16>, tensor<f16>) {
  %loss, %logp = ampc.softmax_cross_entropy_loss %s, %l, %w : (tensor<4x10xf16>, tensor<4xi64>, tensor<10xf16>) -> (tensor<f16>, tensor<4x10xf16>)
  %nll = ampc.negative_log_likelihood_loss %logp, %l {reduction = #ampc<reduction sum>} : (tensor<4x10xf16>, tensor<4xi64>) -> tensor<f16>
  return %loss, %nll : tensor<f16>, tensor<f16>
}

// -----

// Fp32Output: softmax, log_softmax and reduce_sum of an f16 input compute
// and return f32 (here cast back because the function returns f16).
// CHECK-LABEL: func.func @fp32_output
// CHECK-SAME: (%[[X:.+]]: tensor<4x10xf16>) -> (tensor<4x10xf16>, tensor<4x10xf16>, tensor<4xf16>)
// CHECK-NEXT: %[[C1:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x10xf16> to tensor<4x10xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.softmax %[[C1]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">} : tensor<4x10xf32>
// CHECK-NEXT: %[[C2:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x10xf16> to tensor<4x10xf32>
// CHECK-NEXT: %[[L:.+]] = ampc.log_softmax %[[C2]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">} : tensor<4x10xf32>
// CHECK-NEXT: %[[C3:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x10xf16> to tensor<4x10xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.reduce_sum %[[C3]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">, axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x10xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[S16:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<4x10xf32> to tensor<4x10xf16>
// CHECK-NEXT: %[[L16:.+]] = ampc.cast %[[L]] {ampc.autocast} : tensor<4x10xf32> to tensor<4x10xf16>
// CHECK-NEXT: %[[R16:.+]] = ampc.cast %[[R]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: return %[[S16]], %[[L16]], %[[R16]] : tensor<4x10xf16>, tensor<4x10xf16>, tensor<4xf16>

// BF16-LABEL: func.func @fp32_output
// BF16-NEXT: ampc.cast %{{.+}} {ampc.autocast} : tensor<4x10xf16> to tensor<4x10xf32>
// BF16-NEXT: ampc.softmax %{{.+}} {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">} : tensor<4x10xf32>
func.func @fp32_output(%x: tensor<4x10xf16>) -> (tensor<4x10xf16>, tensor<4x10xf16>, tensor<4xf16>) {
  %s = ampc.softmax %x : tensor<4x10xf16>
  %l = ampc.log_softmax %x : tensor<4x10xf16>
  %r = ampc.reduce_sum %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x10xf16>) -> tensor<4xf16>
  return %s, %l, %r : tensor<4x10xf16>, tensor<4x10xf16>, tensor<4xf16>
}

// -----

// Promote: an f16 matmul result meets an f32 activation, so add, where,
// concat and equal all run in f32 and cast the f16 operand up (one cast per
// use). The i1 condition of where is not a data operand. Equal's result stays
// i1.
// CHECK-LABEL: func.func @promote_mixed
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[R:.+]]: tensor<2x4xf32>, %[[C:.+]]: tensor<2x4xi1>)
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xf16>
// CHECK-NEXT: ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xf32> to tensor<8x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[M1:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[M1]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[M2:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[WH:.+]] = ampc.where %[[C]], %[[M2]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[M3:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[CC:.+]] = ampc.concat %[[R]], %[[M3]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">, axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[M4:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[EQ:.+]] = ampc.equal %[[M4]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
// CHECK-NEXT: return %[[A]], %[[WH]], %[[CC]], %[[EQ]] : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xi1>

// BF16-LABEL: func.func @promote_mixed
// BF16: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xbf16>
// BF16-NEXT: %[[M1:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xbf16> to tensor<2x4xf32>
// BF16-NEXT: ampc.add %[[M1]], %{{.+}} {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>

// F32-LABEL: func.func @promote_mixed
// F32-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[R:.+]]: tensor<2x4xf32>, %[[C:.+]]: tensor<2x4xi1>)
// F32-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {{.+}} -> tensor<2x4xf32>
// F32-NEXT: ampc.add %[[M]], %[[R]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// F32-NOT: ampc.cast
// F32: return
func.func @promote_mixed(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %r: tensor<2x4xf32>, %c: tensor<2x4xi1>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xi1>) {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %a = ampc.add %m, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %wh = ampc.where %c, %m, %r : (tensor<2x4xi1>, tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %cc = ampc.concat %r, %m {axis = 0 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<4x4xf32>
  %e = ampc.equal %m, %r : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xi1>
  return %a, %wh, %cc, %e : tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x4xf32>, tensor<2x4xi1>
}

// -----

// Promote: two f16 inputs stay f16 (no cast between the matmuls and sub).
// CHECK-LABEL: func.func @promote_same
// CHECK: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK: %[[N:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[S:.+]] = ampc.sub %[[M]], %[[N]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "promote list: widest input is f16">} : (tensor<2x4xf16>, tensor<2x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: return %[[R]]

// BF16-LABEL: func.func @promote_same
// BF16: ampc.sub %{{.+}}, %{{.+}} {ampc.precision = #ampc.precision<category = promote, compute = bf16, rule = "promote list: widest input is bf16">} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
func.func @promote_same(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %v: tensor<8x4xf32>) -> tensor<2x4xf32> {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %n = ampc.matmul %x, %v : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %s = ampc.sub %m, %n : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  return %s : tensor<2x4xf32>
}

// -----

// Promote: f16 with bf16 gives f32 (PyTorch type promotion). The bf16
// matmul inputs become f16, so mul sees f16 and bf16 and casts both to f32.
// CHECK-LABEL: func.func @promote_f16_bf16
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xbf16>, %[[W:.+]]: tensor<8x4xbf16>, %[[B:.+]]: tensor<2x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xbf16> to tensor<2x8xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xbf16> to tensor<8x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[XH]], %[[WH]] {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[M32:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[B32:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<2x4xbf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[P:.+]] = ampc.mul %[[M32]], %[[B32]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[P]] {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xbf16>
// CHECK-NEXT: return %[[R]] : tensor<2x4xbf16>

// Under dtype=bf16 the matmul takes its bf16 inputs as they are and mul
// stays bf16: no cast anywhere.
// BF16-LABEL: func.func @promote_f16_bf16
// BF16-SAME: (%[[X:.+]]: tensor<2x8xbf16>, %[[W:.+]]: tensor<8x4xbf16>, %[[B:.+]]: tensor<2x4xbf16>) -> tensor<2x4xbf16>
// BF16-NEXT: %[[M:.+]] = ampc.matmul %[[X]], %[[W]] {ampc.precision = #ampc.precision<category = allow, compute = bf16, rule = "allow list">} : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// BF16-NEXT: %[[P:.+]] = ampc.mul %[[M]], %[[B]] {ampc.precision = #ampc.precision<category = promote, compute = bf16, rule = "promote list: widest input is bf16">} : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
// BF16-NEXT: return %[[P]] : tensor<2x4xbf16>

// Under dtype=f32 the bf16 inputs of the matmul go up to f32.
// F32-LABEL: func.func @promote_f16_bf16
// F32-SAME: (%[[X:.+]]: tensor<2x8xbf16>, %[[W:.+]]: tensor<8x4xbf16>, %[[B:.+]]: tensor<2x4xbf16>) -> tensor<2x4xbf16>
// F32-NEXT: %[[X32:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xbf16> to tensor<2x8xf32>
// F32-NEXT: %[[W32:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xbf16> to tensor<8x4xf32>
// F32-NEXT: %[[M:.+]] = ampc.matmul %[[X32]], %[[W32]] {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "allow list">} : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
// F32-NEXT: %[[B32:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<2x4xbf16> to tensor<2x4xf32>
// F32-NEXT: %[[P:.+]] = ampc.mul %[[M]], %[[B32]] {{.+}} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
// F32-NEXT: %[[R:.+]] = ampc.cast %[[P]] {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xbf16>
// F32-NEXT: return %[[R]] : tensor<2x4xbf16>
func.func @promote_f16_bf16(%x: tensor<2x8xbf16>, %w: tensor<8x4xbf16>, %b: tensor<2x4xbf16>) -> tensor<2x4xbf16> {
  %m = ampc.matmul %x, %w : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
  %p = ampc.mul %m, %b : (tensor<2x4xbf16>, tensor<2x4xbf16>) -> tensor<2x4xbf16>
  return %p : tensor<2x4xbf16>
}

// -----

// Promote with a zero-dimensional operand: the f32 scalar does not widen the
// f16 matrix, so div runs in f16 and the scalar is cast down. Between two
// zero-dimensional operands the widest wins as usual (f16 dot with f32
// scalar: f32).
// CHECK-LABEL: func.func @promote_scalar
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[S:.+]]: tensor<f32>, %[[V:.+]]: tensor<8xf32>)
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast}
// CHECK-NEXT: ampc.cast %[[W]] {ampc.autocast}
// CHECK-NEXT: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[SH:.+]] = ampc.cast %[[S]] {ampc.autocast} : tensor<f32> to tensor<f16>
// CHECK-NEXT: %[[Y:.+]] = ampc.div %[[M]], %[[SH]] {ampc.precision = #ampc.precision<category = promote, compute = f16, rule = "promote list: widest input is f16">} : (tensor<2x4xf16>, tensor<f16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[V1:.+]] = ampc.cast %[[V]] {ampc.autocast} : tensor<8xf32> to tensor<8xf16>
// CHECK-NEXT: %[[V2:.+]] = ampc.cast %[[V]] {ampc.autocast} : tensor<8xf32> to tensor<8xf16>
// CHECK-NEXT: %[[D:.+]] = ampc.matmul %[[V1]], %[[V2]] {{.+}} : (tensor<8xf16>, tensor<8xf16>) -> tensor<f16>
// CHECK-NEXT: %[[D32:.+]] = ampc.cast %[[D]] {ampc.autocast} : tensor<f16> to tensor<f32>
// CHECK-NEXT: %[[Z:.+]] = ampc.add %[[D32]], %[[S]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK-NEXT: %[[YR:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: return %[[YR]], %[[Z]] : tensor<2x4xf32>, tensor<f32>

// BF16-LABEL: func.func @promote_scalar
// BF16: %[[SH:.+]] = ampc.cast %{{.+}} {ampc.autocast} : tensor<f32> to tensor<bf16>
// BF16-NEXT: ampc.div %{{.+}}, %[[SH]] {ampc.precision = #ampc.precision<category = promote, compute = bf16, rule = "promote list: widest input is bf16">} : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
func.func @promote_scalar(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %s: tensor<f32>, %v: tensor<8xf32>) -> (tensor<2x4xf32>, tensor<f32>) {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %y = ampc.div %m, %s : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %d = ampc.matmul %v, %v : (tensor<8xf32>, tensor<8xf32>) -> tensor<f32>
  %z = ampc.add %d, %s : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %y, %z : tensor<2x4xf32>, tensor<f32>
}

// -----

// Follow after an allow op: relu, reshape (result type written out),
// transpose and dropout take the f16 of the matmul with no cast; the
// dropout mask stays i1.
// CHECK-LABEL: func.func @follow_after_allow
// CHECK: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.relu %[[M]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">} : tensor<2x4xf16>
// CHECK-NEXT: %[[B:.+]] = ampc.reshape %[[A]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">} : tensor<2x4xf16> to tensor<8xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.unsqueeze %[[B]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, axes = array<i64: 0>} : (tensor<8xf16>) -> tensor<1x8xf16>
// CHECK-NEXT: %[[D:.+]], %[[MASK:.+]] = ampc.dropout %[[C]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, ratio = 1.000000e-01 : f32, training_mode = 1 : i64} : (tensor<1x8xf16>) -> (tensor<1x8xf16>, tensor<1x8xi1>)
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[D]] {ampc.autocast} : tensor<1x8xf16> to tensor<1x8xf32>
// CHECK-NEXT: return %[[R]], %[[MASK]] : tensor<1x8xf32>, tensor<1x8xi1>

// BF16-LABEL: func.func @follow_after_allow
// BF16: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xbf16>
// BF16-NEXT: ampc.relu %[[M]] {ampc.precision = #ampc.precision<category = follow, compute = bf16, rule = "follow list: input is bf16">} : tensor<2x4xbf16>
// BF16-NEXT: ampc.reshape %{{.+}} : tensor<2x4xbf16> to tensor<8xbf16>
func.func @follow_after_allow(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>) -> (tensor<1x8xf32>, tensor<1x8xi1>) {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %a = ampc.relu %m : tensor<2x4xf32>
  %b = ampc.reshape %a : tensor<2x4xf32> to tensor<8xf32>
  %c = ampc.unsqueeze %b {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<1x8xf32>
  %d, %mask = ampc.dropout %c {ratio = 1.000000e-01 : f32, training_mode = 1 : i64} : (tensor<1x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xi1>)
  return %d, %mask : tensor<1x8xf32>, tensor<1x8xi1>
}

// -----

// Follow after an f32 value: nothing to cast, the op stays f32.
// CHECK-LABEL: func.func @follow_after_f32
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[A:.+]] = ampc.tanh %[[X]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<2x4xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.exp %[[A]] {{.+}} : tensor<2x4xf32>
// CHECK-NEXT: %[[C:.+]] = ampc.sigmoid %[[B]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>

// BF16-LABEL: func.func @follow_after_f32
// BF16-NEXT: ampc.tanh %{{.+}} {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<2x4xf32>
func.func @follow_after_f32(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %a = ampc.tanh %x : tensor<2x4xf32>
  %b = ampc.exp %a : tensor<2x4xf32>
  %c = ampc.sigmoid %b : tensor<2x4xf32>
  return %c : tensor<2x4xf32>
}

// -----

// Follow after a deny op that received f16: the follow op runs in the deny
// op's f32 output.
// CHECK-LABEL: func.func @follow_after_deny
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[C]] {{.+}} : tensor<2x4xf32>
// CHECK-NEXT: %[[N:.+]] = ampc.neg %[[E]] {ampc.precision = #ampc.precision<category = follow, compute = f32, rule = "follow list: input is f32">} : tensor<2x4xf32>
// CHECK-NEXT: %[[R:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<2x4xf32> to tensor<2x4xf16>
// CHECK-NEXT: return %[[R]] : tensor<2x4xf16>
func.func @follow_after_deny(%x: tensor<2x4xf16>) -> tensor<2x4xf16> {
  %e = ampc.exp %x : tensor<2x4xf16>
  %n = ampc.neg %e : tensor<2x4xf16>
  return %n : tensor<2x4xf16>
}

// -----

// Integer and boolean tensors and f64 tensors are never touched: no cast,
// no ampc.precision, even on ops that have a category.
// CHECK-LABEL: func.func @untouched
// CHECK-SAME: (%[[I:.+]]: tensor<4xi64>, %[[B:.+]]: tensor<4xi1>, %[[D:.+]]: tensor<4x4xf64>, %[[J:.+]]: tensor<4xi32>)
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[I]], %[[I]] : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: %[[W:.+]] = ampc.where %[[B]], %[[A]], %[[I]] : (tensor<4xi1>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
// CHECK-NEXT: %[[E:.+]] = ampc.equal %[[B]], %[[B]] : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
// CHECK-NEXT: %[[R:.+]] = ampc.relu %[[J]] : tensor<4xi32>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[D]], %[[D]] : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
// CHECK-NEXT: %[[X:.+]] = ampc.exp %[[M]] : tensor<4x4xf64>
// CHECK-NEXT: %[[S:.+]] = ampc.softmax %[[X]] : tensor<4x4xf64>
// CHECK-NEXT: return %[[W]], %[[E]], %[[R]], %[[S]]

// F32-LABEL: func.func @untouched
// F32-NOT: ampc.cast
// F32-NOT: ampc.precision
// F32: return
func.func @untouched(%i: tensor<4xi64>, %b: tensor<4xi1>, %d: tensor<4x4xf64>, %j: tensor<4xi32>) -> (tensor<4xi64>, tensor<4xi1>, tensor<4xi32>, tensor<4x4xf64>) {
  %a = ampc.add %i, %i : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %w = ampc.where %b, %a, %i : (tensor<4xi1>, tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
  %e = ampc.equal %b, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  %r = ampc.relu %j : tensor<4xi32>
  %m = ampc.matmul %d, %d : (tensor<4x4xf64>, tensor<4x4xf64>) -> tensor<4x4xf64>
  %x = ampc.exp %m : tensor<4x4xf64>
  %s = ampc.softmax %x : tensor<4x4xf64>
  return %w, %e, %r, %s : tensor<4xi64>, tensor<4xi1>, tensor<4xi32>, tensor<4x4xf64>
}

// -----

// Gather: only the float table is a data operand; the i64 indices stay.
// CHECK-LABEL: func.func @gather_indices
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[W:.+]]: tensor<8x4xf32>, %[[IDS:.+]]: tensor<3xi64>)
// CHECK: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[G:.+]] = ampc.gather %[[M]], %[[IDS]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, axis = 1 : i64} : (tensor<2x4xf16>, tensor<3xi64>) -> tensor<2x3xf16>
func.func @gather_indices(%x: tensor<2x8xf32>, %w: tensor<8x4xf32>, %ids: tensor<3xi64>) -> tensor<2x3xf32> {
  %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %g = ampc.gather %m, %ids {axis = 1 : i64} : (tensor<2x4xf32>, tensor<3xi64>) -> tensor<2x3xf32>
  return %g : tensor<2x3xf32>
}

// -----

// A user's own cast (no ampc.autocast) is kept, and its f16 result is
// treated like any other f16 value: softmax casts it back up with a cast of
// its own. The second user cast keeps its f16 result type although its
// operand (the softmax) now is f32; no autocast is added next to it.
// CHECK-LABEL: func.func @user_cast
// CHECK-SAME: (%[[X:.+]]: tensor<2x4xf32>)
// CHECK-NEXT: %[[U:.+]] = ampc.cast %[[X]] : tensor<2x4xf32> to tensor<2x4xf16>
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[U]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[S:.+]] = ampc.softmax %[[C]] {ampc.precision = #ampc.precision<category = fp32_output, compute = f32, rule = "fp32_output list">} : tensor<2x4xf32>
// CHECK-NEXT: %[[V:.+]] = ampc.cast %[[S]] : tensor<2x4xf32> to tensor<2x4xf16>
// CHECK-NEXT: return %[[V]] : tensor<2x4xf16>
func.func @user_cast(%x: tensor<2x4xf32>) -> tensor<2x4xf16> {
  %u = ampc.cast %x : tensor<2x4xf32> to tensor<2x4xf16>
  %s = ampc.softmax %u : tensor<2x4xf16>
  %v = ampc.cast %s : tensor<2x4xf16> to tensor<2x4xf16>
  return %v : tensor<2x4xf16>
}

// -----

// BatchNormalization follows its data input (f16 after the conv); scale,
// bias, mean and variance stay f32 and uncast, and so do the running
// statistics it returns.
// CHECK-LABEL: func.func @batch_norm_stats
// CHECK-SAME: (%[[X:.+]]: tensor<2x3x8x8xf32>, %[[W:.+]]: tensor<16x3x3x3xf32>, %[[S:.+]]: tensor<16xf32>, %[[B:.+]]: tensor<16xf32>, %[[M:.+]]: tensor<16xf32>, %[[V:.+]]: tensor<16xf32>)
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast}
// CHECK-NEXT: ampc.cast %[[W]] {ampc.autocast}
// CHECK-NEXT: %[[C:.+]] = ampc.conv {{.+}} -> tensor<2x16x8x8xf16>
// CHECK-NEXT: %[[Y:.+]], %[[RM:.+]], %[[RV:.+]] = ampc.batch_normalization %[[C]], %[[S]], %[[B]], %[[M]], %[[V]] {ampc.precision = #ampc.precision<category = follow, compute = f16, rule = "follow list: input is f16">, training_mode = 1 : i64} : (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf16>, tensor<16xf32>, tensor<16xf32>)
// CHECK-NEXT: %[[YR:.+]] = ampc.cast %[[Y]] {ampc.autocast} : tensor<2x16x8x8xf16> to tensor<2x16x8x8xf32>
// CHECK-NEXT: return %[[YR]], %[[RM]], %[[RV]] : tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>

// BF16-LABEL: func.func @batch_norm_stats
// BF16: ampc.batch_normalization {{.+}} : (tensor<2x16x8x8xbf16>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xbf16>, tensor<16xf32>, tensor<16xf32>)
func.func @batch_norm_stats(%x: tensor<2x3x8x8xf32>, %w: tensor<16x3x3x3xf32>, %s: tensor<16xf32>, %b: tensor<16xf32>, %m: tensor<16xf32>, %v: tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>) {
  %c = ampc.conv %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<2x3x8x8xf32>, tensor<16x3x3x3xf32>) -> tensor<2x16x8x8xf32>
  %y, %rm, %rv = ampc.batch_normalization %c, %s, %b, %m, %v {epsilon = 1.0e-05 : f32, momentum = 0.9 : f32, training_mode = 1 : i64} : (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<16xf32>) -> (tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>)
  return %y, %rm, %rv : tensor<2x16x8x8xf32>, tensor<16xf32>, tensor<16xf32>
}

// -----

// The bias add of a linear layer, Add(MatMul(x, W), b) with W and b
// parameters and b of rank 1, belongs to the allow op: it runs in f16 and
// the bias is cast down. The operand order of the add does not matter.
// CHECK-LABEL: func.func @linear_bias_add
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>)
// CHECK-NEXT: %[[W:.+]] = ampc.load_parameter @w : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.load_parameter @b : tensor<4xf32>
// CHECK-NEXT: %[[XH:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<2x8xf32> to tensor<2x8xf16>
// CHECK-NEXT: %[[WH:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<8x4xf32> to tensor<8x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[XH]], %[[WH]] {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[BH:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[M]], %[[BH]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list (bias add of a linear layer)">} : (tensor<2x4xf16>, tensor<4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[BH2:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<4xf32> to tensor<4xf16>
// CHECK-NEXT: %[[A2:.+]] = ampc.add %[[BH2]], %[[M]] {ampc.precision = #ampc.precision<category = allow, compute = f16, rule = "allow list (bias add of a linear layer)">} : (tensor<4xf16>, tensor<2x4xf16>) -> tensor<2x4xf16>
// CHECK-NEXT: %[[R1:.+]] = ampc.cast %[[A]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[R2:.+]] = ampc.cast %[[A2]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: return %[[R1]], %[[R2]]

// BF16-LABEL: func.func @linear_bias_add
// BF16: ampc.add %{{.+}}, %{{.+}} {ampc.precision = #ampc.precision<category = allow, compute = bf16, rule = "allow list (bias add of a linear layer)">} : (tensor<2x4xbf16>, tensor<4xbf16>) -> tensor<2x4xbf16>

// F32-LABEL: func.func @linear_bias_add
// F32: ampc.add %{{.+}}, %{{.+}} {ampc.precision = #ampc.precision<category = allow, compute = f32, rule = "allow list (bias add of a linear layer)">} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
module {
  ampc.parameter @w : tensor<8x4xf32> = dense<1.0> : tensor<8x4xf32>
  ampc.parameter @b : tensor<4xf32> = dense<1.0> : tensor<4xf32>
  func.func @linear_bias_add(%x: tensor<2x8xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = ampc.load_parameter @w : tensor<8x4xf32>
    %b = ampc.load_parameter @b : tensor<4xf32>
    %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %a = ampc.add %m, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %a2 = ampc.add %b, %m : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    return %a, %a2 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// Adds of a parameter that are not a linear layer's bias add promote as
// usual: a rank-2 "bias", a bias that is a function argument, a matmul whose
// weight is an activation, and a non-matmul producer.
// CHECK-LABEL: func.func @not_linear_bias_add
// CHECK-SAME: (%[[X:.+]]: tensor<2x8xf32>, %[[ARG_B:.+]]: tensor<4xf32>, %[[ARG_W:.+]]: tensor<8x4xf32>)
// CHECK-NEXT: %[[W:.+]] = ampc.load_parameter @w : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.+]] = ampc.load_parameter @b : tensor<4xf32>
// CHECK-NEXT: %[[B2:.+]] = ampc.load_parameter @b2 : tensor<1x4xf32>
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast}
// CHECK-NEXT: ampc.cast %[[W]] {ampc.autocast}
// CHECK-NEXT: %[[M:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[M1:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[A1:.+]] = ampc.add %[[M1]], %[[B2]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[M2:.+]] = ampc.cast %[[M]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[A2:.+]] = ampc.add %[[M2]], %[[ARG_B]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: ampc.cast %[[X]] {ampc.autocast}
// CHECK-NEXT: ampc.cast %[[ARG_W]] {ampc.autocast}
// CHECK-NEXT: %[[N:.+]] = ampc.matmul {{.+}} -> tensor<2x4xf16>
// CHECK-NEXT: %[[N1:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[A3:.+]] = ampc.add %[[N1]], %[[B]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[RL:.+]] = ampc.relu %[[M]] {{.+}} : tensor<2x4xf16>
// CHECK-NEXT: %[[RL1:.+]] = ampc.cast %[[RL]] {ampc.autocast} : tensor<2x4xf16> to tensor<2x4xf32>
// CHECK-NEXT: %[[A4:.+]] = ampc.add %[[RL1]], %[[B]] {ampc.precision = #ampc.precision<category = promote, compute = f32, rule = "promote list: widest input is f32">} : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A1]], %[[A2]], %[[A3]], %[[A4]]
module {
  ampc.parameter @w : tensor<8x4xf32> = dense<1.0> : tensor<8x4xf32>
  ampc.parameter @b : tensor<4xf32> = dense<1.0> : tensor<4xf32>
  ampc.parameter @b2 : tensor<1x4xf32> = dense<1.0> : tensor<1x4xf32>
  func.func @not_linear_bias_add(%x: tensor<2x8xf32>, %arg_b: tensor<4xf32>, %arg_w: tensor<8x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
    %w = ampc.load_parameter @w : tensor<8x4xf32>
    %b = ampc.load_parameter @b : tensor<4xf32>
    %b2 = ampc.load_parameter @b2 : tensor<1x4xf32>
    %m = ampc.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %a1 = ampc.add %m, %b2 : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
    %a2 = ampc.add %m, %arg_b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %n = ampc.matmul %x, %arg_w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
    %a3 = ampc.add %n, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    %r = ampc.relu %m : tensor<2x4xf32>
    %a4 = ampc.add %r, %b : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    return %a1, %a2, %a3, %a4 : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// A value used by two ops gets one cast per use at this stage (three casts
// of %x, none shared).
// CHECK-LABEL: func.func @cast_per_use
// CHECK-SAME: (%[[X:.+]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[X1:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[X2:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[M:.+]] = ampc.matmul %[[X1]], %[[X2]] {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[X3:.+]] = ampc.cast %[[X]] {ampc.autocast} : tensor<4x4xf32> to tensor<4x4xf16>
// CHECK-NEXT: %[[N:.+]] = ampc.matmul %[[M]], %[[X3]] {{.+}} -> tensor<4x4xf16>
// CHECK-NEXT: %[[N32:.+]] = ampc.cast %[[N]] {ampc.autocast} : tensor<4x4xf16> to tensor<4x4xf32>
// CHECK-NEXT: return %[[N32]] : tensor<4x4xf32>
func.func @cast_per_use(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = ampc.matmul %x, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %n = ampc.matmul %m, %x : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %n : tensor<4x4xf32>
}
