// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues="backward=1 fp32-weight-gradients=1" | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues="fp32-weight-gradients=1" | FileCheck %s --check-prefix=CPU
// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues | FileCheck %s --check-prefix=FORWARD
// RUN: ampc-opt %s --split-input-file --ampc-fuse-epilogues=backward=1 | FileCheck %s --check-prefix=FP16

// A Linear's backward as autodiff writes it (issue 37, item 3): the
// weight gradient Xᵀ dY in FP16, cast to FP32 and transposed to the
// weight's [N, K], and the bias gradient a ReduceSum of dY over the rows
// cast to FP32 (both casts the compiler's). With `fp32-weight-gradients`
// (the pipeline, every target) the sum and the Gemm write FP32 (no 16-bit
// rounding, no cast) and the transpose swaps the Gemm's operands (dYᵀ X);
// with `backward` too (the CUDA target) the FP32 ReduceSum becomes the
// Gemm's bias gradient (op(A) = dYᵀ summed over k: bgrad_a) in D's FP32.
// CHECK-LABEL: func.func @linear_backward
// CHECK-DAG: %[[X:.+]] = ampc.reshape %arg0 : tensor<2x8x16xf16> to tensor<16x16xf16>
// CHECK-DAG: %[[DY:.+]] = ampc.reshape %arg1 : tensor<2x8x32xf16> to tensor<16x32xf16>
// CHECK: %[[W:.+]], %[[B:.+]] = ampc.gemm %[[DY]], %[[X]] {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<16x32xf16>, tensor<16x16xf16>) -> (tensor<32x16xf32>, tensor<32xf32>)
// CHECK-NOT: ampc.reduce_sum
// CHECK-NOT: ampc.cast
// CHECK-NOT: ampc.transpose
// CHECK: return %[[W]], %[[B]]
// The CPU target: the same FP32 results, the sum a ReduceSum of its own.
// CPU-LABEL: func.func @linear_backward
// CPU: %[[B:.+]] = ampc.reduce_sum %arg1 {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf16>) -> tensor<32xf32>
// CPU: %[[W:.+]] = ampc.gemm %{{.+}}, %{{.+}} {transA = 1 : i64} : (tensor<16x32xf16>, tensor<16x16xf16>) -> tensor<32x16xf32>
// CPU-NOT: ampc.cast
// CPU-NOT: ampc.transpose
// CPU: return %[[W]], %[[B]]
// Without either option the ops stay.
// FORWARD-LABEL: func.func @linear_backward
// FORWARD: ampc.reduce_sum {{.*}} -> tensor<32xf16>
// FORWARD: ampc.gemm {{.*}} -> tensor<16x32xf16>
// FORWARD: ampc.cast
// FORWARD: ampc.transpose
// FP16 weight gradients (as the pipeline ran before FP32 ones): the
// transpose still swaps the operands, the cast follows the Gemm, the bias
// gradient is FP16 like D and its cast to FP32 moves after the Gemm.
// FP16-LABEL: func.func @linear_backward
// FP16-NOT: ampc.reduce_sum
// FP16: %[[W:.+]], %[[B:.+]] = ampc.gemm %{{.+}}, %{{.+}} {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<16x32xf16>, tensor<16x16xf16>) -> (tensor<32x16xf16>, tensor<32xf16>)
// FP16-NEXT: %[[DB:.+]] = ampc.cast %[[B]] {ampc.autocast} : tensor<32xf16> to tensor<32xf32>
// FP16-NEXT: %[[DW:.+]] = ampc.cast %[[W]] {ampc.autocast} : tensor<32x16xf16> to tensor<32x16xf32>
// FP16-NOT: ampc.transpose
// FP16: return %[[DW]], %[[DB]]
func.func @linear_backward(%x: tensor<2x8x16xf16>, %dy: tensor<2x8x32xf16>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf16>) -> tensor<32xf16>
  %db = ampc.cast %s {ampc.autocast} : tensor<32xf16> to tensor<32xf32>
  %x2 = ampc.reshape %x : tensor<2x8x16xf16> to tensor<16x16xf16>
  %dy2 = ampc.reshape %dy : tensor<2x8x32xf16> to tensor<16x32xf16>
  %g = ampc.gemm %x2, %dy2 {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x32xf16>) -> tensor<16x32xf16>
  %w = ampc.cast %g {ampc.autocast} : tensor<16x32xf16> to tensor<16x32xf32>
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  return %t, %db : tensor<32x16xf32>, tensor<32xf32>
}

// -----

// A padded Linear's gradients (ampc-pad-gemms): the Gemm's and the sum's
// padded rows sliced back to the weight's before the cast. The cast moves
// before the slice (exact) and folds into the Gemm and the sum, which
// write FP32; on the CUDA target the sum is the Gemm's bias gradient.
// CHECK-LABEL: func.func @padded
// CHECK: %[[W:.+]], %[[B:.+]] = ampc.gemm %arg1, %arg0 {epilogue = #ampc<epilogue bgrad_a>, transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x8xf16>) -> (tensor<16x8xf32>, tensor<16xf32>)
// CHECK-NOT: ampc.cast
// CHECK-DAG: %[[WS:.+]] = ampc.slice %[[W]] {{.*}} : (tensor<16x8xf32>) -> tensor<10x8xf32>
// CHECK-DAG: %[[BS:.+]] = ampc.slice %[[B]] {{.*}} : (tensor<16xf32>) -> tensor<10xf32>
// CHECK: return %[[WS]], %[[BS]]
// CPU-LABEL: func.func @padded
// CPU: %[[W:.+]] = ampc.gemm %arg1, %arg0 {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x8xf16>) -> tensor<16x8xf32>
// CPU: %[[B:.+]] = ampc.reduce_sum %arg1 {{.*}} : (tensor<16x16xf16>) -> tensor<16xf32>
// CPU-NOT: ampc.cast
// CPU-DAG: %[[WS:.+]] = ampc.slice %[[W]] {{.*}} : (tensor<16x8xf32>) -> tensor<10x8xf32>
// CPU-DAG: %[[BS:.+]] = ampc.slice %[[B]] {{.*}} : (tensor<16xf32>) -> tensor<10xf32>
// CPU: return %[[WS]], %[[BS]]
func.func @padded(%x: tensor<16x8xf16>, %dy: tensor<16x16xf16>) -> (tensor<10x8xf32>, tensor<10xf32>) {
  %g = ampc.gemm %dy, %x {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x8xf16>) -> tensor<16x8xf16>
  %s = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x16xf16>) -> tensor<16xf16>
  %sb = ampc.slice %s {axes = array<i64: 0>, ends = array<i64: 10>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16xf16>) -> tensor<10xf16>
  %sw = ampc.slice %g {axes = array<i64: 0>, ends = array<i64: 10>, starts = array<i64: 0>, steps = array<i64: 1>} : (tensor<16x8xf16>) -> tensor<10x8xf16>
  %db = ampc.cast %sb {ampc.autocast} : tensor<10xf16> to tensor<10xf32>
  %dw = ampc.cast %sw {ampc.autocast} : tensor<10x8xf16> to tensor<10x8xf32>
  return %dw, %db : tensor<10x8xf32>, tensor<10xf32>
}

// -----

// An input gradient (dY W, no contraction over the rows) keeps its 16-bit
// result: only weight gradients (op(A) = Aᵀ) are written in FP32.
// CHECK-LABEL: func.func @input_gradient
// CHECK: ampc.gemm {{.*}} -> tensor<16x8xf16>
// CHECK-NEXT: ampc.cast
// CPU-LABEL: func.func @input_gradient
// CPU: ampc.gemm {{.*}} -> tensor<16x8xf16>
// CPU-NEXT: ampc.cast
func.func @input_gradient(%dy: tensor<16x4xf16>, %w: tensor<4x8xf16>) -> tensor<16x8xf32> {
  %g = ampc.gemm %dy, %w : (tensor<16x4xf16>, tensor<4x8xf16>) -> tensor<16x8xf16>
  %c = ampc.cast %g {ampc.autocast} : tensor<16x8xf16> to tensor<16x8xf32>
  return %c : tensor<16x8xf32>
}

// -----

// The model's own Casts (not the compiler's): the rounding to FP16 is the
// model's, so nothing is widened, and an FP16 sum cast up is not the FP16
// Gemm's bias gradient either (no bgrad of another type than D's).
// CHECK-LABEL: func.func @users_casts
// CHECK: ampc.gemm {{.*}}epilogue = #ampc<epilogue bgrad_b>{{.*}} -> (tensor<16x32xf16>, tensor<32xf16>)
// CHECK-NEXT: ampc.cast {{.*}} to tensor<32xf32>
// CHECK-NEXT: ampc.cast {{.*}} to tensor<16x32xf32>
// CHECK-NEXT: ampc.transpose
// CPU-LABEL: func.func @users_casts
// CPU: ampc.reduce_sum {{.*}} -> tensor<32xf16>
// CPU-NEXT: ampc.cast {{.*}} to tensor<32xf32>
// CPU: ampc.gemm {{.*}} -> tensor<16x32xf16>
// CPU-NEXT: ampc.cast {{.*}} to tensor<16x32xf32>
// CPU-NEXT: ampc.transpose
func.func @users_casts(%x: tensor<2x8x16xf16>, %dy: tensor<2x8x32xf16>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf16>) -> tensor<32xf16>
  %db = ampc.cast %s : tensor<32xf16> to tensor<32xf32>
  %x2 = ampc.reshape %x : tensor<2x8x16xf16> to tensor<16x16xf16>
  %dy2 = ampc.reshape %dy : tensor<2x8x32xf16> to tensor<16x32xf16>
  %g = ampc.gemm %x2, %dy2 {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x32xf16>) -> tensor<16x32xf16>
  %w = ampc.cast %g : tensor<16x32xf16> to tensor<16x32xf32>
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  return %t, %db : tensor<32x16xf32>, tensor<32xf32>
}

// -----

// The compiler's FP32 Gemm beside the model's FP16 sum cast up: the
// widening cast is not the epilogue's one rounding, so no bias gradient.
// CHECK-LABEL: func.func @widening_cast_not_fused
// CHECK: ampc.reduce_sum {{.*}} -> tensor<32xf16>
// CHECK-NEXT: ampc.cast {{.*}} to tensor<32xf32>
// CHECK-NOT: bgrad
// CHECK: ampc.gemm {{.*}} -> tensor<32x16xf32>
func.func @widening_cast_not_fused(%x: tensor<2x8x16xf16>, %dy: tensor<2x8x32xf16>) -> (tensor<32x16xf32>, tensor<32xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0, 1>, keepdims = 0 : i64} : (tensor<2x8x32xf16>) -> tensor<32xf16>
  %db = ampc.cast %s : tensor<32xf16> to tensor<32xf32>
  %x2 = ampc.reshape %x : tensor<2x8x16xf16> to tensor<16x16xf16>
  %dy2 = ampc.reshape %dy : tensor<2x8x32xf16> to tensor<16x32xf16>
  %g = ampc.gemm %x2, %dy2 {transA = 1 : i64} : (tensor<16x16xf16>, tensor<16x32xf16>) -> tensor<16x32xf16>
  %w = ampc.cast %g {ampc.autocast} : tensor<16x32xf16> to tensor<16x32xf32>
  %t = ampc.transpose %w {perm = array<i64: 1, 0>} : (tensor<16x32xf32>) -> tensor<32x16xf32>
  return %t, %db : tensor<32x16xf32>, tensor<32xf32>
}

// -----

// The weight gradient kept as [K, N] (no transpose): dY is op(B), summed
// over k: bgrad_b; the sum already in the output's type (no cast).
// CHECK-LABEL: func.func @bgrad_b
// CHECK: %[[W:.+]], %[[B:.+]] = ampc.gemm %arg0, %arg1 {epilogue = #ampc<epilogue bgrad_b>, transA = 1 : i64} : (tensor<16x8xf32>, tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>)
// CHECK-NOT: ampc.reduce_sum
// CHECK: return %[[W]], %[[B]]
func.func @bgrad_b(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x4xf32>) -> tensor<4xf32>
  %g = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %g, %s : tensor<8x4xf32>, tensor<4xf32>
}

// -----

// Not fused: the sum is used before the Gemm (the Gemm would have to move
// up), alpha is not 1, the sum is over the other axis.
// CHECK-LABEL: func.func @used_before
// CHECK: ampc.reduce_sum
// CHECK-NOT: bgrad
func.func @used_before(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %s = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x4xf32>) -> tensor<4xf32>
  %n = ampc.neg %s : tensor<4xf32>
  %g = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %g, %n : tensor<8x4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @alpha
// CHECK: ampc.reduce_sum
// CHECK-NOT: bgrad
func.func @alpha(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<4xf32>) {
  %g = ampc.gemm %x, %dy {transA = 1 : i64, alpha = 2.0 : f32} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = ampc.reduce_sum %dy {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<16x4xf32>) -> tensor<4xf32>
  return %g, %s : tensor<8x4xf32>, tensor<4xf32>
}

// -----

// CHECK-LABEL: func.func @other_axis
// CHECK: ampc.reduce_sum
// CHECK-NOT: bgrad
func.func @other_axis(%x: tensor<16x8xf32>, %dy: tensor<16x4xf32>) -> (tensor<8x4xf32>, tensor<16xf32>) {
  %g = ampc.gemm %x, %dy {transA = 1 : i64} : (tensor<16x8xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %s = ampc.reduce_sum %dy {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<16x4xf32>) -> tensor<16xf32>
  return %g, %s : tensor<8x4xf32>, tensor<16xf32>
}
