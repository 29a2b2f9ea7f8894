//===- CudaSimTest.cpp - the CUDA execution on the CPU, tested ------------===//
//
// Kernels with known results that need CUDA's semantics (shared memory,
// __syncthreads, warp shuffles and votes, atomics), the stream and memory
// rules, and each strict check triggered by a deliberately wrong program.
// Compiled with AMPC_CUDA_SIM, as a --target=cuda-sim library is.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"
#include "ampc/Kernels/Cpu/CpuBackwardKernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// A block-wide tree sum in shared memory: correct only if every thread
/// waits at each __syncthreads for the others.
__global__ void blockSum(const float *in, float *out, int n) {
  AMPC_SHARED(float[256], partial);
  const int t = threadIdx.x;
  float v = 0;
  for (int i = blockIdx.x * blockDim.x + t; i < n; i += gridDim.x * blockDim.x)
    v += in[i];
  partial[t] = v;
  __syncthreads();
  for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (t < stride)
      partial[t] += partial[t + stride];
    __syncthreads();
  }
  if (t == 0)
    atomicAdd(out, partial[0]);
}

/// A warp sum with __shfl_down_sync, then lane 0 of each warp adds.
__global__ void warpSum(const int *in, int *out) {
  int v = in[blockIdx.x * blockDim.x + threadIdx.x];
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_down_sync(0xFFFFFFFFu, v, offset);
  if (threadIdx.x % 32 == 0)
    atomicAdd(out, v);
}

/// Every shuffle and vote once, per lane.
__global__ void shuffles(int *out) {
  const int lane = threadIdx.x % 32;
  out[lane * 6 + 0] = __shfl_sync(0xFFFFFFFFu, lane * 10, 3);
  out[lane * 6 + 1] = __shfl_up_sync(0xFFFFFFFFu, lane, 1);
  out[lane * 6 + 2] = __shfl_xor_sync(0xFFFFFFFFu, lane, 1);
  out[lane * 6 + 3] = static_cast<int>(__ballot_sync(0xFFFFFFFFu, lane % 2));
  out[lane * 6 + 4] = __any_sync(0xFFFFFFFFu, lane == 7);
  out[lane * 6 + 5] = __all_sync(0xFFFFFFFFu, lane < 31);
}

/// Reverses a block's elements through shared memory: a thread reads what
/// another wrote before the barrier.
__global__ void reverseBlock(const int *in, int *out) {
  AMPC_SHARED(int[128], tile);
  tile[threadIdx.x] = in[blockIdx.x * 128 + threadIdx.x];
  __syncthreads();
  out[blockIdx.x * 128 + threadIdx.x] = tile[127 - threadIdx.x];
}

/// Each thread reads its neighbour's shared value: `barrier` says whether a
/// __syncthreads separates the writes from the reads (without it, a race).
__global__ void neighbour(int *out, int round, int barrier) {
  AMPC_SHARED(int[64], tile);
  tile[threadIdx.x] = round * 1000 + threadIdx.x;
  if (barrier)
    __syncthreads();
  out[blockIdx.x * 64 + threadIdx.x] = tile[threadIdx.x < 63 ? threadIdx.x + 1 : 63];
}

/// A barrier only the even threads reach: undefined on a GPU.
__global__ void divergentBarrier(int *out) {
  if (threadIdx.x % 2)
    return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

/// A shuffle that names a lane outside its mask: undefined on a GPU.
__global__ void shuffleOutsideMask(int *out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = __shfl_sync(0x0000FFFFu, 1, 20);
}

/// Each block's first thread writes its block number + 1 to its slot;
/// then, after a grid barrier or not, every thread adds up all the slots
/// (the grid's block count g: g (g + 1) / 2 when the barrier orders the
/// writes before the reads).
__global__ void sumOverBlocks(int *slots, int *out, int barrier) {
  if (threadIdx.x == 0)
    slots[blockIdx.x] = static_cast<int>(blockIdx.x) + 1;
  if (barrier)
    ampc::cuda::gridSync();
  int sum = 0;
  for (unsigned b = 0; b < gridDim.x; ++b)
    sum += slots[b];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

/// A grid barrier that the odd threads of block 0 never reach.
__global__ void divergentGridBarrier(int *out) {
  if (blockIdx.x == 0 && threadIdx.x % 2)
    return;
  ampc::cuda::gridSync();
  out[blockIdx.x * blockDim.x + threadIdx.x] = 1;
}

__global__ void fill(int *out, int value, int n) {
  AMPC_FOR(i, n) out[i] = value;
}

__global__ void copyKernel(const float *in, float *out, int n) {
  AMPC_FOR(i, n) out[i] = in[i];
}

std::string lastMessage(cudaError_t e) { return cudaGetErrorString(e); }

template <typename T> T *deviceAlloc(size_t count) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, count * sizeof(T)), cudaSuccess);
  return static_cast<T *>(p);
}

//===----------------------------------------------------------------------===//
// Known results
//===----------------------------------------------------------------------===//

TEST(CudaSim, SharedMemoryAndSyncthreads) {
  const int n = 5000;
  std::vector<float> host(n);
  for (int i = 0; i < n; ++i)
    host[i] = static_cast<float>(i % 7);
  float *in = deviceAlloc<float>(n), *out = deviceAlloc<float>(1);
  ASSERT_EQ(cudaMemcpy(in, host.data(), n * 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0, 4), cudaSuccess);
  ampc::cuda::launch("blockSum", blockSum, 4, 256, 0, nullptr, in, out, n);
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  float sum = 0;
  ASSERT_EQ(cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sum, std::accumulate(host.begin(), host.end(), 0.0f));
  cudaFree(in);
  cudaFree(out);
}

TEST(CudaSim, SharedMemoryExchangeBetweenThreads) {
  std::vector<int> host(256), result(256);
  std::iota(host.begin(), host.end(), 0);
  int *in = deviceAlloc<int>(256), *out = deviceAlloc<int>(256);
  cudaMemcpy(in, host.data(), 1024, cudaMemcpyHostToDevice);
  ampc::cuda::launch("reverseBlock", reverseBlock, 2, 128, 0, nullptr, in, out);
  ASSERT_EQ(cudaMemcpy(result.data(), out, 1024, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 128; ++t)
      EXPECT_EQ(result[b * 128 + t], b * 128 + 127 - t);
  cudaFree(in);
  cudaFree(out);
}

/// How many of 64 outputs of `neighbour` (2 blocks) are wrong, under the
/// schedule AMPC_CUDA_SIM_SEED=`seed` (null: the default).
int wrongNeighbours(const char *seed, int round, bool barrier) {
  if (seed)
    setenv("AMPC_CUDA_SIM_SEED", seed, 1);
  else
    unsetenv("AMPC_CUDA_SIM_SEED");
  int *out = deviceAlloc<int>(128);
  ampc::cuda::launch("neighbour", neighbour, 2, 64, 0, nullptr, out, round,
                     barrier ? 1 : 0);
  std::vector<int> result(128);
  EXPECT_EQ(cudaMemcpy(result.data(), out, 512, cudaMemcpyDeviceToHost),
            cudaSuccess);
  cudaFree(out);
  unsetenv("AMPC_CUDA_SIM_SEED");
  int wrong = 0;
  for (int t = 0; t < 128; ++t)
    wrong += result[t] != round * 1000 + (t % 64 < 63 ? t % 64 + 1 : 63);
  return wrong;
}

TEST(CudaSim, SeededOrdersExposeAMissingBarrier) {
  // Threads used to run in one fixed reverse order, which happens to write
  // a neighbour's value before it is read: the race gave the right answer
  // every time. A random order per seed gives stale values; with the
  // barrier, every order gives the right ones.
  int round = 1;
  EXPECT_EQ(wrongNeighbours(nullptr, round++, false), 0)
      << "the default reverse order hides the race";
  EXPECT_GT(wrongNeighbours("forward", round++, false), 0);
  int caught = 0;
  for (const char *seed : {"1", "2", "3", "0x5eed"})
    caught += wrongNeighbours(seed, round++, false) > 0;
  EXPECT_EQ(caught, 4) << "every random order catches it";
  for (const char *seed : {"reverse", "forward", "1", "2", "3", "0x5eed"})
    EXPECT_EQ(wrongNeighbours(seed, round++, true), 0) << seed;
}

/// How many of sumOverBlocks' outputs are wrong in a cooperative launch of
/// as many blocks of 64 threads as the device holds at once, under the
/// schedule AMPC_CUDA_SIM_SEED=`seed`; `blocks` is set to the grid's size.
int wrongSumsOverBlocks(const char *seed, bool barrier, int &blocks) {
  setenv("AMPC_CUDA_SIM_SEED", seed, 1);
  const int most = 1 << 10;
  int *slots = deviceAlloc<int>(most), *out = deviceAlloc<int>(most * 64);
  EXPECT_EQ(cudaMemset(slots, 0, most * 4), cudaSuccess);
  EXPECT_EQ(cudaMemset(out, 0, most * 64 * 4), cudaSuccess);
  ampc::cuda::launchCooperative("sumOverBlocks", sumOverBlocks, most, 64, 0,
                                nullptr, slots, out, barrier ? 1 : 0);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  std::vector<int> result(most * 64);
  EXPECT_EQ(
      cudaMemcpy(result.data(), out, result.size() * 4, cudaMemcpyDeviceToHost),
      cudaSuccess);
  cudaFree(slots);
  cudaFree(out);
  unsetenv("AMPC_CUDA_SIM_SEED");
  // The grid is the blocks that wrote an output.
  blocks = 0;
  while (blocks < most && result[blocks * 64] != 0)
    ++blocks;
  int wrong = 0;
  for (int i = 0; i < blocks * 64; ++i)
    wrong += result[i] != blocks * (blocks + 1) / 2;
  return wrong;
}

TEST(CudaSim, GridBarrierOrdersEveryBlockBeforeEveryOther) {
  // What the device holds at once: the grid launchCooperative chooses.
  int perMultiprocessor = 0, multiprocessors = 0;
  ASSERT_EQ(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perMultiprocessor,
                                                          sumOverBlocks, 64, 0),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceGetAttribute(&multiprocessors,
                                   cudaDevAttrMultiProcessorCount, 0),
            cudaSuccess);
  cudaDeviceProp prop;
  ASSERT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(prop.multiProcessorCount, multiprocessors);
  EXPECT_EQ(perMultiprocessor, 32); // 2048 threads and 32 blocks per SM
  for (const char *seed : {"reverse", "forward", "1", "2", "3", "0x5eed"}) {
    int blocks = 0;
    EXPECT_EQ(wrongSumsOverBlocks(seed, true, blocks), 0) << seed;
    EXPECT_EQ(blocks, perMultiprocessor * multiprocessors) << seed;
  }
  // Without the barrier a block reads slots not yet written, in any order
  // of the blocks (the reverse one: every block but the last).
  int caught = 0;
  for (const char *seed : {"reverse", "forward", "1", "2", "3", "0x5eed"}) {
    int blocks = 0;
    caught += wrongSumsOverBlocks(seed, false, blocks) > 0;
  }
  EXPECT_EQ(caught, 6);
}

TEST(CudaSim, WarpShuffleSum) {
  std::vector<int> host(512);
  std::iota(host.begin(), host.end(), 1);
  int *in = deviceAlloc<int>(512), *out = deviceAlloc<int>(1);
  cudaMemcpy(in, host.data(), 2048, cudaMemcpyHostToDevice);
  cudaMemset(out, 0, 4);
  ampc::cuda::launch("warpSum", warpSum, 2, 256, 0, nullptr, in, out);
  int sum = 0;
  ASSERT_EQ(cudaMemcpy(&sum, out, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sum, 512 * 513 / 2);
  cudaFree(in);
  cudaFree(out);
}

TEST(CudaSim, ShufflesAndVotes) {
  int *out = deviceAlloc<int>(32 * 6);
  ampc::cuda::launch("shuffles", shuffles, 1, 32, 0, nullptr, out);
  std::vector<int> r(32 * 6);
  ASSERT_EQ(cudaMemcpy(r.data(), out, r.size() * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  for (int lane = 0; lane < 32; ++lane) {
    EXPECT_EQ(r[lane * 6 + 0], 30);
    EXPECT_EQ(r[lane * 6 + 1], lane == 0 ? 0 : lane - 1); // lane 0 keeps its own
    EXPECT_EQ(r[lane * 6 + 2], lane ^ 1);
    EXPECT_EQ(static_cast<unsigned>(r[lane * 6 + 3]), 0xAAAAAAAAu);
    EXPECT_EQ(r[lane * 6 + 4], 1);
    EXPECT_EQ(r[lane * 6 + 5], 0);
  }
  cudaFree(out);
}

/// The pools channels-last (`channels` C: NHWC tensors, MaxPool's index
/// the NHWC flat index ((n·H + h)·W + w)·C + c) against NCHW on permuted
/// data: the same bits (each element from the same terms in the same
/// order), the indices mapped, for padded, strided, dilated and ceil-mode
/// windows with many ties (MaxPool's adjoint then sums several windows).
TEST(CudaSim, ChannelsLastPoolsAreNchwPermuted) {
  struct Case {
    int64_t in[2], out[2], kernel[2], stride[2], padBegin[2], padEnd[2],
        dilation[2];
  };
  const Case cases[] = {
      {{8, 7}, {4, 4}, {3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}},
      {{7, 9}, {7, 4}, {3, 2}, {1, 2}, {1, 0}, {1, 1}, {1, 2}},
      {{5, 5}, {3, 3}, {2, 2}, {2, 2}, {0, 0}, {1, 1}, {1, 1}}, // ceil mode
  };
  const int64_t n = 2, c = 3, planes = n * c;
  int64_t shared = 0;
  uint32_t seed = 777;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  // NCHW <-> NHWC of planes x size.
  auto toNhwc = [&](const auto &v, int64_t size) {
    auto out = v;
    for (int64_t q = 0; q < planes; ++q)
      for (int64_t i = 0; i < size; ++i)
        out[ampc::cuda::planeElement(q, i, size, c)] = v[q * size + i];
    return out;
  };
  for (const Case &k : cases) {
    ampc::cuda::Window w{};
    w.rank = 2;
    for (int d = 0; d < 2; ++d) {
      w.in[d] = k.in[d], w.out[d] = k.out[d], w.kernel[d] = k.kernel[d];
      w.stride[d] = k.stride[d], w.padBegin[d] = k.padBegin[d];
      w.padEnd[d] = k.padEnd[d], w.dilation[d] = k.dilation[d];
    }
    const int64_t inCount = planes * w.inSize(), outCount = planes * w.outSize();
    std::vector<float> x(inCount), grad(outCount);
    for (float &v : x)
      v = static_cast<float>(next() >> 29) * 0.3f;
    for (float &v : grad)
      v = static_cast<float>(static_cast<int32_t>(next() >> 8)) * 1e-3f;
    float *dX = deviceAlloc<float>(inCount), *dY = deviceAlloc<float>(outCount),
          *dGrad = deviceAlloc<float>(outCount),
          *dDx = deviceAlloc<float>(inCount);
    int64_t *dIndices = deviceAlloc<int64_t>(outCount);
    // Every pool in one layout (`channels` 0 or C), from NCHW `x`, `grad`;
    // the results in that layout.
    struct Results {
      std::vector<float> maxY, maxDx, avgY, avgDx;
      std::vector<int64_t> indices;
    };
    auto run = [&](int64_t channels, bool includePad) {
      const std::vector<float> xs = channels ? toNhwc(x, w.inSize()) : x,
                               gs = channels ? toNhwc(grad, w.outSize()) : grad;
      Results r{std::vector<float>(outCount), std::vector<float>(inCount),
                std::vector<float>(outCount), std::vector<float>(inCount),
                std::vector<int64_t>(outCount)};
      cudaMemcpy(dX, xs.data(), inCount * 4, cudaMemcpyHostToDevice);
      cudaMemcpy(dGrad, gs.data(), outCount * 4, cudaMemcpyHostToDevice);
      using F = ampc::cuda::As<float>;
      ampc::cuda::launch("maxPool", ampc::cuda::maxPool<float, F, F>,
                         ampc::cuda::blocks(outCount), ampc::cuda::kThreads, 0,
                         nullptr, dX, dY, dIndices, planes, w, false, channels);
      cudaMemcpy(r.maxY.data(), dY, outCount * 4, cudaMemcpyDeviceToHost);
      cudaMemcpy(r.indices.data(), dIndices, outCount * 8, cudaMemcpyDeviceToHost);
      ampc::cuda::launch("maxPoolGrad", ampc::cuda::maxPoolGrad<float, F, F>,
                         ampc::cuda::blocks(inCount), ampc::cuda::kThreads, 0,
                         nullptr, dGrad, dIndices, dDx, planes, w, false,
                         channels);
      cudaMemcpy(r.maxDx.data(), dDx, inCount * 4, cudaMemcpyDeviceToHost);
      ampc::cuda::launch("averagePool", ampc::cuda::averagePool<float, F, F>,
                         ampc::cuda::blocks(outCount), ampc::cuda::kThreads, 0,
                         nullptr, dX, dY, planes, w, includePad, channels);
      cudaMemcpy(r.avgY.data(), dY, outCount * 4, cudaMemcpyDeviceToHost);
      ampc::cuda::launch("averagePoolGrad",
                         ampc::cuda::averagePoolGrad<float, F, F>,
                         ampc::cuda::blocks(inCount), ampc::cuda::kThreads, 0,
                         nullptr, dGrad, dDx, planes, w, includePad, channels);
      cudaMemcpy(r.avgDx.data(), dDx, inCount * 4, cudaMemcpyDeviceToHost);
      EXPECT_EQ(cudaGetLastError(), cudaSuccess);
      return r;
    };
    for (bool includePad : {false, true}) {
      const Results nchw = run(0, includePad), nhwc = run(c, includePad);
      EXPECT_EQ(nhwc.maxY, toNhwc(nchw.maxY, w.outSize()));
      EXPECT_EQ(nhwc.maxDx, toNhwc(nchw.maxDx, w.inSize()));
      EXPECT_EQ(nhwc.avgY, toNhwc(nchw.avgY, w.outSize()));
      EXPECT_EQ(nhwc.avgDx, toNhwc(nchw.avgDx, w.inSize()));
      // NCHW's index q·inSize + s is NHWC's planeElement(q, s): with
      // q = n·C + ch and s = h·W + w, ((n·H + h)·W + w)·C + ch.
      std::vector<int64_t> mapped(outCount);
      for (int64_t i = 0; i < outCount; ++i) {
        const int64_t at = nchw.indices[i];
        mapped[i] = at < 0 ? -1
                           : ampc::cuda::planeElement(at / w.inSize(),
                                                      at % w.inSize(),
                                                      w.inSize(), c);
      }
      EXPECT_EQ(nhwc.indices, toNhwc(mapped, w.outSize()));
      // The index is the argmax's place in the NHWC input.
      const std::vector<float> xs = toNhwc(x, w.inSize());
      for (int64_t e = 0; e < outCount; ++e)
        if (nhwc.indices[e] >= 0)
          EXPECT_EQ(xs[nhwc.indices[e]], nhwc.maxY[e]);
      for (int64_t i = 0; i < outCount; ++i)
        shared += std::count(nchw.indices.begin(), nchw.indices.end(),
                             nchw.indices[i]) > 1;
    }
    for (void *p : {static_cast<void *>(dX), static_cast<void *>(dY),
                    static_cast<void *>(dGrad), static_cast<void *>(dDx),
                    static_cast<void *>(dIndices)})
      cudaFree(p);
  }
  // Not vacuous: ties send several windows' gradients to one element.
  EXPECT_GT(shared, 0);
}

/// MaxPool's adjoint gathers on the CUDA target (each input element sums
/// the gradients of the windows that picked it) and scatters on the CPU:
/// the same bits, for overlapping windows with many ties (values from a
/// small set, so neighbouring windows pick one element), padding,
/// dilation, 1 to 3 spatial dimensions and both storage orders.
TEST(CudaSim, MaxPoolGradGatherMatchesCpuScatter) {
  struct Case {
    int rank;
    int64_t in[3], kernel[3], stride[3], pad[3], dilation[3];
  };
  const Case cases[] = {
      {2, {16, 16}, {3, 3}, {2, 2}, {1, 1}, {1, 1}},  // resnet's
      {2, {7, 9}, {3, 2}, {1, 1}, {1, 0}, {1, 1}},
      {1, {23}, {4}, {3}, {2}, {2}},
      {3, {5, 6, 4}, {2, 3, 2}, {1, 2, 1}, {0, 1, 1}, {1, 1, 2}},
  };
  uint32_t seed = 12345;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  for (const Case &c : cases)
    for (bool columnMajor : {false, true}) {
      ampc::cpu::Window cw{};
      cw.rank = c.rank;
      for (int d = 0; d < c.rank; ++d) {
        cw.in[d] = c.in[d], cw.kernel[d] = c.kernel[d];
        cw.stride[d] = c.stride[d], cw.dilation[d] = c.dilation[d];
        cw.padBegin[d] = cw.padEnd[d] = c.pad[d];
        cw.out[d] = (c.in[d] + 2 * c.pad[d] -
                     (c.kernel[d] - 1) * c.dilation[d] - 1) /
                        c.stride[d] +
                    1;
      }
      const int64_t planes = 3, inCount = planes * cw.inSize(),
                    outCount = planes * cw.outSize();
      std::vector<float> x(inCount), grad(outCount), cpu(inCount),
          gathered(inCount), y(outCount), acc(inCount);
      for (float &v : x)
        v = static_cast<float>(next() >> 29);
      for (float &v : grad)
        v = static_cast<float>(static_cast<int32_t>(next() >> 8)) * 1e-3f;
      std::vector<int64_t> indices(outCount),
          offsets(cw.outSize() * cw.kernelSize()),
          reported(cw.outSize() * cw.kernelSize());
      ampc::cpu::maxPool<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(
          x.data(), y.data(), indices.data(), planes, cw, columnMajor,
          offsets.data(), reported.data());
      ampc::cpu::maxPoolGrad<float, ampc::cpu::As<float>, ampc::cpu::As<float>>(
          grad.data(), indices.data(), cpu.data(), planes, cw, columnMajor,
          acc.data());
      ampc::cuda::Window w{};
      static_assert(sizeof(w) == sizeof(cw), "one window layout");
      std::memcpy(&w, &cw, sizeof(w));
      float *dGrad = deviceAlloc<float>(outCount),
            *dX = deviceAlloc<float>(inCount);
      int64_t *dIndices = deviceAlloc<int64_t>(outCount);
      ASSERT_EQ(cudaMemcpy(dGrad, grad.data(), outCount * 4,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dIndices, indices.data(), outCount * 8,
                           cudaMemcpyHostToDevice),
                cudaSuccess);
      ampc::cuda::launch(
          "maxPoolGrad",
          ampc::cuda::maxPoolGrad<float, ampc::cuda::As<float>,
                                  ampc::cuda::As<float>>,
          ampc::cuda::blocks(inCount), ampc::cuda::kThreads, 0, nullptr,
          dGrad, dIndices, dX, planes, w, columnMajor, int64_t(0));
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(gathered.data(), dX, inCount * 4,
                           cudaMemcpyDeviceToHost),
                cudaSuccess);
      EXPECT_EQ(std::memcmp(gathered.data(), cpu.data(), inCount * 4), 0)
          << "rank " << c.rank << (columnMajor ? ", column-major" : "");
      // Ties: some element collects more than one window's gradient.
      int64_t picked = 0;
      for (int64_t i = 0; i < outCount; ++i)
        picked += std::count(indices.begin(), indices.end(), indices[i]) > 1;
      EXPECT_GT(picked, 0);
      cudaFree(dGrad);
      cudaFree(dX);
      cudaFree(dIndices);
    }
}

/// nll_loss_grad with log_prob (SoftmaxCrossEntropyLoss's adjoint in one
/// kernel) on the CUDA target against the CPU target's nllLossGrad +
/// softmaxLossGrad, bit for bit, and against the unfused adjoint it
/// replaces (the NLL gradient, its row sums in index order, then
/// g − exp(logp)·sum): class weights, ignore_index, a spatial axis, each
/// reduction, a zero upstream gradient (signed zeros).
TEST(CudaSim, SoftmaxLossGradMatchesCpuAndTheUnfusedAdjoint) {
  const int64_t n = 5, classes = 7, inner = 3, count = n * classes * inner;
  uint32_t seed = 777;
  auto next = [&] { return seed = seed * 1664525u + 1013904223u; };
  std::vector<float> logp(count), weights(classes);
  std::vector<int64_t> labels(n * inner);
  for (float &v : logp)
    v = -static_cast<float>(next() >> 8) * 1e-6f;
  for (float &v : weights)
    v = 0.25f + static_cast<float>(next() >> 24) / 64.0f;
  for (int64_t &t : labels)
    t = next() % 9 < 7 ? static_cast<int64_t>(next() % classes) : -100;
  using Reduction = ampc::cpu::LossReduction;
  for (Reduction reduction :
       {ampc::cpu::LossNone, ampc::cpu::LossSum, ampc::cpu::LossMean})
    for (float upstream : {1.5f, 0.0f}) {
      const int64_t grads = reduction == ampc::cpu::LossNone ? n * inner : 1;
      std::vector<float> grad(grads);
      for (int64_t i = 0; i < grads; ++i)
        grad[i] = upstream * (1.0f + static_cast<float>(i % 4));
      // The CPU target: the NLL gradient, then the adjoint in place.
      std::vector<float> cpu(count);
      ASSERT_TRUE(ampc::cpu::nllLossGrad<float>(
          grad.data(), labels.data(), weights.data(), n, classes, inner, true,
          -100, reduction, cpu.data()));
      std::vector<float> unfused = cpu;
      ampc::cpu::softmaxLossGrad<float>(cpu.data(), logp.data(), labels.data(),
                                        n, classes, inner, true, -100);
      // The adjoint before the fusion: row sums in index order from 0.
      for (int64_t b = 0; b < n; ++b)
        for (int64_t j = 0; j < inner; ++j) {
          float sum = 0;
          for (int64_t c = 0; c < classes; ++c)
            sum += unfused[(b * classes + c) * inner + j];
          for (int64_t c = 0; c < classes; ++c) {
            float &g = unfused[(b * classes + c) * inner + j];
            const float e = std::exp(logp[(b * classes + c) * inner + j]);
            const float scaled = e * sum;
            g = g - scaled;
          }
        }
      EXPECT_EQ(std::memcmp(cpu.data(), unfused.data(), count * 4), 0);
      float *dGrad = deviceAlloc<float>(grads), *dW = deviceAlloc<float>(classes),
            *dLogp = deviceAlloc<float>(count), *dOut = deviceAlloc<float>(count);
      int64_t *dLabels = deviceAlloc<int64_t>(n * inner);
      int32_t *dError = deviceAlloc<int32_t>(1);
      ASSERT_EQ(cudaMemcpy(dGrad, grad.data(), grads * 4, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dW, weights.data(), classes * 4, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dLogp, logp.data(), count * 4, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dLabels, labels.data(), n * inner * 8, cudaMemcpyHostToDevice), cudaSuccess);
      ASSERT_EQ(cudaMemset(dError, 0, 4), cudaSuccess);
      using F = ampc::cuda::As<float>;
      ampc::cuda::launch("nllLossGrad",
                         ampc::cuda::nllLossGrad<float, F, F, F, int64_t>,
                         ampc::cuda::blocks(count), ampc::cuda::kThreads, 0,
                         nullptr, dGrad, dLabels, dW, dLogp, n, classes, inner,
                         true, int64_t(-100),
                         static_cast<ampc::cuda::LossReduction>(reduction),
                         dOut, dError, 1);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      std::vector<float> gpu(count);
      int32_t error = -1;
      ASSERT_EQ(cudaMemcpy(gpu.data(), dOut, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(&error, dError, 4, cudaMemcpyDeviceToHost), cudaSuccess);
      EXPECT_EQ(error, 0);
      EXPECT_EQ(std::memcmp(gpu.data(), cpu.data(), count * 4), 0)
          << "reduction " << reduction << ", upstream " << upstream;
      for (void *p : std::initializer_list<void *>{dGrad, dW, dLogp, dOut, dLabels, dError})
        cudaFree(p);
    }
}

/// The pairwise sum the reductions use, without recursion, adds in the
/// CPU target's order (bit for bit) for sizes around the block boundaries.
TEST(CudaSim, PairwiseSumMatchesRecursiveOrder) {
  struct Recursive {
    static float sum(const std::vector<float> &v, int64_t b, int64_t e) {
      if (e - b <= 64) {
        float s = 0;
        for (int64_t i = b; i < e; ++i)
          s += v[i];
        return s;
      }
      const int64_t m = b + (e - b) / 2;
      return sum(v, b, m) + sum(v, m, e);
    }
  };
  std::vector<float> v(100000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = std::sin(static_cast<float>(i)) * 1000.0f + 1e-3f * i;
  for (int64_t n : {0, 1, 63, 64, 65, 127, 128, 129, 1000, 4097, 65536, 99999}) {
    float iterative = ampc::cuda::pairwiseSum<float>(
        0, n, [&](int64_t i) { return v[i]; });
    EXPECT_EQ(iterative, Recursive::sum(v, 0, n)) << n;
  }
}

/// BatchNorm's one-pass statistics: math::pairwiseMoments (the CPU
/// target's channelStatistics) equals its tree cut at any depth whose nodes
/// above all split, the nodes' moments combined pairwise in tree order (the
/// CUDA kernels' split over threads and blocks), bit for bit; and it is the
/// mean and population variance within rounding.
TEST(CudaSim, PairwiseMomentsSplitAnywhere) {
  using ampc::math::Moments;
  std::vector<float> v(70000);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = 100.0f + std::sin(static_cast<float>(i)) * 3.0f;
  auto value = [&](int64_t j) { return v[j]; };
  for (int64_t n : {1, 64, 65, 129, 1000, 4097, 65536, 69999}) {
    const Moments<float> whole = ampc::math::pairwiseMoments<float>(0, n, value);
    for (int depth = 0; depth < 8 && (depth == 0 || n / (int64_t(1) << (depth - 1)) > 64);
         ++depth) {
      if (depth > 0 && n / (int64_t(1) << depth) < 1)
        break;
      std::vector<Moments<float>> level;
      for (int64_t k = 0; k < (int64_t(1) << depth); ++k) {
        int64_t b = 0, e = n;
        for (int d = 0; d < depth; ++d) {
          const int64_t m = b + (e - b) / 2;
          if ((k >> (depth - 1 - d)) & 1)
            b = m;
          else
            e = m;
        }
        level.push_back(ampc::math::pairwiseMoments<float>(b, e, value));
      }
      while (level.size() > 1) {
        std::vector<Moments<float>> up;
        for (size_t k = 0; k < level.size(); k += 2)
          up.push_back(ampc::math::combineMoments(level[k], level[k + 1]));
        level = up;
      }
      EXPECT_EQ(level[0].count, n);
      EXPECT_EQ(level[0].mean, whole.mean) << n << " depth " << depth;
      EXPECT_EQ(level[0].m2, whole.m2) << n << " depth " << depth;
    }
    double sum = 0, m2 = 0;
    for (int64_t j = 0; j < n; ++j)
      sum += v[j];
    const double mean = sum / n;
    for (int64_t j = 0; j < n; ++j)
      m2 += (v[j] - mean) * (v[j] - mean);
    EXPECT_NEAR(whole.mean, mean, 1e-5 * std::abs(mean)) << n;
    EXPECT_NEAR(whole.m2 / n, m2 / n, 1e-4 * (m2 / n) + 1e-6) << n;
  }
}

/// gather_grad's bucket sort: correct for any order, and its comparisons
/// stay O(n log n) for a bucket filled in reverse (one row named by every
/// index, slots claimed last first), O(n) for one filled in order.
TEST(CudaSim, BucketSortIsNLogNForAnyOrder) {
  struct Counted {
    int64_t v;
    static int64_t &comparisons() {
      static int64_t c = 0;
      return c;
    }
    bool operator<(const Counted &o) const {
      ++comparisons();
      return v < o.v;
    }
  };
  auto sortCounting = [](std::vector<Counted> v) {
    Counted::comparisons() = 0;
    ampc::cuda::sortAscending(v.data(), static_cast<int64_t>(v.size()));
    for (size_t i = 0; i < v.size(); ++i)
      EXPECT_EQ(v[i].v, static_cast<int64_t>(i));
    return Counted::comparisons();
  };
  const int64_t n = 20000;
  std::vector<Counted> inOrder(n), reversed(n), shuffled(n);
  for (int64_t i = 0; i < n; ++i) {
    inOrder[i].v = i;
    reversed[i].v = n - 1 - i;
    shuffled[i].v = (i * 7919) % n; // 7919 is prime to 20000: a permutation
  }
  // Insertion sort alone: n^2 / 2 = 2e8 comparisons reversed.
  const int64_t nLogN = n * 15; // log2(20000) < 15
  EXPECT_LE(sortCounting(reversed), 2 * nLogN + 10 * n);
  EXPECT_LE(sortCounting(shuffled), 2 * nLogN + 10 * n);
  EXPECT_LE(sortCounting(inOrder), n);
  for (int64_t small : {0, 1, 2, 3, 33}) {
    std::vector<Counted> v(small);
    for (int64_t i = 0; i < small; ++i)
      v[i].v = small - 1 - i;
    sortCounting(v);
  }
}

//===----------------------------------------------------------------------===//
// Streams and memory
//===----------------------------------------------------------------------===//

TEST(CudaSim, FreshDeviceMemoryIsSignallingNaN) {
  float *p = deviceAlloc<float>(4), host[4];
  ASSERT_EQ(cudaMemcpy(host, p, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  for (float v : host)
    EXPECT_TRUE(std::isnan(v));
  cudaFree(p);
}

/// A pageable host-to-device cudaMemcpy on the legacy stream is unordered
/// with a non-blocking stream: a kernel there may see the old contents.
TEST(CudaSim, PageableCopyIsUnorderedWithNonBlockingStream) {
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  float *a = deviceAlloc<float>(1), *b = deviceAlloc<float>(1);
  float one = 1, two = 2, result = 0;
  cudaMemcpy(a, &one, 4, cudaMemcpyHostToDevice);
  cudaDeviceSynchronize();
  cudaMemcpy(a, &two, 4, cudaMemcpyHostToDevice); // lands late
  ampc::cuda::launch("copyKernel", copyKernel, 1, 32, 0, s, a, b, 1);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  cudaMemcpyAsync(&result, b, 4, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  EXPECT_EQ(result, 1.0f) << "the kernel saw the copy that CUDA does not order before it";
  // Ordered on the stream, the new value is seen.
  cudaMemcpyAsync(a, &two, 4, cudaMemcpyHostToDevice, s);
  ampc::cuda::launch("copyKernel", copyKernel, 1, 32, 0, s, a, b, 1);
  cudaMemcpyAsync(&result, b, 4, cudaMemcpyDeviceToHost, s);
  cudaStreamSynchronize(s);
  EXPECT_EQ(result, 2.0f);
  cudaStreamDestroy(s);
  cudaFree(a);
  cudaFree(b);
}

/// Work runs only when something waits for it: a device-to-host copy into
/// the caller's pinned buffer has not happened when cudaMemcpyAsync
/// returns (into pageable memory it is synchronous: CudaSimStreamsTest).
TEST(CudaSim, AsyncCopyLandsOnlyAfterSynchronize) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int *d = deviceAlloc<int>(1);
  ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 7, 1);
  int *host = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void **>(&host), 4), cudaSuccess);
  *host = 0;
  cudaMemcpyAsync(host, d, 4, cudaMemcpyDeviceToHost, s);
  EXPECT_EQ(*host, 0);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  cudaStreamSynchronize(s);
  EXPECT_EQ(*host, 7);
  cudaFreeHost(host);
  cudaStreamDestroy(s);
  cudaFree(d);
}

/// Events order work across streams.
TEST(CudaSim, EventsOrderStreams) {
  cudaStream_t a, b;
  cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking);
  cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking);
  cudaEvent_t e;
  cudaEventCreate(&e);
  int *d = deviceAlloc<int>(2);
  ampc::cuda::launch("fill", fill, 1, 32, 0, a, d, 5, 2);
  cudaEventRecord(e, a);
  cudaStreamWaitEvent(b, e, 0);
  int host[2] = {0, 0};
  cudaMemcpyAsync(host, d, 8, cudaMemcpyDeviceToHost, b);
  cudaStreamSynchronize(b);
  EXPECT_EQ(host[0], 5);
  EXPECT_EQ(host[1], 5);
  cudaEventDestroy(e);
  cudaStreamDestroy(a);
  cudaStreamDestroy(b);
  cudaFree(d);
}

/// A stream capture replays its work on every launch of the graph.
TEST(CudaSim, GraphCaptureReplays) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int *d = deviceAlloc<int>(4), *e = deviceAlloc<int>(4);
  int *pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void **>(&pinned), 16), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 3, 4);
  cudaMemcpyAsync(e, pinned, 16, cudaMemcpyHostToDevice, s); // pinned: capturable
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  int host[4] = {0, 0, 0, 0};
  cudaMemcpy(host, d, 16, cudaMemcpyDeviceToHost);
  EXPECT_NE(host[0], 3) << "captured work ran before the graph was launched";
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 4; ++i)
      pinned[i] = 10 * round + i;
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
    cudaMemcpy(host, e, 16, cudaMemcpyDeviceToHost);
    EXPECT_EQ(host[3], 10 * round + 3); // read when the replay ran
    cudaMemcpy(host, d, 16, cudaMemcpyDeviceToHost);
    EXPECT_EQ(host[0], 3);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaFreeHost(pinned);
  cudaStreamDestroy(s);
  cudaFree(d);
  cudaFree(e);
}

void CUDART_CB callsCuda(void *flag) {
  *static_cast<cudaError_t *>(flag) = cudaDeviceSynchronize();
}

//===----------------------------------------------------------------------===//
// Strict checks, each triggered once
//===----------------------------------------------------------------------===//

// Launch-time failures are not sticky: each test reads its own error.

TEST(CudaSimStrict, BlockOver1024Threads) {
  int *d = deviceAlloc<int>(1);
  ampc::cuda::launch("fill", fill, 1, 2048, 0, nullptr, d, 1, 1);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidConfiguration);
  EXPECT_NE(lastMessage(e).find("fill"), std::string::npos);
  EXPECT_NE(lastMessage(e).find("outside the device's limits"), std::string::npos);
  cudaFree(d);
}

TEST(CudaSimStrict, ThreadsPerBlockProduct) {
  int *d = deviceAlloc<int>(1);
  ampc::cuda::launch("fill", fill, 1, dim3(64, 32), 0, nullptr, d, 1, 1);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidConfiguration);
  EXPECT_NE(lastMessage(e).find("more than 1024 threads"), std::string::npos);
  cudaFree(d);
}

TEST(CudaSimStrict, GridDimensionOverLimit) {
  int *d = deviceAlloc<int>(1);
  ampc::cuda::launch("fill", fill, dim3(1, 70000), 32, 0, nullptr, d, 1, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  cudaFree(d);
}

TEST(CudaSimStrict, SharedMemoryOverLimit) {
  int *d = deviceAlloc<int>(1);
  ampc::cuda::launch("fill", fill, 1, 32, 64 << 10, nullptr, d, 1, 1);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(lastMessage(e).find("dynamic shared memory"), std::string::npos);
  cudaFree(d);
}

struct Huge {
  char bytes[40000];
};
__global__ void hugeParameters(Huge, int *) {}

TEST(CudaSimStrict, KernelParametersOverLimit) {
  int *d = deviceAlloc<int>(1);
  static Huge huge;
  ampc::cuda::launch("hugeParameters", hugeParameters, 1, 32, 0, nullptr, huge, d);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(lastMessage(e).find("kernel parameters"), std::string::npos);
  cudaFree(d);
}

TEST(CudaSimStrict, HostPointerAsKernelArgument) {
  std::vector<int> host(4);
  ampc::cuda::launch("fill", fill, 1, 32, 0, nullptr, host.data(), 1, 4);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidDevicePointer);
  EXPECT_NE(lastMessage(e).find("host pointer"), std::string::npos);
  EXPECT_NE(lastMessage(e).find("kernel fill"), std::string::npos);
}

TEST(CudaSimStrict, UseAfterFree) {
  int *d = deviceAlloc<int>(4);
  cudaFree(d);
  ampc::cuda::launch("fill", fill, 1, 32, 0, nullptr, d, 1, 4);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorInvalidDevicePointer);
  EXPECT_NE(lastMessage(e).find("use after free"), std::string::npos);
  int host = 0;
  e = cudaMemcpy(&host, d, 4, cudaMemcpyDeviceToHost);
  EXPECT_NE(e, cudaSuccess);
  cudaGetLastError();
}

TEST(CudaSimStrict, CopyPastTheEndOfAnAllocation) {
  int *d = deviceAlloc<int>(4);
  int host[8] = {};
  cudaError_t e = cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice);
  EXPECT_EQ(e, cudaErrorInvalidValue);
  EXPECT_NE(lastMessage(e).find("runs past the end"), std::string::npos);
  cudaGetLastError();
  cudaFree(d);
}

TEST(CudaSimStrict, CopyKindContradictsPointers) {
  int *d = deviceAlloc<int>(4);
  int host[4] = {};
  cudaError_t e = cudaMemcpy(host, d, 16, cudaMemcpyHostToDevice);
  EXPECT_NE(e, cudaSuccess);
  cudaGetLastError();
  cudaFree(d);
}

TEST(CudaSimStrict, PageableCopyInvalidatesCapture) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  int *d = deviceAlloc<int>(4);
  int host[4] = {};
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  cudaError_t e = cudaMemcpyAsync(d, host, 16, cudaMemcpyHostToDevice, s);
  EXPECT_EQ(e, cudaErrorStreamCaptureUnsupported);
  EXPECT_NE(lastMessage(e).find("pageable host memory in a stream capture"),
            std::string::npos);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST(CudaSimStrict, SynchronizeWhileCapturing) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
  cudaGraph_t graph;
  EXPECT_EQ(cudaStreamEndCapture(s, &graph), cudaErrorStreamCaptureInvalidated);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST(CudaSimStrict, CudaCallFromHostFunction) {
  cudaStream_t s;
  cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
  cudaError_t inside = cudaSuccess;
  cudaLaunchHostFunc(s, callsCuda, &inside);
  cudaStreamSynchronize(s);
  EXPECT_EQ(inside, cudaErrorNotPermitted);
  cudaGetLastError();
  cudaStreamDestroy(s);
}

TEST(CudaSimStrict, CooperativeGridLargerThanTheDeviceHolds) {
  int perMultiprocessor = 0, multiprocessors = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perMultiprocessor,
                                                sumOverBlocks, 64, 0);
  cudaDeviceGetAttribute(&multiprocessors, cudaDevAttrMultiProcessorCount, 0);
  const unsigned resident = perMultiprocessor * multiprocessors;
  int *slots = deviceAlloc<int>(resident + 1);
  int *out = deviceAlloc<int>((resident + 1) * 64);
  ampc::sim::launchCooperative("sumOverBlocks", sumOverBlocks, resident + 1, 64,
                               0, nullptr, slots, out, 1);
  cudaError_t e = cudaGetLastError();
  EXPECT_EQ(e, cudaErrorCooperativeLaunchTooLarge);
  EXPECT_NE(lastMessage(e).find("kernel sumOverBlocks launch: a cooperative "
                                "grid of " +
                                std::to_string(resident + 1) + " blocks"),
            std::string::npos)
      << lastMessage(e);
  // As many as it holds run.
  ampc::sim::launchCooperative("sumOverBlocks", sumOverBlocks, resident, 64, 0,
                               nullptr, slots, out, 1);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(slots);
  cudaFree(out);
}

// Failures while work runs are sticky, as a device fault is: each runs in
// a child process (a death test), which checks the stickiness and exits 0.

TEST(CudaSimStrictDeathTest, DivergentBarrierIsStickyFailure) {
  EXPECT_EXIT(
      {
        int *d = deviceAlloc<int>(256);
        ampc::cuda::launch("divergentBarrier", divergentBarrier, 1, 64, 0,
                           nullptr, d);
        bool ok = cudaGetLastError() == cudaSuccess; // the launch is fine
        cudaError_t e = cudaDeviceSynchronize();
        ok &= e == cudaErrorLaunchFailure &&
              lastMessage(e).find("divergentBarrier") != std::string::npos;
        ok &= cudaMemset(d, 0, 4) == cudaErrorLaunchFailure; // sticky
        ok &= cudaGetLastError() == cudaErrorLaunchFailure;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "divergent barrier");
}

TEST(CudaSimStrictDeathTest, AFailureNamesTheSeedToReplay) {
  EXPECT_EXIT(
      {
        setenv("AMPC_CUDA_SIM_SEED", "42", 1);
        int *d = deviceAlloc<int>(256);
        ampc::cuda::launch("divergentBarrier", divergentBarrier, 1, 64, 0,
                           nullptr, d);
        cudaError_t e = cudaDeviceSynchronize();
        std::exit(e == cudaErrorLaunchFailure &&
                          lastMessage(e).find("(AMPC_CUDA_SIM_SEED=42)") !=
                              std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "AMPC_CUDA_SIM_SEED=42");
}

TEST(CudaSimStrictDeathTest, ShuffleFromLaneOutsideMask) {
  EXPECT_EXIT(
      {
        int *d = deviceAlloc<int>(32);
        ampc::cuda::launch("shuffleOutsideMask", shuffleOutsideMask, 1, 32, 0,
                           nullptr, d);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "reads lane 20, which is not in the mask");
}

TEST(CudaSimStrictDeathTest, GridBarrierSomeThreadsNeverReach) {
  EXPECT_EXIT(
      {
        int *d = deviceAlloc<int>(4 * 64);
        ampc::cuda::launchCooperative(
            "divergentGridBarrier", divergentGridBarrier, 4, 64, 0, nullptr, d);
        bool ok = cudaGetLastError() == cudaSuccess; // the launch is fine
        ok &= cudaDeviceSynchronize() == cudaErrorLaunchFailure;
        ok &= cudaMemset(d, 0, 4) == cudaErrorLaunchFailure; // sticky
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kernel divergentGridBarrier: ampc::cuda::gridSync reached by 224 of "
      "the grid's 256 threads \\(32 returned without reaching it: a "
      "divergent grid barrier\\)");
}

TEST(CudaSimStrictDeathTest, GridBarrierInAPlainLaunch) {
  EXPECT_EXIT(
      {
        int *slots = deviceAlloc<int>(2);
        int *out = deviceAlloc<int>(2 * 64);
        ampc::cuda::launch("sumOverBlocks", sumOverBlocks, 2, 64, 0, nullptr,
                           slots, out, 1);
        std::exit(cudaDeviceSynchronize() == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "kernel sumOverBlocks: ampc::cuda::gridSync "
      "\\(.*CudaSimTest.cpp:[0-9]+\\) "
      "in a kernel not launched cooperatively "
      "\\(ampc::cuda::launchCooperative\\)");
}

// An access outside device memory in a kernel: CudaSimStreamsTest.cpp
// (the sticky cudaErrorIllegalAddress).

} // namespace
