// RUN: ampc-opt %s --split-input-file --ampc-fold-casts | FileCheck %s
// RUN: ampc-opt %s --split-input-file --ampc-fold-casts --ampc-fuse | FileCheck %s --check-prefix=FUSED
// Without ampc-fold-casts the second case keeps a kernel that only casts
// (ampc-fuse alone copies the first case's cast into its two readers: a
// copy reads the f16 operand, fewer bytes than the f32 cast):
// RUN: ampc-opt %s --split-input-file --ampc-fuse | FileCheck %s --check-prefix=UNFOLDED

// ampc-fold-casts (issue 37, item 6): no cast is left a kernel of its own
// where an elementwise neighbour can convert in registers.

// A GEMM's f16 output read in f32 by two elementwise ops (the attention
// probabilities' gradient): one cast per user, each fused into its user.
// CHECK-LABEL: func.func @per_user
// CHECK-SAME: (%[[G:.+]]: tensor<4x8xf16>, %[[P:.+]]: tensor<4x8xf32>, %[[R:.+]]: tensor<4x1xf32>)
// CHECK-NEXT: %[[C1:.+]] = ampc.cast %[[G]] : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NEXT: %[[M:.+]] = ampc.mul %[[C1]], %[[P]]
// CHECK-NEXT: %[[S:.+]] = ampc.reduce_sum %[[M]]
// CHECK-NEXT: %[[C2:.+]] = ampc.cast %[[G]] : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NEXT: ampc.sub %[[C2]], %[[R]]
// FUSED-LABEL: func.func @per_user
// FUSED-NOT: ampc.cast
// FUSED: ampc.fusion
// FUSED-NEXT: ^bb0
// FUSED-NEXT: ampc.cast
// FUSED: ampc.reduce_sum
// FUSED: ampc.fusion
// FUSED-NEXT: ^bb0
// FUSED-NEXT: ampc.cast
// UNFOLDED-LABEL: func.func @per_user
// UNFOLDED-NEXT: ampc.fusion
// UNFOLDED-NEXT: ^bb0
// UNFOLDED-NEXT: ampc.cast %{{.+}} : tensor<4x8xf16> to tensor<4x8xf32>
// UNFOLDED-NEXT: ampc.mul
func.func @per_user(%g: tensor<4x8xf16>, %p: tensor<4x8xf32>, %r: tensor<4x1xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %c = ampc.cast %g : tensor<4x8xf16> to tensor<4x8xf32>
  %m = ampc.mul %c, %p : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = ampc.reduce_sum %m {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf32>) -> tensor<4xf32>
  %d = ampc.sub %c, %r : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %s, %d : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// An elementwise chain whose f32 result is read by another elementwise op
// and, cast to f16, by a reduction (the loss gradient, also added to the
// residual gradient): the cast takes its own copy of the chain.
// CHECK-LABEL: func.func @copy_producer
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[Y:.+]]: tensor<4x8xf32>, %[[Z:.+]]: tensor<4x8xf32>)
// CHECK-NEXT: %[[A:.+]] = ampc.add %[[X]], %[[Y]]
// CHECK-NEXT: %[[E:.+]] = ampc.exp %[[A]]
// CHECK-NEXT: %[[A2:.+]] = ampc.add %[[X]], %[[Y]]
// CHECK-NEXT: %[[E2:.+]] = ampc.exp %[[A2]]
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[E2]] : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK-NEXT: ampc.reduce_sum %[[C]]
// CHECK-NEXT: ampc.mul %[[E]], %[[Z]]
// FUSED-LABEL: func.func @copy_producer
// FUSED-NOT: ampc.cast
// FUSED: ampc.fusion
// FUSED: ampc.add
// FUSED-NEXT: ampc.exp
// FUSED-NEXT: ampc.cast
// FUSED: ampc.reduce_sum
// FUSED: ampc.fusion
// FUSED: ampc.add
// FUSED-NEXT: ampc.exp
// FUSED-NEXT: ampc.mul
// UNFOLDED-LABEL: func.func @copy_producer
// UNFOLDED: ampc.cast %{{.+}} : tensor<4x8xf32> to tensor<4x8xf16>
// UNFOLDED-NEXT: ampc.reduce_sum
func.func @copy_producer(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<8xf16>, tensor<4x8xf32>) {
  %a = ampc.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %e = ampc.exp %a : tensor<4x8xf32>
  %c = ampc.cast %e : tensor<4x8xf32> to tensor<4x8xf16>
  %s = ampc.reduce_sum %c {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<8xf16>
  %m = ampc.mul %e, %z : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %s, %m : tensor<8xf16>, tensor<4x8xf32>
}

// -----

// Left as they are: a cast between two non-elementwise ops (a reduction's
// output read by a reduction), and a chain reading state that a store
// between it and the cast overwrites (a copy at the cast would read the
// stored value).
// CHECK-LABEL: func.func @left
// CHECK: %[[S:.+]] = ampc.reduce_sum
// CHECK-NEXT: %[[C:.+]] = ampc.cast %[[S]]
// CHECK-NEXT: ampc.reduce_sum %[[C]]
// CHECK-LABEL: func.func @stored
// CHECK: %[[A:.+]] = ampc.add
// CHECK-NEXT: ampc.store @s, %{{.+}}
// CHECK-NEXT: ampc.cast %[[A]]
// CHECK-NOT: ampc.add
module {
  ampc.state @s : tensor<4xf32> = dense<0.0> : tensor<4xf32>
  func.func @left(%x: tensor<4x8xf16>) -> tensor<f32> {
    %s = ampc.reduce_sum %x {axes = array<i64: 1>, keepdims = 0 : i64} : (tensor<4x8xf16>) -> tensor<4xf16>
    %c = ampc.cast %s : tensor<4xf16> to tensor<4xf32>
    %t = ampc.reduce_sum %c {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4xf32>) -> tensor<f32>
    return %t : tensor<f32>
  }
  func.func @stored(%x: tensor<4xf32>) -> (tensor<f16>, tensor<4xf32>) {
    %l = ampc.load_state @s : tensor<4xf32>
    %a = ampc.add %l, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    ampc.store @s, %x : tensor<4xf32>
    %c = ampc.cast %a : tensor<4xf32> to tensor<4xf16>
    %t = ampc.reduce_sum %c {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<4xf16>) -> tensor<f16>
    %m = ampc.mul %a, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %t, %m : tensor<f16>, tensor<4xf32>
  }
}

// -----

// LayerNorm (issue 37, item 6): an FP32 Y that only a cast to f16 reads is
// written in f16 (the kernel rounds its FP32 value once, as the cast did);
// a layer_norm_grad reads its f16 dY unwidened. Without the fold each cast
// is a kernel that only converts.
// CHECK-LABEL: func.func @layer_norm
// CHECK-SAME: (%[[X:.+]]: tensor<4x8xf32>, %[[G:.+]]: tensor<8xf32>, %[[DY:.+]]: tensor<4x8xf16>)
// CHECK-NEXT: %[[Y:.+]], %[[M:.+]], %[[R:.+]] = ampc.layer_normalization %[[X]], %[[G]] : {{.*}} -> (tensor<4x8xf16>, tensor<4x1xf32>, tensor<4x1xf32>)
// CHECK-NEXT: %[[DX:.+]] = ampc.layer_norm_grad %[[DY]], %[[X]], %[[G]], %[[M]], %[[R]] : (tensor<4x8xf16>, tensor<4x8xf32>, {{.*}}) -> tensor<4x8xf32>
// CHECK-NEXT: return %[[Y]], %[[DX]]
// FUSED-LABEL: func.func @layer_norm
// FUSED-NOT: ampc.cast
// FUSED: return
// UNFOLDED-LABEL: func.func @layer_norm
// UNFOLDED: ampc.cast %{{.+}} : tensor<4x8xf32> to tensor<4x8xf16>
// UNFOLDED: ampc.cast %{{.+}} : tensor<4x8xf16> to tensor<4x8xf32>
func.func @layer_norm(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xf32>) {
  %n:3 = ampc.layer_normalization %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %y = ampc.cast %n#0 : tensor<4x8xf32> to tensor<4x8xf16>
  %w = ampc.cast %dy : tensor<4x8xf16> to tensor<4x8xf32>
  %dx = ampc.layer_norm_grad %w, %x, %g, %n#1, %n#2 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  return %y, %dx : tensor<4x8xf16>, tensor<4x8xf32>
}

// -----

// Left: a Y that another op also reads in FP32, a LayerNorm computing in
// FP64 (rounding its FP64 value to f16 directly would skip the FP32
// rounding the cast saw), a cast to FP64 (not 16 bits of FP32); and a dY
// cast that elementwise ops also read (the CPU target's Scale and B
// adjoints) stays for them while layer_norm_grad reads the f16 values.
// CHECK-LABEL: func.func @layer_norm_left
// CHECK: ampc.layer_normalization {{.*}} -> (tensor<4x8xf32>,
// CHECK-NEXT: ampc.cast %{{.+}} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK: ampc.layer_normalization {{.*}} -> (tensor<4x8xf32>, tensor<4x1xf64>, tensor<4x1xf64>)
// CHECK-NEXT: ampc.cast %{{.+}} : tensor<4x8xf32> to tensor<4x8xf16>
// CHECK: ampc.layer_normalization {{.*}} -> (tensor<4x8xf32>,
// CHECK-NEXT: ampc.cast %{{.+}} : tensor<4x8xf32> to tensor<4x8xf64>
// CHECK: %[[W:.+]] = ampc.cast %[[DY:.+]] : tensor<4x8xf16> to tensor<4x8xf32>
// CHECK-NEXT: ampc.layer_norm_grad %[[DY]],
// CHECK-NEXT: ampc.mul %[[W]],
func.func @layer_norm_left(%x: tensor<4x8xf32>, %g: tensor<8xf32>, %dy: tensor<4x8xf16>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x8xf16>, tensor<4x8xf64>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %a:3 = ampc.layer_normalization %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %ya = ampc.cast %a#0 : tensor<4x8xf32> to tensor<4x8xf16>
  %b:3 = ampc.layer_normalization %x, %g {stash_type = 11 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf64>, tensor<4x1xf64>)
  %yb = ampc.cast %b#0 : tensor<4x8xf32> to tensor<4x8xf16>
  %c:3 = ampc.layer_normalization %x, %g : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x1xf32>, tensor<4x1xf32>)
  %yc = ampc.cast %c#0 : tensor<4x8xf32> to tensor<4x8xf64>
  %w = ampc.cast %dy : tensor<4x8xf16> to tensor<4x8xf32>
  %dx = ampc.layer_norm_grad %w, %x, %g, %a#1, %a#2 : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %p = ampc.mul %w, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %ya, %a#0, %yb, %yc, %dx, %p : tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x8xf16>, tensor<4x8xf64>, tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A 16-bit weight gradient widened for the loss scaler (a convolution's:
// cuDNN writes it in its operands' type): unscale reads the f16 values and
// widens them on load; a cast another op also reads stays for that op.
// CHECK-LABEL: func.func @unscale
// CHECK-SAME: (%[[S:.+]]: tensor<f32>, %[[A:.+]]: tensor<4x3xf16>, %[[B:.+]]: tensor<3xf32>, %[[C:.+]]: tensor<2xbf16>, %[[D:.+]]: tensor<2xf16>)
// CHECK-NEXT: %[[WD:.+]] = ampc.cast %[[D]] : tensor<2xf16> to tensor<2xf32>
// CHECK-NEXT: ampc.unscale %[[S]], %[[A]], %[[B]], %[[C]], %[[D]] : (tensor<f32>, tensor<4x3xf16>, tensor<3xf32>, tensor<2xbf16>, tensor<2xf16>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i1>)
// CHECK-NEXT: ampc.exp %[[WD]]
// UNFOLDED-LABEL: func.func @unscale
// UNFOLDED-COUNT-3: ampc.cast
// UNFOLDED: ampc.unscale
func.func @unscale(%s: tensor<f32>, %a: tensor<4x3xf16>, %b: tensor<3xf32>, %c: tensor<2xbf16>, %d: tensor<2xf16>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i1>, tensor<2xf32>) {
  %wa = ampc.cast %a : tensor<4x3xf16> to tensor<4x3xf32>
  %wc = ampc.cast %c : tensor<2xbf16> to tensor<2xf32>
  %wd = ampc.cast %d : tensor<2xf16> to tensor<2xf32>
  %u:5 = ampc.unscale %s, %wa, %b, %wc, %wd : (tensor<f32>, tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>) -> (tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i1>)
  %e = ampc.exp %wd : tensor<2xf32>
  return %u#0, %u#1, %u#2, %u#3, %u#4, %e : tensor<4x3xf32>, tensor<3xf32>, tensor<2xf32>, tensor<2xf32>, tensor<i1>, tensor<2xf32>
}

// -----

// The cross-entropy (issue 39): 16-bit logits widened only for
// SoftmaxCrossEntropyLoss are read as they are (its results stay FP32),
// and the FP32 adjoint of nll_loss_grad with log_prob that only a cast to
// f16 reads is written in f16. A logits cast another op also reads stays
// for it; an adjoint without log_prob (a kernel that writes the NLL
// gradient only) keeps its cast.
// CHECK-LABEL: func.func @cross_entropy
// CHECK-SAME: (%[[S:.+]]: tensor<4x10xf16>, %[[T:.+]]: tensor<4xi64>, %[[D:.+]]: tensor<f32>)
// CHECK-NEXT: %[[L:.+]], %[[LP:.+]] = ampc.softmax_cross_entropy_loss %[[S]], %[[T]] : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: %[[G:.+]] = ampc.nll_loss_grad %[[D]], %[[T]] log_prob(%[[LP]]) : (tensor<f32>, tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf16>
// CHECK-NEXT: %[[N:.+]] = ampc.nll_loss_grad %[[D]], %[[T]] : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
// CHECK-NEXT: %[[NH:.+]] = ampc.cast %[[N]] : tensor<4x10xf32> to tensor<4x10xf16>
// CHECK-NEXT: return %[[L]], %[[G]], %[[NH]]
// UNFOLDED-LABEL: func.func @cross_entropy
// UNFOLDED: ampc.cast %{{.+}} : tensor<4x10xf16> to tensor<4x10xf32>
// UNFOLDED: ampc.cast %{{.+}} : tensor<4x10xf32> to tensor<4x10xf16>
func.func @cross_entropy(%s: tensor<4x10xf16>, %t: tensor<4xi64>, %d: tensor<f32>) -> (tensor<f32>, tensor<4x10xf16>, tensor<4x10xf16>) {
  %w = ampc.cast %s : tensor<4x10xf16> to tensor<4x10xf32>
  %l:2 = ampc.softmax_cross_entropy_loss %w, %t : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %g = ampc.nll_loss_grad %d, %t log_prob(%l#1) : (tensor<f32>, tensor<4xi64>, tensor<4x10xf32>) -> tensor<4x10xf32>
  %gh = ampc.cast %g : tensor<4x10xf32> to tensor<4x10xf16>
  %n = ampc.nll_loss_grad %d, %t : (tensor<f32>, tensor<4xi64>) -> tensor<4x10xf32>
  %nh = ampc.cast %n : tensor<4x10xf32> to tensor<4x10xf16>
  return %l#0, %gh, %nh : tensor<f32>, tensor<4x10xf16>, tensor<4x10xf16>
}

// -----

// A logits cast that another op also reads stays for it; the loss reads
// the 16-bit values.
// CHECK-LABEL: func.func @cross_entropy_left
// CHECK-SAME: (%[[S:.+]]: tensor<4x10xf16>, %[[T:.+]]: tensor<4xi64>)
// CHECK-NEXT: %[[W:.+]] = ampc.cast %[[S]] : tensor<4x10xf16> to tensor<4x10xf32>
// CHECK-NEXT: %[[L:.+]], %{{.+}} = ampc.softmax_cross_entropy_loss %[[S]], %[[T]] : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
// CHECK-NEXT: return %[[L]], %[[W]]
func.func @cross_entropy_left(%s: tensor<4x10xf16>, %t: tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>) {
  %w = ampc.cast %s : tensor<4x10xf16> to tensor<4x10xf32>
  %l:2 = ampc.softmax_cross_entropy_loss %w, %t : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  return %l#0, %w : tensor<f32>, tensor<4x10xf32>
}
