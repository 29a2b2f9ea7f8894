// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-assign-launch-geometry=target=cuda --ampc-plan-memory="target=cuda stage-inputs=1" | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s --check-prefix=DECIDED
// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" | ampc-translate --split-input-file --ampc-to-cuda | FileCheck %s --check-prefix=HAND
// RUN: ampc-opt %s --split-input-file --ampc-assign-accumulation --ampc-plan-memory="target=cuda stage-inputs=1" | FileCheck %s --check-prefix=HAND-PLAN

// The CUDA emitter prints the launch ampc.launch records, whatever set it
// (docs/design.md, "Launch geometry in the IR"): here by hand, without
// ampc-assign-launch-geometry, a mean of 65,536 elements split 4 ways
// instead of the 8 the pass decides, and softmax rows of 1,024 a thread
// each instead of a block each.
// DECIDED-LABEL: static int32_t infer(
// DECIDED:         ampc::cuda::launch("reducePartials<{{.*}}>", {{.*}}, 8u, ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + {{[0-9]+}}), 1LL, {{.*}}, 65536LL, 8LL, ampc::cuda::ReduceMean);
// DECIDED:         ampc::cuda::launch("softmaxByBlock<{{.*}}>", {{.*}}, 64u, ampc::cuda::kThreads,
// DECIDED-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax"); // ampc.parallelism: row-by-block 64 rows of 1024 (ampc.softmax)
// HAND-LABEL: static int32_t infer(
// HAND:         ampc::cuda::launch("reducePartials<{{.*}}>", {{.*}}, 4u, ampc::cuda::kThreads, 0, ctx.stream, in0, reinterpret_cast<float *>(state + {{[0-9]+}}), 1LL, {{.*}}, 65536LL, 4LL, ampc::cuda::ReduceMean);
// HAND-NEXT:    AMPC_LAUNCHED(ctx, "ampc.reduce_mean"); // ampc.parallelism: split 1 rows of 65536 (ampc.reduce_mean)
// HAND:         ampc::cuda::launch("reduceFinish<{{.*}}>", {{.*}}, 1LL, 4LL, 65536LL, ampc::cuda::ReduceMean);
// HAND:         ampc::cuda::launch("softmax<{{.*}}>", {{.*}}, ampc::cuda::blocks(64LL), ampc::cuda::kThreads,
// HAND-NEXT:    AMPC_LAUNCHED(ctx, "ampc.softmax"); // ampc.parallelism: row-by-thread 64 rows of 1024 (ampc.softmax)
func.func @forward(%x: tensor<64x1024xf32>) -> (tensor<f32>, tensor<64x1024xf32>) {
  %0 = ampc.reduce_mean %x {axes = array<i64>, keepdims = 0 : i64, ampc.launch = {parallelism = "split", splits = 4 : i64}} : (tensor<64x1024xf32>) -> tensor<f32>
  %1 = ampc.softmax %x {ampc.launch = {parallelism = "row-by-thread"}} : tensor<64x1024xf32>
  return %0, %1 : tensor<f32>, tensor<64x1024xf32>
}

// -----

// The plan sizes the scratch from the record too: batch statistics of 4
// channels split 2 ways instead of 4 take 2 * 4 * 2 FP32 partials (64
// bytes, not 128), with 64 threads per block instead of 128.
// DECIDED-LABEL: static int32_t infer(
// DECIDED:         ampc::cuda::launchCooperative("batchNormTrain<{{.*}}>", {{.*}}, 16u, 128, 0, ctx.stream, in0, {{v[0-9]+}}, 8LL, 4LL, 4096LL, 4LL,
// HAND-LABEL: static int32_t infer(
// HAND:         ampc::cuda::launchCooperative("batchNormTrain<{{.*}}>", {{.*}}, 8u, 64, 0, ctx.stream, in0, {{v[0-9]+}}, 8LL, 4LL, 4096LL, 2LL,
// HAND-PLAN-LABEL: func.func @forward(%arg0: tensor<8x4x64x64xf32>
// HAND-PLAN:         ampc.batch_normalization {{.*}}ampc.scratch = array<i64: {{[0-9]+}}, 64>
func.func @forward(%y: tensor<8x4x64x64xf32>, %s4: tensor<4xf32>, %b4: tensor<4xf32>, %m4: tensor<4xf32>, %v4: tensor<4xf32>) -> tensor<8x4x64x64xf32> {
  %u:5 = ampc.batch_normalization %y, %s4, %b4, %m4, %v4 {epsilon = 1.0e-03 : f32, momentum = 0.9 : f32, training_mode = 1 : i64, saved_statistics, ampc.launch = {parallelism = "split", splits = 2 : i64, threads = 64 : i64}} : (tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> (tensor<8x4x64x64xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>)
  return %u#0 : tensor<8x4x64x64xf32>
}
