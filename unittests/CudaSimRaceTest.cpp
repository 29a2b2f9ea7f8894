//===- CudaSimRaceTest.cpp - the CUDA execution's race detector -----------===//
//
// Kernels that race, each one of issue 36's mutations made in a copy of
// the project's kernel it names (or in a small kernel), fail with a
// one-line "data race" message; correct kernels that share memory through
// barriers, warp operations, atomics and kernel boundaries do not. This
// file is compiled with ThreadSanitizer's instrumentation and without its
// runtime (unittests/CMakeLists.txt), as a cuda-sim library built with
// AMPC_CUDA_SIM_RACECHECK=1 is: libampc_cudasim's hooks see its accesses.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace {

using ampc::cuda::addOf;
using ampc::cuda::largerOf;

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

constexpr int kBlock = 64;

/// The project's block reduction (ampc::cuda::blockCombine).
struct RealCombine {
  template <typename C, typename F>
  __device__ static C run(C value, C *share, F combine) {
    return ampc::cuda::blockCombine<C>(value, share, combine);
  }
};
/// A copy of blockCombine with one of its barriers dropped: after the
/// store of each thread's value, or the trailing one before the shared
/// array is reused.
template <bool StoreBarrier, bool TrailingBarrier> struct MutatedCombine {
  template <typename C, typename F>
  __device__ static C run(C value, C *share, F combine) {
    const int t = threadIdx.x;
    share[t] = value;
    if (StoreBarrier)
      __syncthreads();
    for (int half = blockDim.x / 2; half > 0; half /= 2) {
      if (t < half)
        share[t] = combine(share[t], share[t + half]);
      __syncthreads();
    }
    const C result = share[0];
    if (TrailingBarrier)
      __syncthreads();
    return result;
  }
};

/// Per row, its maximum, then the sum of its differences from it (two
/// block reductions through one shared array, as softmax does); rows are
/// shared among the blocks.
template <typename Combine>
__global__ void rowMaxAndSum(const float *in, float *out, int rows, int cols) {
  AMPC_SHARED(float[kBlock], share);
  for (int row = blockIdx.x; row < rows; row += gridDim.x) {
    float m = -INFINITY;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      m = largerOf(m, in[row * cols + c]);
    m = Combine::run(m, share, largerOf<float>);
    float s = 0;
    for (int c = threadIdx.x; c < cols; c += blockDim.x)
      s += m - in[row * cols + c];
    s = Combine::run(s, share, addOf<float>);
    if (threadIdx.x == 0) {
      out[2 * row] = m;
      out[2 * row + 1] = s;
    }
  }
}

/// Each thread reads the shared value of thread (t + step) % blockDim,
/// after a barrier or not.
__global__ void neighbour(int *out, int step, int barrier) {
  AMPC_SHARED(int[kBlock], tile);
  const int t = threadIdx.x;
  tile[t] = 1000 * blockIdx.x + t;
  if (barrier)
    __syncthreads();
  out[blockIdx.x * blockDim.x + t] = tile[(t + step) % blockDim.x];
}

/// A copy of ampc::cuda::sumOfSquares with its atomicAdd a plain `+=`.
template <typename T>
__global__ void sumOfSquaresPlainAdd(unsigned char *base,
                                     ampc::cuda::TensorList<T> list, T *sum) {
  const int t = blockIdx.y;
  const T *g = reinterpret_cast<const T *>(base + list.in[t]);
  T local = 0;
  AMPC_FOR(i, list.size[t]) local += g[i] * g[i];
  *sum += local;
}

/// A copy of ampc::cuda::unscale that sets *found with a plain store (what
/// the real kernel did before raiseFlag): many threads store 1 at once.
template <typename T>
__global__ void unscalePlainFlag(unsigned char *base,
                                 ampc::cuda::TensorList<T> list,
                                 const float *scale, uint8_t *found) {
  const float inv = ampc::math::inverseScale(*scale);
  const int t = blockIdx.y;
  const T *g = reinterpret_cast<const T *>(base + list.in[t]);
  T *o = reinterpret_cast<T *>(base + list.out[t]);
  AMPC_FOR(i, list.size[t]) {
    const T v = g[i];
    if (!isfinite(v))
      *found = 1;
    o[i] = ampc::math::unscale(v, inv);
  }
}

/// One add per block into `out`, atomic or not.
__global__ void countBlocks(int *out, int atomic) {
  if (threadIdx.x != 0)
    return;
  if (atomic)
    atomicAdd(out, 1);
  else
    *out += 1;
}

/// A warp sum with __shfl_down_sync, then lane 0 of each warp adds.
__global__ void warpSum(const int *in, int *out) {
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  if (threadIdx.x % 32 == 0)
    atomicAdd(out, v);
}

/// Lanes swap values through shared memory, ordered by __syncwarp alone
/// (each warp its own part; no block barrier).
__global__ void warpSwap(int *out) {
  AMPC_SHARED(int[kBlock], tile);
  const int t = threadIdx.x;
  tile[t] = t;
  __syncwarp();
  const int other = tile[t ^ 1];
  __syncwarp();
  tile[t] = other * 2;
  __syncwarp();
  out[blockIdx.x * blockDim.x + t] = tile[t ^ 1];
}

/// Each block's first thread writes its slot; then, after a grid barrier
/// or not, every thread reads every block's slot (a cooperative launch).
/// The __syncthreads orders the reads of the block's own slot, so that a
/// race can only be between blocks.
__global__ void readOtherBlocks(int *slots, int *out, int barrier) {
  if (threadIdx.x == 0)
    slots[blockIdx.x] = static_cast<int>(blockIdx.x) + 1;
  __syncthreads();
  if (barrier)
    ampc::cuda::gridSync();
  int sum = 0;
  for (unsigned b = 0; b < gridDim.x; ++b)
    sum += slots[b];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/// out[i] = in[n - 1 - i]: what another block of the previous kernel wrote.
__global__ void reverse(const int *in, int *out, int n) {
  AMPC_FOR(i, n) out[i] = in[n - 1 - i];
}
__global__ void iota(int *out, int n) { AMPC_FOR(i, n) out[i] = static_cast<int>(i); }

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

template <typename T> T *deviceAlloc(size_t count) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, count * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(p, 0, count * sizeof(T)), cudaSuccess);
  return static_cast<T *>(p);
}

/// Whether this file's kernels are instrumented: a Clang or sanitized
/// build does not (unittests/CMakeLists.txt), and its tests say so.
#ifdef AMPC_RACE_INSTRUMENTED
#define AMPC_REQUIRE_INSTRUMENTED()
#else
#define AMPC_REQUIRE_INSTRUMENTED()                                            \
  GTEST_SKIP() << "built without the race check's instrumentation (GCC, "      \
                  "no AMPC_SANITIZE)"
#endif

/// In a death test's child (a race is a sticky failure): launches, then
/// exits 0 when the kernel failed with a data race and the error stuck.
[[noreturn]] void expectRace(const std::function<void()> &launch) {
  unsetenv("AMPC_CUDA_SIM_SEED");
  launch(); // which may synchronise: the error is sticky
  const cudaError_t e = cudaDeviceSynchronize();
  bool ok = e == cudaErrorLaunchFailure &&
        std::string(cudaGetErrorString(e)).find("data race") !=
            std::string::npos;
  ok &= cudaDeviceSynchronize() == cudaErrorLaunchFailure; // sticky
  std::exit(ok ? 0 : 1);
}

/// rowMaxAndSum over 64 rows of 100 (7 blocks of kBlock threads).
template <typename Combine> std::vector<float> rowsWith(const char *name) {
  const int rows = 64, cols = 100;
  std::vector<float> host(rows * cols);
  for (size_t i = 0; i < host.size(); ++i)
    host[i] = static_cast<float>((i * 37) % 101) / 7.0f;
  float *in = deviceAlloc<float>(host.size()), *out = deviceAlloc<float>(2 * rows);
  cudaMemcpy(in, host.data(), host.size() * 4, cudaMemcpyHostToDevice);
  ampc::cuda::launch(name, rowMaxAndSum<Combine>, 7, kBlock, 0, nullptr, in,
                     out, rows, cols);
  std::vector<float> result(2 * rows);
  EXPECT_EQ(cudaMemcpy(result.data(), out, result.size() * 4,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(in);
  cudaFree(out);
  return result;
}

const float kOne = 1.0f;

/// Two tensors of 1000 floats in one allocation (and room for their
/// unscaled copies), as the optimizer's multi-tensor kernels see them;
/// with `infinities`, every 10th value is infinite.
struct TwoTensors {
  unsigned char *base;
  ampc::cuda::TensorList<float> list{};
  float *sum;
  uint8_t *found;
  explicit TwoTensors(bool infinities = false) {
    std::vector<float> host(2000);
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = infinities && i % 10 == 0 ? INFINITY
                                          : static_cast<float>(i % 5) - 2.0f;
    base = reinterpret_cast<unsigned char *>(deviceAlloc<float>(4000));
    cudaMemcpy(base, host.data(), 8000, cudaMemcpyHostToDevice);
    list.count = 2;
    list.in[0] = 0;
    list.in[1] = 4000;
    list.out[0] = 8000;
    list.out[1] = 12000;
    list.size[0] = list.size[1] = 1000;
    // One block of the multi-tensor grid each (listBlocks(1000) = 1).
    list.firstBlock[0] = 0;
    list.firstBlock[1] = 1;
    list.firstBlock[2] = 2;
    sum = deviceAlloc<float>(1);
    found = deviceAlloc<uint8_t>(1);
  }
  ~TwoTensors() {
    cudaFree(base);
    cudaFree(sum);
    cudaFree(found);
  }
};

//===----------------------------------------------------------------------===//
// Races found
//===----------------------------------------------------------------------===//

TEST(CudaSimRaceDeathTest, BlockCombineWithoutTheBarrierAfterTheStore) {
  AMPC_REQUIRE_INSTRUMENTED();
  EXPECT_EXIT(expectRace([] {
                rowsWith<MutatedCombine<false, true>>("combineNoStoreBarrier");
              }),
              ::testing::ExitedWithCode(0),
              "kernel combineNoStoreBarrier: data race on shared or local "
              "memory 0x[0-9a-f]+: thread \\([0-9]+, 0, 0\\) of block "
              "\\(6, 0, 0\\) (reads|writes) 4 bytes that thread \\([0-9]+, 0, "
              "0\\) of block \\(6, 0, 0\\) (read|wrote) with no __syncthreads "
              "or warp operation of both between");
}

TEST(CudaSimRaceDeathTest, BlockCombineWithoutTheTrailingBarrier) {
  AMPC_REQUIRE_INSTRUMENTED();
  EXPECT_EXIT(expectRace([] {
                rowsWith<MutatedCombine<true, false>>(
                    "combineNoTrailingBarrier");
              }),
              ::testing::ExitedWithCode(0),
              "kernel combineNoTrailingBarrier: data race on shared or local "
              "memory .* thread \\(0, 0, 0\\) of block \\(6, 0, 0\\) writes 4 "
              "bytes that thread \\([0-9]+, 0, 0\\) of block \\(6, 0, 0\\) "
              "read");
}

TEST(CudaSimRaceDeathTest, NeighbourInSharedMemoryWithoutBarrier) {
  AMPC_REQUIRE_INSTRUMENTED();
  for (int step : {1, kBlock / 2})
    EXPECT_EXIT(expectRace([step] {
                  ampc::cuda::launch("neighbour", neighbour, 2, kBlock, 0,
                                     nullptr, deviceAlloc<int>(2 * kBlock),
                                     step, 0);
                }),
                ::testing::ExitedWithCode(0),
                "kernel neighbour: data race on shared or local memory")
        << "thread t reads t + " << step;
}

TEST(CudaSimRaceDeathTest, SumOfSquaresWithPlainAdd) {
  AMPC_REQUIRE_INSTRUMENTED();
  EXPECT_EXIT(expectRace([] {
                auto *t = new TwoTensors;
                ampc::cuda::launch("sumOfSquaresPlainAdd",
                                   sumOfSquaresPlainAdd<float>, dim3(2, 2),
                                   kBlock, 0, nullptr, t->base, t->list,
                                   t->sum);
              }),
              ::testing::ExitedWithCode(0),
              "kernel sumOfSquaresPlainAdd: data race on device memory "
              "0x[0-9a-f]+ \\(offset 0 of the 4-byte allocation at "
              "0x[0-9a-f]+\\)");
}

TEST(CudaSimRaceDeathTest, PlainAddFromAThousandBlocks) {
  AMPC_REQUIRE_INSTRUMENTED();
  // The default reverse order: block 999 adds first, block 998 reads its
  // result.
  EXPECT_EXIT(expectRace([] {
                ampc::cuda::launch("countBlocks", countBlocks, 1000, 32, 0,
                                   nullptr, deviceAlloc<int>(1), 0);
              }),
              ::testing::ExitedWithCode(0),
              "kernel countBlocks: data race on device memory 0x[0-9a-f]+ "
              "\\(offset 0 of the 4-byte allocation at 0x[0-9a-f]+\\): thread "
              "\\(0, 0, 0\\) of block \\(998, 0, 0\\) reads 4 bytes that "
              "thread \\(0, 0, 0\\) of block \\(999, 0, 0\\) wrote \\(blocks "
              "are unordered: use an atomic\\)");
}

TEST(CudaSimRaceDeathTest, FlagSetByPlainStores) {
  AMPC_REQUIRE_INSTRUMENTED();
  EXPECT_EXIT(expectRace([] {
                auto *t = new TwoTensors(/*infinities=*/true);
                ampc::cuda::launch("unscalePlainFlag", unscalePlainFlag<float>,
                                   dim3(2, 2), kBlock, 0, nullptr, t->base,
                                   t->list, t->sum, t->found);
              }),
              ::testing::ExitedWithCode(0),
              "kernel unscalePlainFlag: data race on device memory .* writes 1 "
              "bytes that thread .* wrote");
}

TEST(CudaSimRaceDeathTest, BlocksOfACooperativeLaunchWithoutGridBarrier) {
  AMPC_REQUIRE_INSTRUMENTED();
  // Every block writes its slot, waits at its __syncthreads, then reads
  // the other blocks' slots, with no grid barrier between.
  EXPECT_EXIT(expectRace([] {
                ampc::cuda::launchCooperative(
                    "readOtherBlocks", readOtherBlocks, 4, kBlock, 0, nullptr,
                    deviceAlloc<int>(4), deviceAlloc<int>(4 * kBlock), 0);
              }),
              ::testing::ExitedWithCode(0),
              "kernel readOtherBlocks: data race on device memory .*: thread "
              "\\([0-9]+, 0, 0\\) of block \\(3, 0, 0\\) reads 4 bytes that "
              "thread \\(0, 0, 0\\) of block \\([0-2], 0, 0\\) wrote with no "
              "grid barrier \\(ampc::cuda::gridSync\\) between");
}

TEST(CudaSimRaceDeathTest, ARaceNamesTheSeedToReplay) {
  AMPC_REQUIRE_INSTRUMENTED();
  EXPECT_EXIT(
      {
        setenv("AMPC_CUDA_SIM_SEED", "7", 1);
        ampc::cuda::launch("countBlocks", countBlocks, 1000, 32, 0, nullptr,
                           deviceAlloc<int>(1), 0);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kernel countBlocks: data race .*\\(AMPC_CUDA_SIM_SEED=7\\)");
}

//===----------------------------------------------------------------------===//
// Correct kernels: no race
//===----------------------------------------------------------------------===//

TEST(CudaSimRace, BlockCombineIsRaceFree) {
  AMPC_REQUIRE_INSTRUMENTED();
  std::vector<float> result = rowsWith<RealCombine>("blockCombine");
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // Row 0's values: (i * 37) % 101 / 7 for i < 100.
  float m = 0, s = 0;
  for (int i = 0; i < 100; ++i)
    m = std::max(m, static_cast<float>((i * 37) % 101) / 7.0f);
  for (int i = 0; i < 100; ++i)
    s += m - static_cast<float>((i * 37) % 101) / 7.0f;
  EXPECT_EQ(result[0], m);
  EXPECT_NEAR(result[1], s, 1e-3f);
}

TEST(CudaSimRace, SumOfSquaresByBlockPartialsIsRaceFree) {
  // Clipping's norm (issue 37): a partial per block, then one block adds
  // them; no atomics, the same bits in every block order.
  AMPC_REQUIRE_INSTRUMENTED();
  TwoTensors t;
  float *partials = deviceAlloc<float>(2);
  ampc::cuda::launch("sumOfSquares", ampc::cuda::sumOfSquares<float>, 2,
                     kBlock, 0, nullptr, t.base, t.list, partials);
  ampc::cuda::launch("sumPartials", ampc::cuda::sumPartials<float>, 1, kBlock,
                     0, nullptr, partials, int64_t{2}, t.sum);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(partials);
  float sum = 0;
  cudaMemcpy(&sum, t.sum, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(sum, 4000.0f); // (4 + 1 + 0 + 1 + 4) per 5 elements
}

TEST(CudaSimRace, GridBarrierOrdersTheBlocks) {
  AMPC_REQUIRE_INSTRUMENTED();
  for (const char *seed : {"reverse", "1", "2"}) {
    setenv("AMPC_CUDA_SIM_SEED", seed, 1);
    int *slots = deviceAlloc<int>(4), *out = deviceAlloc<int>(4 * kBlock);
    ampc::cuda::launchCooperative("readOtherBlocks", readOtherBlocks, 4, kBlock,
                                  0, nullptr, slots, out, 1);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << seed;
    std::vector<int> result(4 * kBlock);
    cudaMemcpy(result.data(), out, result.size() * 4, cudaMemcpyDeviceToHost);
    for (int v : result)
      EXPECT_EQ(v, 10) << seed;
    cudaFree(slots);
    cudaFree(out);
  }
  unsetenv("AMPC_CUDA_SIM_SEED");
}

/// BatchNormalization in training mode and its gradient, each one
/// cooperative launch, on 3 channels of 2 × 700 values (4 work items per
/// channel, in fewer blocks than items when the device holds fewer): no
/// race between the items' partials and their combination.
TEST(CudaSimRace, BatchNormKernelsAreRaceFree) {
  AMPC_REQUIRE_INSTRUMENTED();
  using F = ampc::cuda::As<float>;
  const int64_t n = 2, c = 3, inner = 700, splits = 4, count = n * c * inner;
  std::vector<float> host(count);
  for (int64_t i = 0; i < count; ++i)
    host[i] = static_cast<float>((i * 37) % 101) / 7.0f;
  float *x = deviceAlloc<float>(count), *y = deviceAlloc<float>(count),
        *dx = deviceAlloc<float>(count), *kept = deviceAlloc<float>(count),
        *partials = deviceAlloc<float>(2 * c * splits),
        *parameters = deviceAlloc<float>(4 * c),
        *statistics = deviceAlloc<float>(6 * c);
  cudaMemcpy(x, host.data(), count * 4, cudaMemcpyHostToDevice);
  const std::vector<float> ones(4 * c, 1.0f);
  cudaMemcpy(parameters, ones.data(), ones.size() * 4, cudaMemcpyHostToDevice);
  float *mean = statistics + 2 * c, *invStdDev = statistics + 3 * c;
  ampc::cuda::launchCooperative(
      "batchNormTrain", ampc::cuda::batchNormTrain<float, F, F, F, F, F>,
      c * splits, kBlock, 0, nullptr, x, y, n, c, inner, splits, partials,
      parameters, parameters + c, parameters + 2 * c, parameters + 3 * c, 1e-5f,
      0.9f, 1.0f, statistics, statistics + c, mean, invStdDev,
      /*residual=*/x, /*relu=*/true);
  // The adjoint with every prologue operand (ampc-fuse-batch-norm-epilogue):
  // the addend and the ReLU's Y read, the masked gradient kept.
  ampc::cuda::launchCooperative(
      "batchNormGrad", ampc::cuda::batchNormGrad<float, F, F, F, F, F>,
      c * splits, kBlock, 0, nullptr, y, x, dx, n, c, inner, splits, partials,
      parameters, mean, invStdDev, true, statistics + 4 * c,
      statistics + 5 * c, /*addend=*/x, /*reluOutput=*/y, /*kept=*/kept);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<float> saved(2 * c);
  cudaMemcpy(saved.data(), mean, saved.size() * 4, cudaMemcpyDeviceToHost);
  for (int64_t ch = 0; ch < c; ++ch) {
    double sum = 0, squares = 0;
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) {
        const double v = host[(b * c + ch) * inner + i];
        sum += v;
        squares += v * v;
      }
    const double m = sum / (n * inner), var = squares / (n * inner) - m * m;
    EXPECT_NEAR(saved[ch], m, 1e-4) << ch;
    EXPECT_NEAR(saved[c + ch], 1 / std::sqrt(var + 1e-5), 1e-4) << ch;
  }
  for (float *p : {x, y, dx, kept, partials, parameters, statistics})
    cudaFree(p);
}

TEST(CudaSimRace, UnscaleRaisesItsFlagWithoutARace) {
  AMPC_REQUIRE_INSTRUMENTED();
  TwoTensors t(/*infinities=*/true);
  ASSERT_EQ(cudaMemcpy(t.sum, &kOne, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ampc::cuda::launch("unscale", ampc::cuda::unscale<float>, 2, kBlock, 0,
                     nullptr, t.base, t.list, ampc::cuda::GradientStorages{},
                     t.sum, t.found);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  uint8_t found = 0;
  cudaMemcpy(&found, t.found, 1, cudaMemcpyDeviceToHost);
  EXPECT_EQ(found, 1);
}

TEST(CudaSimRace, AtomicAddFromAThousandBlocksIsRaceFree) {
  AMPC_REQUIRE_INSTRUMENTED();
  int *out = deviceAlloc<int>(1);
  ampc::cuda::launch("countBlocks", countBlocks, 1000, 32, 0, nullptr, out, 1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int count = 0;
  cudaMemcpy(&count, out, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(count, 1000);
  cudaFree(out);
}

TEST(CudaSimRace, NeighbourAfterBarrierIsRaceFree) {
  AMPC_REQUIRE_INSTRUMENTED();
  int *out = deviceAlloc<int>(2 * kBlock);
  ampc::cuda::launch("neighbour", neighbour, 2, kBlock, 0, nullptr, out,
                     kBlock / 2, 1);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int> result(2 * kBlock);
  cudaMemcpy(result.data(), out, result.size() * 4, cudaMemcpyDeviceToHost);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < kBlock; ++t)
      EXPECT_EQ(result[b * kBlock + t], 1000 * b + (t + kBlock / 2) % kBlock);
  cudaFree(out);
}

TEST(CudaSimRace, WarpShufflesAreRaceFree) {
  AMPC_REQUIRE_INSTRUMENTED();
  std::vector<int> host(512, 3);
  int *in = deviceAlloc<int>(512), *out = deviceAlloc<int>(1);
  cudaMemcpy(in, host.data(), 2048, cudaMemcpyHostToDevice);
  ampc::cuda::launch("warpSum", warpSum, 2, 256, 0, nullptr, in, out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int sum = 0;
  cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost);
  EXPECT_EQ(sum, 3 * 512);
  cudaFree(in);
  cudaFree(out);
}

TEST(CudaSimRace, SyncwarpOrdersTheLanesOfAWarp) {
  AMPC_REQUIRE_INSTRUMENTED();
  int *out = deviceAlloc<int>(2 * kBlock);
  ampc::cuda::launch("warpSwap", warpSwap, 2, kBlock, 0, nullptr, out);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int> result(2 * kBlock);
  cudaMemcpy(result.data(), out, result.size() * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < 2 * kBlock; ++i)
    EXPECT_EQ(result[i], 2 * (i % kBlock)); // swapped twice
  cudaFree(out);
}

TEST(CudaSimRace, KernelBoundariesOrderEverything) {
  AMPC_REQUIRE_INSTRUMENTED();
  const int n = 1000;
  int *a = deviceAlloc<int>(n), *b = deviceAlloc<int>(n);
  ampc::cuda::launch("iota", iota, 4, kBlock, 0, nullptr, a, n);
  ampc::cuda::launch("reverse", reverse, 4, kBlock, 0, nullptr, a, b, n);
  ampc::cuda::launch("reverse", reverse, 4, kBlock, 0, nullptr, b, a, n);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<int> result(n);
  cudaMemcpy(result.data(), a, n * 4, cudaMemcpyDeviceToHost);
  for (int i = 0; i < n; ++i)
    EXPECT_EQ(result[i], i);
  cudaFree(a);
  cudaFree(b);
}

} // namespace
