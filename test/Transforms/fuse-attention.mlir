// RUN: ampc-opt %s --split-input-file --ampc-fuse-attention | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fuse-attention="target=cuda" | FileCheck %s --check-prefix=CUDA
// RUN: ampc-opt %s --split-input-file --ampc-fuse-attention="target=cuda low-precision=false" | FileCheck %s --check-prefix=CUDA-FP32
// RUN: ampc-opt %s --split-input-file --ampc-fuse-attention="training=true" | FileCheck %s --check-prefix=TRAIN

// The GPT block's attention as torch exports it: heads split by Reshape
// and Transpose (Kᵀ by a second Transpose), a Mul by 1/sqrt(d), an Add
// of a constant strictly-upper -inf triangle, Softmax, MatMul, the
// Transpose that merges the heads. One ampc.attention reads the Reshapes'
// [B, S, H, D] views through perms; no Transpose is left.
// ampc.attention_saves (the report's bytes): the score-sized results the
// fusion removes, MatMul, Mul, Add and Softmax, 2x2x5x5 FP32 each: 4 x 400
// bytes; a training step also loses one gradient of each: 3200.
// TRAIN-LABEL: func.func @gpt
// TRAIN:         ampc.attention {{.*}}{ampc.attention_saves = 3200 : i64,
// CHECK-LABEL: func.func @gpt
// CHECK:         %[[Q:.*]] = ampc.reshape %arg0
// CHECK:         %[[K:.*]] = ampc.reshape %arg1
// CHECK:         %[[V:.*]] = ampc.reshape %arg2
// CHECK-NOT:     ampc.transpose
// CHECK-NOT:     ampc.softmax
// CHECK:         %{{.*}}, %{{.*}} = ampc.attention %[[Q]], %[[K]], %[[V]] {ampc.attention_saves = 1600 : i64, causal = true, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 5.000000e-01 : f32, v_perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>, tensor<2x5x2x4xf32>) -> (tensor<2x5x2x4xf32>, tensor<2x2x5xf32>)
// CHECK-NOT:     ampc.transpose
// CHECK-NOT:     ampc.matmul
// The CUDA target's kernels (CudaAttention.cuh) take head dimensions 16 to
// 128 and FP16/BF16 data: this head dimension of 4 stays unfused there, and
// so does any attention of a library computing in FP32, each with its reason.
// CUDA-LABEL: func.func @gpt
// CUDA:         ampc.softmax %{{.*}} {ampc.attention_unfused = "the CUDA target's attention kernels take head dimensions 16 to 128, a multiple of 16, the same for Q/K and V; got 4 and 4"}
// CUDA-FP32-LABEL: func.func @gpt
// CUDA-FP32:    ampc.softmax %{{.*}} {ampc.attention_unfused = "the CUDA target's attention kernels take FP16/BF16, and this library computes in FP32"}
// CUDA-NOT:     ampc.attention %
func.func @gpt(%q: tensor<2x5x8xf32>, %k: tensor<2x5x8xf32>, %v: tensor<2x5x8xf32>) -> tensor<2x5x8xf32> {
  %mask = ampc.constant dense<[[0.0, 0xFF800000, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<5x5xf32>
  %half = ampc.constant dense<0.5> : tensor<f32>
  %q4 = ampc.reshape %q : tensor<2x5x8xf32> to tensor<2x5x2x4xf32>
  %k4 = ampc.reshape %k : tensor<2x5x8xf32> to tensor<2x5x2x4xf32>
  %v4 = ampc.reshape %v : tensor<2x5x8xf32> to tensor<2x5x2x4xf32>
  %qh = ampc.transpose %q4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x4xf32>) -> tensor<2x2x5x4xf32>
  %kh = ampc.transpose %k4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x4xf32>) -> tensor<2x2x5x4xf32>
  %vh = ampc.transpose %v4 {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x5x2x4xf32>) -> tensor<2x2x5x4xf32>
  %kt = ampc.transpose %kh {perm = array<i64: 0, 1, 3, 2>} : (tensor<2x2x5x4xf32>) -> tensor<2x2x4x5xf32>
  %s0 = ampc.matmul %qh, %kt : (tensor<2x2x5x4xf32>, tensor<2x2x4x5xf32>) -> tensor<2x2x5x5xf32>
  %s1 = ampc.mul %s0, %half : (tensor<2x2x5x5xf32>, tensor<f32>) -> tensor<2x2x5x5xf32>
  %s2 = ampc.add %s1, %mask : (tensor<2x2x5x5xf32>, tensor<5x5xf32>) -> tensor<2x2x5x5xf32>
  %p = ampc.softmax %s2 {axis = -1 : i64} : tensor<2x2x5x5xf32> loc("s")
  %c = ampc.matmul %p, %vh : (tensor<2x2x5x5xf32>, tensor<2x2x5x4xf32>) -> tensor<2x2x5x4xf32>
  %ct = ampc.transpose %c {perm = array<i64: 0, 2, 1, 3>} : (tensor<2x2x5x4xf32>) -> tensor<2x5x2x4xf32>
  %y = ampc.reshape %ct : tensor<2x5x2x4xf32> to tensor<2x5x8xf32>
  return %y : tensor<2x5x8xf32>
}

// -----

// nn.MultiheadAttention's rank-3 form: [B·H, S, D] heads, Q divided by
// sqrt(d), Where(mask, -inf) with a constant condition that is not a
// triangle: a unit batch dimension by Reshape views, the condition as an
// additive 0/-inf bias.
// CHECK-LABEL: func.func @mha
// CHECK:         %[[M:.*]] = ampc.constant dense<{{\[\[}}0.000000e+00, 0xFF800000, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0xFF800000], [0xFF800000, 0.000000e+00, 0.000000e+00]]> : tensor<3x3xf32>
// CHECK:         ampc.reshape %{{.*}} : tensor<3x4x2xf32> to tensor<1x3x4x2xf32>
// CHECK:         %[[O:.*]], %{{.*}} = ampc.attention %{{.*}}, %{{.*}}, %{{.*}}, %[[M]] {ampc.attention_merged_heads, ampc.attention_saves = 432 : i64, k_perm = array<i64: 0, 2, 1, 3>, o_perm = array<i64: 0, 2, 1, 3>, q_perm = array<i64: 0, 2, 1, 3>, scale = 0.707106769 : f32, v_perm = array<i64: 0, 2, 1, 3>}
// CHECK:         ampc.reshape %[[O]] : tensor<1x3x4x2xf32> to tensor<3x4x2xf32>
// CHECK-NOT:     ampc.softmax
func.func @mha(%q: tensor<3x4x2xf32>, %k: tensor<3x4x2xf32>, %v: tensor<3x4x2xf32>) -> tensor<3x4x2xf32> {
  %keep = ampc.constant dense<[[false, true, false], [false, false, true], [true, false, false]]> : tensor<3x3xi1>
  %ninf = ampc.constant dense<0xFF800000> : tensor<f32>
  %root = ampc.constant dense<1.41421354> : tensor<f32>
  %qh = ampc.transpose %q {perm = array<i64: 1, 0, 2>} : (tensor<3x4x2xf32>) -> tensor<4x3x2xf32>
  %qd = ampc.div %qh, %root : (tensor<4x3x2xf32>, tensor<f32>) -> tensor<4x3x2xf32>
  %kt = ampc.transpose %k {perm = array<i64: 1, 2, 0>} : (tensor<3x4x2xf32>) -> tensor<4x2x3xf32>
  %vh = ampc.transpose %v {perm = array<i64: 1, 0, 2>} : (tensor<3x4x2xf32>) -> tensor<4x3x2xf32>
  %s = ampc.matmul %qd, %kt : (tensor<4x3x2xf32>, tensor<4x2x3xf32>) -> tensor<4x3x3xf32>
  %m = ampc.where %keep, %ninf, %s : (tensor<3x3xi1>, tensor<f32>, tensor<4x3x3xf32>) -> tensor<4x3x3xf32>
  %p = ampc.softmax %m {axis = -1 : i64} : tensor<4x3x3xf32>
  %c = ampc.matmul %p, %vh : (tensor<4x3x3xf32>, tensor<4x3x2xf32>) -> tensor<4x3x2xf32>
  %ct = ampc.transpose %c {perm = array<i64: 1, 0, 2>} : (tensor<4x3x2xf32>) -> tensor<3x4x2xf32>
  return %ct : tensor<3x4x2xf32>
}

// -----

// Near-miss: the scores are also returned, so they must exist: the
// Softmax records the node that broke the pattern.
// CHECK-LABEL: func.func @scores_read_twice
// CHECK:         ampc.softmax %{{.*}} {ampc.attention_unfused = "qk (matmul) has another reader"
// CHECK-NOT:     ampc.attention %
func.func @scores_read_twice(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> (tensor<1x2x3x4xf32>, tensor<1x2x3x3xf32>) {
  %s = ampc.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32> loc("qk")
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %c = ampc.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %c, %s : tensor<1x2x3x4xf32>, tensor<1x2x3x3xf32>
}

// -----

// Near-miss: a scale that is not a constant.
// CHECK-LABEL: func.func @scale_not_constant
// CHECK:         ampc.softmax %{{.*}} {ampc.attention_unfused = "scale (mul) scales by a value that is not a constant scalar"
func.func @scale_not_constant(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>, %t: tensor<f32>) -> tensor<1x2x3x4xf32> {
  %s = ampc.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %x = ampc.mul %s, %t : (tensor<1x2x3x3xf32>, tensor<f32>) -> tensor<1x2x3x3xf32> loc("scale")
  %p = ampc.softmax %x {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %c = ampc.matmul %p, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %c : tensor<1x2x3x4xf32>
}

// -----

// masked_fill(~causal, -inf) (test/Models' GPT block): Where(Not(c), -inf,
// scores) with a constant lower-triangle c: causal.
// CHECK-LABEL: func.func @masked_fill
// CHECK:         ampc.attention %{{.*}}, %{{.*}}, %{{.*}} {ampc.attention_saves = 108 : i64, causal = true, k_perm = array<i64: 0, 1, 3, 2>, scale = 1.000000e+00 : f32}
// CHECK-NOT:     ampc.where
func.func @masked_fill(%q: tensor<1x1x3x4xf32>, %kt: tensor<1x1x4x3xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %c = ampc.constant dense<[[true, false, false], [true, true, false], [true, true, true]]> : tensor<3x3xi1>
  %ninf = ampc.constant dense<0xFF800000> : tensor<f32>
  %s = ampc.matmul %q, %kt : (tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x3x3xf32>
  %n = ampc.not %c : tensor<3x3xi1>
  %m = ampc.where %n, %ninf, %s : (tensor<3x3xi1>, tensor<f32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  %p = ampc.softmax %m {axis = -1 : i64} : tensor<1x1x3x3xf32>
  %o = ampc.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

// -----

// torch's scaled_dot_product_attention export (torch 2.x's ONNX symbolic):
// Q and Kᵀ each multiplied by Sqrt(scale), the scale computed from
// constants as 1 / Sqrt(E) (the importer folds E from the shape but not the
// float arithmetic): the scale is evaluated, 1/2 for E = 4.
// CHECK-LABEL: func.func @sdpa_scale
// CHECK:         ampc.attention %arg0, %arg1, %arg2 {ampc.attention_saves = 72 : i64, scale = 5.000000e-01 : f32}
// CHECK-NOT:     ampc.mul
// CHECK-NOT:     ampc.softmax
func.func @sdpa_scale(%q: tensor<1x1x3x4xf32>, %k: tensor<1x1x3x4xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %e = ampc.constant dense<4.000000e+00> : tensor<1xf32>
  %one = ampc.constant dense<1.000000e+00> : tensor<1xf32>
  %root = ampc.sqrt %e : tensor<1xf32>
  %scale = ampc.div %one, %root : (tensor<1xf32>, tensor<1xf32>) -> tensor<1xf32>
  %r1 = ampc.sqrt %scale : tensor<1xf32>
  %r2 = ampc.sqrt %scale : tensor<1xf32>
  %kt = ampc.transpose %k {perm = array<i64: 0, 1, 3, 2>} : (tensor<1x1x3x4xf32>) -> tensor<1x1x4x3xf32>
  %qs = ampc.mul %q, %r1 : (tensor<1x1x3x4xf32>, tensor<1xf32>) -> tensor<1x1x3x4xf32>
  %ks = ampc.mul %kt, %r2 : (tensor<1x1x4x3xf32>, tensor<1xf32>) -> tensor<1x1x4x3xf32>
  %s = ampc.matmul %qs, %ks : (tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x3x3xf32>
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x1x3x3xf32>
  %o = ampc.matmul %p, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %o : tensor<1x1x3x4xf32>
}

// -----

// nn.TransformerEncoderLayer with a causal src_mask (a frozen buffer): its
// MultiheadAttention unsqueezes the [S, S] mask to [1, S, S] before the
// Add: the triangle is seen through the Unsqueeze, so causal, no bias.
// CHECK-LABEL: func.func @unsqueezed_mask
// CHECK:         ampc.attention %{{.*}}, %{{.*}}, %{{.*}} {ampc.attention_merged_heads, ampc.attention_saves = 216 : i64, causal = true,
// CHECK-NOT:     ampc.add
module {
  ampc.parameter @mask {ampc.frozen} : tensor<3x3xf32> = dense<[[0.0, 0xFF800000, 0xFF800000], [0.0, 0.0, 0xFF800000], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  func.func @unsqueezed_mask(%q: tensor<2x3x4xf32>, %kt: tensor<2x4x3xf32>, %v: tensor<2x3x4xf32>) -> tensor<2x3x4xf32> {
    %m = ampc.load_parameter @mask : tensor<3x3xf32>
    %m3 = ampc.unsqueeze %m {axes = array<i64: 0>} : (tensor<3x3xf32>) -> tensor<1x3x3xf32>
    %s = ampc.matmul %q, %kt : (tensor<2x3x4xf32>, tensor<2x4x3xf32>) -> tensor<2x3x3xf32>
    %a = ampc.add %s, %m3 : (tensor<2x3x3xf32>, tensor<1x3x3xf32>) -> tensor<2x3x3xf32>
    %p = ampc.softmax %a {axis = -1 : i64} : tensor<2x3x3xf32>
    %o = ampc.matmul %p, %v : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
    return %o : tensor<2x3x4xf32>
  }
}

// -----

// The causal mask as torch's scaled_dot_product_attention export computes
// it at long sequences, where the importer leaves Trilu unfolded (its
// [S, S] constants are too large to build): column index - row index <= 0
// selects 1 or 0 (Trilu), Equal(.., 0) picks -inf or 0. Evaluated element
// by element (at 4096, 16M of them): the causal flag, and nothing of the
// mask is read. A computed mask that is not the triangle (the diagonal
// hidden too) stays an additive bias.
// CHECK-LABEL: func.func @computed_causal
// CHECK:         ampc.attention %arg0, %arg1, %arg2 {ampc.attention_saves = 192 : i64, causal = true, k_perm = array<i64: 0, 1, 3, 2>, scale = 1.000000e+00 : f32}
// CHECK-LABEL: func.func @computed_not_causal
// CHECK:         %[[M:.*]] = ampc.where
// CHECK:         ampc.attention %arg0, %arg1, %arg2, %[[M]] {
// CHECK-NOT:     causal
func.func @computed_causal(%q: tensor<1x1x4x4xf32>, %kt: tensor<1x1x4x4xf32>, %v: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %cols = ampc.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %rows = ampc.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %zero_i = ampc.constant dense<0> : tensor<i64>
  %ones = ampc.constant dense<1.0> : tensor<4x4xf32>
  %zero = ampc.constant dense<0.0> : tensor<f32>
  %zero1 = ampc.constant dense<0.0> : tensor<1xf32>
  %ninf = ampc.constant dense<0xFF800000> : tensor<1xf32>
  %d = ampc.sub %cols, %rows : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi64>
  %keep = ampc.less_or_equal %d, %zero_i : (tensor<4x4xi64>, tensor<i64>) -> tensor<4x4xi1>
  %tril = ampc.where %keep, %ones, %zero : (tensor<4x4xi1>, tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %hidden = ampc.equal %tril, %zero1 : (tensor<4x4xf32>, tensor<1xf32>) -> tensor<4x4xi1>
  %mask = ampc.where %hidden, %ninf, %zero1 : (tensor<4x4xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x4xf32>
  %s = ampc.matmul %q, %kt : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %a = ampc.add %s, %mask : (tensor<1x1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %p = ampc.softmax %a {axis = -1 : i64} : tensor<1x1x4x4xf32>
  %o = ampc.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %o : tensor<1x1x4x4xf32>
}

func.func @computed_not_causal(%q: tensor<1x1x4x4xf32>, %kt: tensor<1x1x4x4xf32>, %v: tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32> {
  %cols = ampc.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %rows = ampc.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %zero_i = ampc.constant dense<0> : tensor<i64>
  %zero1 = ampc.constant dense<0.0> : tensor<1xf32>
  %ninf = ampc.constant dense<0xFF800000> : tensor<1xf32>
  %d = ampc.sub %cols, %rows : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi64>
  %hide = ampc.greater_or_equal %d, %zero_i : (tensor<4x4xi64>, tensor<i64>) -> tensor<4x4xi1>
  %mask = ampc.where %hide, %ninf, %zero1 : (tensor<4x4xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x4xf32>
  %s = ampc.matmul %q, %kt : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %a = ampc.add %s, %mask : (tensor<1x1x4x4xf32>, tensor<4x4xf32>) -> tensor<1x1x4x4xf32>
  %p = ampc.softmax %a {axis = -1 : i64} : tensor<1x1x4x4xf32>
  %o = ampc.matmul %p, %v : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  return %o : tensor<1x1x4x4xf32>
}

// -----

// A computed mask cast into FP16 is not evaluated (a Cast into fewer than
// 32 bits may round, or turn -1e9 into -inf): it stays the bias.
// CHECK-LABEL: func.func @computed_cast_f16
// CHECK:         %[[M:.*]] = ampc.cast
// CHECK:         ampc.attention %arg0, %arg1, %arg2, %[[M]] {
// CHECK-NOT:     causal
func.func @computed_cast_f16(%q: tensor<1x1x4x4xf16>, %kt: tensor<1x1x4x4xf16>, %v: tensor<1x1x4x4xf16>) -> tensor<1x1x4x4xf16> {
  %cols = ampc.constant dense<[[0, 1, 2, 3]]> : tensor<1x4xi64>
  %rows = ampc.constant dense<[[0], [1], [2], [3]]> : tensor<4x1xi64>
  %zero_i = ampc.constant dense<0> : tensor<i64>
  %zero1 = ampc.constant dense<0.0> : tensor<1xf32>
  %ninf = ampc.constant dense<0xFF800000> : tensor<1xf32>
  %d = ampc.sub %cols, %rows : (tensor<1x4xi64>, tensor<4x1xi64>) -> tensor<4x4xi64>
  %hide = ampc.greater %d, %zero_i : (tensor<4x4xi64>, tensor<i64>) -> tensor<4x4xi1>
  %mask32 = ampc.where %hide, %ninf, %zero1 : (tensor<4x4xi1>, tensor<1xf32>, tensor<1xf32>) -> tensor<4x4xf32>
  %mask = ampc.cast %mask32 : tensor<4x4xf32> to tensor<4x4xf16>
  %s = ampc.matmul %q, %kt : (tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>) -> tensor<1x1x4x4xf16>
  %a = ampc.add %s, %mask : (tensor<1x1x4x4xf16>, tensor<4x4xf16>) -> tensor<1x1x4x4xf16>
  %p = ampc.softmax %a {axis = -1 : i64} : tensor<1x1x4x4xf16>
  %o = ampc.matmul %p, %v : (tensor<1x1x4x4xf16>, tensor<1x1x4x4xf16>) -> tensor<1x1x4x4xf16>
  return %o : tensor<1x1x4x4xf16>
}

// -----

// Dropout on the probabilities (nn.TransformerEncoderLayer, a GPT block
// with attention dropout, in training mode): fused, the op draws the
// Dropout's mask (its ratio and seed; the seed is the Dropout's `seed`, or
// else its node's hash, DropoutOp::maskSeed) and the Dropout goes. Its
// output and mask count in the bytes: 3 x 18 x 4 (MatMul, Softmax,
// Dropout) + 18 mask bytes.
// CHECK-LABEL: func.func @dropout
// CHECK:         ampc.attention %arg0, %arg1, %arg2 {ampc.attention_saves = 234 : i64, dropout_ratio = 1.000000e-01 : f32, dropout_seed = 42 : i64, k_perm = array<i64: 0, 1, 3, 2>, scale = 1.000000e+00 : f32}
// CHECK-NOT:     ampc.dropout
// In eval mode (or at ratio 0) the Dropout is the identity: today's op.
// CHECK-LABEL: func.func @dropout_eval
// CHECK:         ampc.attention %arg0, %arg1, %arg2 {ampc.attention_saves = 234 : i64, k_perm = array<i64: 0, 1, 3, 2>, scale = 1.000000e+00 : f32}
// CHECK-NOT:     ampc.dropout
func.func @dropout(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = ampc.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %d, %mask = ampc.dropout %p {ratio = 0.1 : f32, seed = 42 : i64, training_mode = 1 : i64} : (tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xi1>)
  %c = ampc.matmul %d, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %c : tensor<1x2x3x4xf32>
}

func.func @dropout_eval(%q: tensor<1x2x3x4xf32>, %kt: tensor<1x2x4x3xf32>, %v: tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %s = ampc.matmul %q, %kt : (tensor<1x2x3x4xf32>, tensor<1x2x4x3xf32>) -> tensor<1x2x3x3xf32>
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x2x3x3xf32>
  %d, %mask = ampc.dropout %p {ratio = 0.1 : f32, seed = 42 : i64} : (tensor<1x2x3x3xf32>) -> (tensor<1x2x3x3xf32>, tensor<1x2x3x3xi1>)
  %c = ampc.matmul %d, %v : (tensor<1x2x3x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  return %c : tensor<1x2x3x4xf32>
}

// -----

// The seed of a Dropout without `seed` is the hash of its node (FNV-1a of
// "node 'drop' (Dropout)"): the unfused Dropout's masks, carried over.
// CHECK-LABEL: func.func @dropout_named
// CHECK:         ampc.attention {{.*}}dropout_ratio = 2.500000e-01 : f32, dropout_seed = -4470642520336130036 : i64
func.func @dropout_named(%q: tensor<1x1x3x4xf32>, %kt: tensor<1x1x4x3xf32>, %v: tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32> {
  %s = ampc.matmul %q, %kt : (tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x3x3xf32>
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x1x3x3xf32>
  %d, %mask = ampc.dropout %p {ratio = 0.25 : f32, training_mode = 1 : i64} : (tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, tensor<1x1x3x3xi1>) loc(#drop)
  %c = ampc.matmul %d, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %c : tensor<1x1x3x4xf32>
}
#drop = loc("drop"(fused<"Dropout">["model.onnx"]))

// -----

// Near-miss: the Dropout's mask is read (here returned), and the fused op
// writes no mask: the graph stays, with the reason.
// CHECK-LABEL: func.func @dropout_mask_read
// CHECK:         ampc.softmax %{{.*}} {ampc.attention_unfused = "drop (dropout) is dropout whose mask is read (the fused attention does not write the mask)"}
// CHECK:         ampc.dropout
func.func @dropout_mask_read(%q: tensor<1x1x3x4xf32>, %kt: tensor<1x1x4x3xf32>, %v: tensor<1x1x3x4xf32>) -> (tensor<1x1x3x4xf32>, tensor<1x1x3x3xi1>) {
  %s = ampc.matmul %q, %kt : (tensor<1x1x3x4xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x3x3xf32>
  %p = ampc.softmax %s {axis = -1 : i64} : tensor<1x1x3x3xf32>
  %d, %mask = ampc.dropout %p {ratio = 0.25 : f32, training_mode = 1 : i64} : (tensor<1x1x3x3xf32>) -> (tensor<1x1x3x3xf32>, tensor<1x1x3x3xi1>) loc("drop")
  %c = ampc.matmul %d, %v : (tensor<1x1x3x3xf32>, tensor<1x1x3x4xf32>) -> tensor<1x1x3x4xf32>
  return %c, %mask : tensor<1x1x3x4xf32>, tensor<1x1x3x3xi1>
}
