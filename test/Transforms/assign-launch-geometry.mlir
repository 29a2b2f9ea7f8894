// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda | FileCheck %s --check-prefix=CUDA
// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-assign-launch-geometry | FileCheck %s --check-prefix=CPU
// RUN: not ampc-opt %s --split-input-file --ampc-assign-launch-geometry=target=tpu 2>&1 | FileCheck %s --check-prefix=TARGET
// TARGET: ampc-assign-launch-geometry: target must be cpu or cuda, got 'tpu'
//
// Without the decisions the plan, which sizes scratch from them, refuses
// the first op that lacks one, in one line.
// RUN: not ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: error: has no launch geometry 'parallelism' for the cuda target (ampc-assign-launch-geometry target=cuda)
// RUN: not ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-plan-memory 2>&1 | FileCheck %s --check-prefix=MISSING-CPU
// MISSING-CPU: error: has no launch geometry 'images_per_gemm' for the cpu target (ampc-assign-launch-geometry target=cpu)
// The dialect checks each key's type.
// RUN: sed -e 's/%0 = ampc.conv %x, %w :/%0 = ampc.conv %x, %w {ampc.launch = {cudnn = 1 : i64}} :/' %s | not ampc-opt --split-input-file 2>&1 | FileCheck %s --check-prefix=MALFORMED
// MALFORMED: error: 'ampc.conv' op 'ampc.launch' must be a dictionary of launch decisions (parallelism: a string; cudnn, log_prob: bools; splits, threads, groups, images_per_gemm: positive i64; partials, workspace: non-negative i64), got {cudnn = 1 : i64}

// ampc-assign-launch-geometry records the decisions of KernelGeometry.h
// on each op that takes some, as `ampc.launch`, for the plan and the
// emitters to read (docs/design.md, "Launch geometry in the IR").
//
// Reductions (CUDA): a single output of 65,536 elements is split over 8
// blocks of 8,192; 300 outputs of 512 elements take a block each, 1,024
// of 64 a thread each (the CPU's pairwise order); softmax rows of 1,024 a
// block each, of 16 a warp each. The CPU target decides none of these.
// CUDA-LABEL: func.func @reductions
// CUDA: ampc.reduce_mean {{.*}}ampc.launch = {parallelism = "split", splits = 8 : i64}
// CUDA: ampc.reduce_sum {{.*}}ampc.launch = {parallelism = "row-by-block", splits = 1 : i64}
// CUDA: ampc.reduce_max {{.*}}ampc.launch = {parallelism = "row-by-thread", splits = 1 : i64}
// CUDA: ampc.softmax {{.*}}ampc.launch = {parallelism = "row-by-block"}
// CUDA: ampc.log_softmax {{.*}}ampc.launch = {parallelism = "row-by-warp"}
// CPU-LABEL: func.func @reductions
// CPU-NOT: ampc.launch
func.func @reductions(%x: tensor<64x1024xf32>, %g: tensor<512x300xf32>, %s: tensor<8x16xf32>) -> (tensor<f32>, tensor<300xf32>, tensor<1024xf32>, tensor<64x1024xf32>, tensor<8x16xf32>) {
  %0 = ampc.reduce_mean %x {axes = array<i64>, keepdims = 0 : i64} : (tensor<64x1024xf32>) -> tensor<f32>
  %1 = ampc.reduce_sum %g {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<512x300xf32>) -> tensor<300xf32>
  %2 = ampc.reduce_max %x {axes = array<i64: 0>, keepdims = 0 : i64} : (tensor<64x1024xf32>) -> tensor<1024xf32>
  %3 = ampc.softmax %x : tensor<64x1024xf32>
  %4 = ampc.log_softmax %s : tensor<8x16xf32>
  return %0, %1, %2, %3, %4 : tensor<f32>, tensor<300xf32>, tensor<1024xf32>, tensor<64x1024xf32>, tensor<8x16xf32>
}

// -----

// Batch statistics (CUDA): eval mode is elementwise (nothing to decide);
// channels of 32 elements take one block of 32 threads; 4 channels of
// 32,768 elements are split 4 ways (512 blocks wanted, a power of two at
// most 4 blocks per channel, each node above them over 64 terms) with 128
// threads each, in the forward and the adjoint alike.
// CUDA-LABEL: func.func @batch_norm
// CUDA: ampc.batch_normalization
// CUDA-NOT: ampc.launch
// CUDA-SAME: -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
// CUDA: ampc.batch_normalization {{.*}}ampc.launch = {parallelism = "row-by-block", splits = 1 : i64, threads = 32 : i64}
// CUDA: ampc.batch_normalization {{.*}}ampc.launch = {parallelism = "split", splits = 4 : i64, threads = 128 : i64}
// CUDA: ampc.batch_norm_grad {{.*}}ampc.launch = {parallelism = "split", splits = 4 : i64, threads = 128 : i64}
// CPU-LABEL: func.func @batch_norm
// CPU-NOT: ampc.launch
func.func @batch_norm(%x: tensor<2x8x4x4xf32>, %y: tensor<8x4x64x64xf32>, %s: tensor<8xf32>, %b: tensor<8xf32>, %m: tensor<8xf32>, %v: tensor<8xf32>, %s4: tensor<4xf32>, %b4: tensor<4xf32>, %m4: tensor<4xf32>, %v4: tensor<4xf32>) -> (tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>) {
  %e:3 = ampc.batch_normalization %x, %s, %b, %m, %v : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>)
  %t:5 = ampc.batch_normalization %x, %s, %b, %m, %v {epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics} : (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<2x8x4x4xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>)
  %u:5 = ampc.batch_normalization %y, %s4, %b4, %m4, %v4 {epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics} : (tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  %g:3 = ampc.batch_norm_grad %y, %y, %s4, %u#3, %u#4 {training_mode = 1 : i64} : (tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>)
  return %e#0, %t#0, %u#0, %g#0 : tensor<2x8x4x4xf32>, tensor<2x8x4x4xf32>, tensor<8x4x64x64xf32>, tensor<8x4x64x64xf32>
}

// -----

// layer_norm_grad (CUDA): with param_grads its 32 rows are one leaf of
// the CPU's pairwise sum, a warp's, rounded up to a block's 8 warps
// (groups); rows of 64 a warp each with or without.
// CUDA-LABEL: func.func @layer_norm_grad
// CUDA: ampc.layer_norm_grad {{.*}}ampc.launch = {groups = 8 : i64, parallelism = "row-by-warp"}
// CUDA: ampc.layer_norm_grad {{.*}}ampc.launch = {parallelism = "row-by-warp"}
// CPU-LABEL: func.func @layer_norm_grad
// CPU-NOT: ampc.launch
func.func @layer_norm_grad(%dy: tensor<32x64xf32>, %x: tensor<32x64xf32>, %g: tensor<64xf32>, %m: tensor<32x1xf32>, %r: tensor<32x1xf32>) -> (tensor<32x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<32x64xf32>) {
  %0:3 = ampc.layer_norm_grad %dy, %x, %g, %m, %r {param_grads = 2 : i64} : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<64xf32>, tensor<32x1xf32>, tensor<32x1xf32>) -> (tensor<32x64xf32>, tensor<64xf32>, tensor<64xf32>)
  %1 = ampc.layer_norm_grad %dy, %x, %g, %m, %r : (tensor<32x64xf32>, tensor<32x64xf32>, tensor<64xf32>, tensor<32x1xf32>, tensor<32x1xf32>) -> tensor<32x64xf32>
  return %0#0, %0#1, %0#2, %1 : tensor<32x64xf32>, tensor<64xf32>, tensor<64xf32>, tensor<32x64xf32>
}

// -----

// Losses (CUDA): SoftmaxCrossEntropyLoss reads its log_prob output when
// that holds the compute type (f32 here), not an f16 one; the mean over
// the batch is one thread's (serial); NLL without a reduction is a row of
// 10 classes per warp.
// CUDA-LABEL: func.func @losses
// CUDA: ampc.softmax_cross_entropy_loss {{.*}}ampc.launch = {log_prob = true, parallelism = "serial"}
// CUDA: ampc.softmax_cross_entropy_loss {{.*}}ampc.launch = {log_prob = false, parallelism = "serial"}
// CUDA: ampc.negative_log_likelihood_loss {{.*}}ampc.launch = {parallelism = "row-by-warp"}
// CPU-LABEL: func.func @losses
// CPU-NOT: ampc.launch
func.func @losses(%scores: tensor<4x10xf32>, %labels: tensor<4xi64>, %h: tensor<4x10xf16>) -> (tensor<f32>, tensor<4x10xf32>, tensor<f16>, tensor<4xf32>) {
  %0:2 = ampc.softmax_cross_entropy_loss %scores, %labels : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<4x10xf32>)
  %1:2 = ampc.softmax_cross_entropy_loss %h, %labels : (tensor<4x10xf16>, tensor<4xi64>) -> (tensor<f16>, tensor<4x10xf16>)
  %2 = ampc.negative_log_likelihood_loss %scores, %labels {reduction = #ampc<reduction none>} : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<4xf32>
  return %0#0, %0#1, %1#0, %2 : tensor<f32>, tensor<4x10xf32>, tensor<f16>, tensor<4xf32>
}

// -----

// Clipping (CUDA): a partial sum per block of 2,048 elements of each
// gradient: 1 + 2.
// CUDA-LABEL: func.func @clip
// CUDA: ampc.clip_grad_norm {{.*}}ampc.launch = {partials = 3 : i64}
// CPU-LABEL: func.func @clip
// CPU-NOT: ampc.launch
func.func @clip(%a: tensor<4x3xf32>, %b: tensor<3000xf32>) -> (tensor<4x3xf32>, tensor<3000xf32>) {
  %c:2 = ampc.clip_grad_norm %a, %b {max_norm = 1.0 : f32} : (tensor<4x3xf32>, tensor<3000xf32>) -> (tensor<4x3xf32>, tensor<3000xf32>)
  return %c#0, %c#1 : tensor<4x3xf32>, tensor<3000xf32>
}

// -----

// Convolutions. On CUDA cuDNN takes pads equal at both ends, not 1/0. On
// the CPU output planes of 16 and 25 positions put all 8 images in one
// GEMM (512 columns' worth), a plane of 900 one image; the weight
// gradient always takes one.
// A cuDNN call's workspace (a scratch slot the plan places) is the bytes
// of its largest tensor, here below the 1 MiB floor; none without cuDNN.
// CUDA-LABEL: func.func @conv
// CUDA: ampc.conv {{.*}}ampc.launch = {cudnn = true, workspace = 1048576 : i64}
// CUDA: ampc.conv {{.*}}ampc.launch = {cudnn = false, workspace = 0 : i64}
// CUDA: ampc.conv {{.*}}ampc.launch = {cudnn = true, workspace = 1048576 : i64}
// CUDA: ampc.conv_backward_weight {{.*}}ampc.launch = {cudnn = true, workspace = 1048576 : i64}
// CPU-LABEL: func.func @conv
// CPU: ampc.conv {{.*}}ampc.launch = {images_per_gemm = 8 : i64}
// CPU: ampc.conv {{.*}}ampc.launch = {images_per_gemm = 8 : i64}
// CPU: ampc.conv {{.*}}ampc.launch = {images_per_gemm = 1 : i64}
// CPU: ampc.conv_backward_weight {{.*}}ampc.launch = {images_per_gemm = 1 : i64}
func.func @conv(%x: tensor<8x3x6x6xf32>, %w: tensor<4x3x3x3xf32>, %big: tensor<1x3x32x32xf32>, %dy: tensor<8x4x4x4xf32>) -> (tensor<8x4x4x4xf32>, tensor<8x4x5x5xf32>, tensor<1x4x30x30xf32>, tensor<4x3x3x3xf32>) {
  %0 = ampc.conv %x, %w : (tensor<8x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<8x4x4x4xf32>
  %1 = ampc.conv %x, %w {pads = array<i64: 1, 1, 0, 0>} : (tensor<8x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<8x4x5x5xf32>
  %2 = ampc.conv %big, %w : (tensor<1x3x32x32xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x30x30xf32>
  %3 = ampc.conv_backward_weight %x, %dy : (tensor<8x3x6x6xf32>, tensor<8x4x4x4xf32>) -> tensor<4x3x3x3xf32>
  return %0, %1, %2, %3 : tensor<8x4x4x4xf32>, tensor<8x4x5x5xf32>, tensor<1x4x30x30xf32>, tensor<4x3x3x3xf32>
}

// -----

// At and above the floor: X and Y of 8 x 64 x 32 x 32 FP16 are 1 MiB each;
// a Y of 128 channels is 2 MiB.
// CUDA-LABEL: func.func @conv_workspace
// CUDA: ampc.conv {{.*}}ampc.launch = {cudnn = true, workspace = 1048576 : i64}
// CUDA: ampc.conv {{.*}}ampc.launch = {cudnn = true, workspace = 2097152 : i64}
func.func @conv_workspace(%x: tensor<8x64x32x32xf16>, %w: tensor<64x64x3x3xf16>, %w2: tensor<128x64x3x3xf16>) -> (tensor<8x64x32x32xf16>, tensor<8x128x32x32xf16>) {
  %0 = ampc.conv %x, %w {pads = array<i64: 1, 1, 1, 1>} : (tensor<8x64x32x32xf16>, tensor<64x64x3x3xf16>) -> tensor<8x64x32x32xf16>
  %1 = ampc.conv %x, %w2 {pads = array<i64: 1, 1, 1, 1>} : (tensor<8x64x32x32xf16>, tensor<128x64x3x3xf16>) -> tensor<8x128x32x32xf16>
  return %0, %1 : tensor<8x64x32x32xf16>, tensor<8x128x32x32xf16>
}
