//===- CudaSimStrictTest.cpp - what the CUDA execution refuses, per block --===//
//
// Kernels that a GPU leaves undefined and that the CUDA execution on the CPU
// used to run without a word: threads of one block released by barriers at
// two call sites, lanes of one warp exchange at two different operations,
// __shared__ memory read before any thread of the block wrote it, and the
// model arena read before it is written or written past a tensor's end
// (AMPC_CUDA_SIM_STRICT_MEMORY). Each kernel here is wrong on purpose; the
// test checks that the execution says so, and where.
// Compiled with AMPC_CUDA_SIM, as a --target=cuda-sim library is.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

namespace {

/// The line of this file where a kernel below calls the operation named
/// in its comment, as the failure message must show it.
std::string at(int line) {
  return std::string(__FILE__) + ":" + std::to_string(line);
}

/// Runs `kernel` (1 block of `threads`) in a child process; the child exits
/// 0 when the kernel failed with cudaErrorLaunchFailure and a message that
/// contains each of `expected`, and prints the message.
template <typename Kernel>
void expectKernelFailure(const char *name, Kernel kernel, unsigned threads,
                         std::initializer_list<std::string> expected) {
  EXPECT_EXIT(
      {
        int *d = nullptr;
        if (cudaMalloc(&d, 4096) != cudaSuccess)
          std::exit(2);
        ampc::cuda::launch(name, kernel, 1, threads, 0, nullptr, d);
        cudaError_t e = cudaDeviceSynchronize();
        std::string message = cudaGetErrorString(e);
        bool ok = e == cudaErrorLaunchFailure;
        for (const std::string &part : expected)
          ok &= message.find(part) != std::string::npos;
        std::fprintf(stderr, "message: %s\n", message.c_str());
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "message: ");
}

//===----------------------------------------------------------------------===//
// Barriers and warp operations: one call site per synchronisation
//===----------------------------------------------------------------------===//

/// The first warp waits at one __syncthreads, the second at another: every
/// thread of the block arrives at a barrier, so a check of "all threads
/// arrived" alone accepts it.
constexpr int kFirstBarrierLine = __LINE__ + 4;
constexpr int kSecondBarrierLine = __LINE__ + 6;
__global__ void splitBarrier(int *out) {
  if (threadIdx.x < 32) {
    __syncthreads();
    out[threadIdx.x] = 1;
  } else {
    __syncthreads();
    out[threadIdx.x] = 2;
  }
}

/// Two branches of one warp, each at its own shuffle with the full mask:
/// every lane arrives with the same mask, so a check of masks alone
/// accepts it.
constexpr int kXorLine = __LINE__ + 5;
constexpr int kDownLine = __LINE__ + 6;
__global__ void splitShuffle(int *out) {
  int v = threadIdx.x;
  if (threadIdx.x % 2)
    v = __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  else
    v = __shfl_down_sync(0xFFFFFFFFu, v, 1);
  out[threadIdx.x] = v;
}

/// Two votes of different kinds in one warp: vote.sync.ballot against
/// vote.sync.any.
constexpr int kBallotLine = __LINE__ + 4;
constexpr int kAnyLine = __LINE__ + 4;
__global__ void splitVote(int *out) {
  int v = threadIdx.x < 16
              ? static_cast<int>(__ballot_sync(0xFFFFFFFFu, threadIdx.x % 3))
              : __any_sync(0xFFFFFFFFu, threadIdx.x % 5 == 0);
  out[threadIdx.x] = v;
}

/// One operation at two call sites in one warp: legal from sm_70 on (the
/// lanes wait for a shuffle with the same qualifiers and mask, not for the
/// same instruction), so it runs, and each lane gets its partner's value.
__global__ void shuffleAtTwoSites(int *out) {
  int v = threadIdx.x;
  if (threadIdx.x < 16)
    v = __shfl_xor_sync(0xFFFFFFFFu, v, 1);
  else
    v = __shfl_xor_sync(0xFFFFFFFFu, v + 100, 1);
  out[threadIdx.x] = v;
}

/// What a correct kernel does: one barrier and one shuffle that every
/// thread reaches, in a loop (one call site, many rounds).
__global__ void sameSites(int *out) {
  int v = threadIdx.x;
  for (int round = 0; round < 3; ++round) {
    v += __shfl_xor_sync(0xFFFFFFFFu, v, 1);
    __syncthreads();
  }
  out[threadIdx.x] = v;
}

TEST(CudaSimCallSiteDeathTest, BarriersAtTwoCallSites) {
  expectKernelFailure("splitBarrier", splitBarrier, 64,
                      {"splitBarrier", "__syncthreads",
                       at(kFirstBarrierLine), at(kSecondBarrierLine)});
}

TEST(CudaSimCallSiteDeathTest, ShufflesOfTwoKindsInOneWarp) {
  expectKernelFailure("splitShuffle", splitShuffle, 32,
                      {"splitShuffle", "__shfl_xor_sync", "__shfl_down_sync",
                       at(kXorLine), at(kDownLine)});
}

TEST(CudaSimCallSiteDeathTest, VotesOfTwoKindsInOneWarp) {
  expectKernelFailure("splitVote", splitVote, 32,
                      {"splitVote", "__ballot_sync", "__any_sync",
                       at(kBallotLine), at(kAnyLine)});
}

TEST(CudaSimCallSite, OneShuffleAtTwoCallSitesRuns) {
  int *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 32 * 4), cudaSuccess);
  ampc::cuda::launch("shuffleAtTwoSites", shuffleAtTwoSites, 1, 32, 0,
                     nullptr, d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int out[32];
  ASSERT_EQ(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int t = 0; t < 32; ++t)
    EXPECT_EQ(out[t], (t ^ 1) + (t < 16 ? 0 : 100)) << t;
  cudaFree(d);
}

TEST(CudaSimCallSite, OneCallSiteInALoopRuns) {
  int *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, 64 * 4), cudaSuccess);
  ampc::cuda::launch("sameSites", sameSites, 1, 64, 0, nullptr, d);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  int out[64];
  ASSERT_EQ(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost),
            cudaSuccess);
  // Each round doubles the pair's sum: 2^3 / 2 * (2p + 2p + 1).
  for (int t = 0; t < 64; ++t)
    EXPECT_EQ(out[t], 4 * (t / 2 * 4 + 1)) << t;
  cudaFree(d);
}

//===----------------------------------------------------------------------===//
// Shared memory: each block's own, uninitialised
//===----------------------------------------------------------------------===//

/// Thread t of block b writes its slot when t + b is even, then reads its
/// partner's (t ^ 1), which no thread of this block wrote when t + b is
/// even: with one copy for all blocks, that is what the block before left
/// there (or 0 in the first block).
__global__ void partnerSlots(float *out) {
  AMPC_SHARED(float[64], tile);
  const unsigned t = threadIdx.x;
  if ((t + blockIdx.x) % 2 == 0)
    tile[t] = blockIdx.x * 1000.0f + t;
  __syncthreads();
  out[blockIdx.x * 64 + t] = tile[t ^ 1u];
}

/// The same through the launch's dynamic shared memory.
__global__ void partnerSlotsDynamic(float *out) {
  AMPC_DYNAMIC_SHARED(float, tile);
  const unsigned t = threadIdx.x;
  if ((t + blockIdx.x) % 2 == 0)
    tile[t] = blockIdx.x * 1000.0f + t;
  __syncthreads();
  out[blockIdx.x * 64 + t] = tile[t ^ 1u];
}

/// 40 KiB of static shared memory: with 16 KiB of dynamic shared memory,
/// more than a block gets.
__global__ void largeShared(float *out) {
  AMPC_SHARED(float[10240], big);
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

/// Runs `kernel` over 4 blocks of 64 threads with `dynamicBytes` of dynamic
/// shared memory and checks each output: the partner's value where the
/// block wrote it, the uninitialised pattern (a NaN, bytes 0xFF) where not.
template <typename Kernel>
void expectUninitialisedPartners(const char *name, Kernel kernel,
                                 size_t dynamicBytes) {
  const int blocks = 4;
  float *d = nullptr;
  ASSERT_EQ(cudaMalloc(&d, blocks * 64 * 4), cudaSuccess);
  for (const char *seed : {"reverse", "forward", "7"}) {
    setenv("AMPC_CUDA_SIM_SEED", seed, 1);
    ampc::cuda::launch(name, kernel, blocks, 64, dynamicBytes, nullptr, d);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    std::vector<float> out(blocks * 64);
    ASSERT_EQ(cudaMemcpy(out.data(), d, out.size() * 4, cudaMemcpyDeviceToHost),
              cudaSuccess);
    int stale = 0;
    for (int b = 0; b < blocks; ++b)
      for (int t = 0; t < 64; ++t) {
        const float v = out[b * 64 + t];
        if ((t + b) % 2) {
          EXPECT_EQ(v, b * 1000.0f + (t ^ 1)) << seed << " " << b << " " << t;
          continue;
        }
        uint32_t bits;
        std::memcpy(&bits, &v, 4);
        stale += bits != 0xFFFFFFFFu;
      }
    EXPECT_EQ(stale, 0) << "uninitialised reads that were not the 0xFF "
                           "pattern (seed "
                        << seed << ")";
  }
  unsetenv("AMPC_CUDA_SIM_SEED");
  cudaFree(d);
}

TEST(CudaSimSharedMemory, EachBlockStartsUninitialised) {
  expectUninitialisedPartners("partnerSlots", partnerSlots, 0);
}

TEST(CudaSimSharedMemory, DynamicSharedMemoryStartsUninitialised) {
  expectUninitialisedPartners("partnerSlotsDynamic", partnerSlotsDynamic,
                              64 * sizeof(float));
}

TEST(CudaSimSharedMemoryDeathTest, MoreThanABlockGets) {
  EXPECT_EXIT(
      {
        float *d = nullptr;
        if (cudaMalloc(&d, 4096) != cudaSuccess)
          std::exit(2);
        ampc::cuda::launch("largeShared", largeShared, 1, 32, 16 << 10,
                           nullptr, d);
        cudaError_t e = cudaDeviceSynchronize();
        std::string message = cudaGetErrorString(e);
        std::fprintf(stderr, "message: %s\n", message.c_str());
        std::exit(e == cudaErrorLaunchFailure &&
                          message.find("largeShared: needs 57344 bytes of "
                                       "shared memory (16384 of them "
                                       "dynamic)") != std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "message: ");
}

//===----------------------------------------------------------------------===//
// The model's arena: planned buffers uninitialised under strict memory
//===----------------------------------------------------------------------===//

/// Sums `n` floats of a buffer: a kernel that reads a planned buffer no op
/// wrote (a bug of the emitter or a kernel) reads what init left there.
__global__ void sumBuffer(const float *in, float *out, int n) {
  if (threadIdx.x == 0 && blockIdx.x == 0) {
    float total = 0;
    for (int i = 0; i < n; ++i)
      total += in[i];
    *out = total;
  }
}

/// A model's state as the CUDA emitter lays it out, built by
/// ampc::cuda::init: the blob, the state that starts at zero, then the
/// planned buffers from `kArenaBase` with the error code first.
constexpr size_t kStateBytes = 8192, kBlobBytes = 256, kArenaBase = 1024;
struct ArenaContents {
  std::vector<unsigned char> state;
  float sum = 0; // of the first 64 floats after the error slot
};
ArenaContents initialArena(bool strict) {
  if (strict)
    setenv("AMPC_CUDA_SIM_STRICT_MEMORY", "1", 1);
  else
    unsetenv("AMPC_CUDA_SIM_STRICT_MEMORY");
  std::vector<unsigned char> blob(kBlobBytes);
  for (size_t i = 0; i < blob.size(); ++i)
    blob[i] = static_cast<unsigned char>(i + 1);
  static const char *const errors[] = {"no error"};
  ampc_abi_config config{sizeof(ampc_abi_config), 0, nullptr};
  alignas(ampc::cuda::Context) unsigned char raw[sizeof(ampc::cuda::Context)];
  ArenaContents out;
  EXPECT_EQ(ampc::cuda::init(raw, &config, kStateBytes, blob.data(),
                             kBlobBytes, kArenaBase, kArenaBase, errors, 1),
            0)
      << ampc::cuda::lastError(raw);
  ampc::cuda::Context &ctx = ampc::cuda::context(raw);
  out.state.resize(kStateBytes);
  EXPECT_EQ(ampc::cuda::copyOut(ctx, 0, out.state.data(), kStateBytes), 0)
      << ctx.message;
  // The sum goes to the end of the state, which the check below skips.
  float *sum = reinterpret_cast<float *>(ctx.device + kStateBytes - 4);
  ampc::cuda::launch("sumBuffer", sumBuffer, 1, 32, 0, ctx.stream,
                     reinterpret_cast<const float *>(ctx.device + kArenaBase +
                                                     64),
                     sum, 64);
  EXPECT_EQ(ampc::cuda::copyOut(ctx, kStateBytes - 4, &out.sum, 4), 0)
      << ctx.message;
  ampc::cuda::release(raw);
  unsetenv("AMPC_CUDA_SIM_STRICT_MEMORY");
  return out;
}

TEST(CudaSimStrictMemory, PlannedBuffersStartUninitialised) {
  ArenaContents arena = initialArena(/*strict=*/true);
  for (size_t i = 0; i < kBlobBytes; ++i)
    ASSERT_EQ(arena.state[i], static_cast<unsigned char>(i + 1))
        << "the blob, at byte " << i;
  for (size_t i = kBlobBytes; i < kArenaBase + 4; ++i)
    ASSERT_EQ(arena.state[i], 0)
        << "the zero state and the error code, at byte " << i;
  for (size_t i = kArenaBase + 8; i < kStateBytes - 4; ++i)
    ASSERT_EQ(arena.state[i], ampc::sim::kUninitialisedByte)
        << "a planned buffer, at byte " << i;
  EXPECT_TRUE(std::isnan(arena.sum))
      << "a read of a buffer no op wrote gave " << arena.sum;
}

TEST(CudaSimStrictMemory, WithoutTheModeTheArenaIsZeroed) {
  // What init does on a GPU and by default here: the same read gives 0,
  // the wrong value unseen (the reason for the mode).
  ArenaContents arena = initialArena(/*strict=*/false);
  for (size_t i = kBlobBytes; i < kStateBytes - 4; ++i)
    ASSERT_EQ(arena.state[i], 0) << i;
  EXPECT_EQ(arena.sum, 0.0f);
}

//===----------------------------------------------------------------------===//
// The model's arena: writes past the end of a result (AMPC_GUARD)
//===----------------------------------------------------------------------===//

/// Writes `n + extra` floats where the result has `n`: extra = 1 is the
/// off-by-one of a kernel's bound (`<=` for `<`) the guard is for.
__global__ void writeRow(float *out, int n, int extra) {
  for (int i = threadIdx.x; i < n + extra; i += blockDim.x)
    out[i] = 1.0f;
}

/// Launches writeRow on a 64-float result followed by the plan's guard (as
/// the CUDA emitter declares it) and returns the synchronisation's error
/// and message.
std::pair<cudaError_t, std::string> runGuarded(bool strict, int extra) {
  if (strict)
    setenv("AMPC_CUDA_SIM_STRICT_MEMORY", "1", 1);
  else
    unsetenv("AMPC_CUDA_SIM_STRICT_MEMORY");
  float *arena = nullptr;
  if (cudaMalloc(&arena, 1024) != cudaSuccess)
    std::exit(2);
  constexpr int n = 64; // 256 bytes: a multiple of the plan's alignment
  AMPC_GUARD(arena, n * sizeof(float), 64, "result 0 of node 'y' (op Add)");
  ampc::cuda::launch("writeRow", writeRow, 1, 32, 0, nullptr, arena, n, extra);
  cudaError_t launched = cudaGetLastError();
  cudaError_t e = cudaDeviceSynchronize();
  unsetenv("AMPC_CUDA_SIM_STRICT_MEMORY");
  return {launched != cudaSuccess ? launched : e, cudaGetErrorString(e)};
}

TEST(CudaSimGuardDeathTest, OneElementPastAResultFails) {
  EXPECT_EXIT(
      {
        const auto run = runGuarded(/*strict=*/true, /*extra=*/1);
        std::fprintf(stderr, "message: %s\n", run.second.c_str());
        std::exit(run.first == cudaErrorIllegalAddress &&
                          run.second.find("kernel writeRow: wrote past the end "
                                       "of result 0 of node 'y' (op Add) (256 "
                                       "bytes): bytes 0 to 3 after its end "
                                       "changed") != std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "message: ");
}

TEST(CudaSimGuardDeathTest, TheFailureIsSticky) {
  // As a fault on a GPU: the model's next call must not run on.
  EXPECT_EXIT(
      {
        runGuarded(/*strict=*/true, /*extra=*/16);
        void *p = nullptr;
        std::exit(cudaMalloc(&p, 64) == cudaErrorIllegalAddress ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CudaSimGuardDeathTest, AWriteWithinTheResultRuns) {
  EXPECT_EXIT(
      {
        const auto run = runGuarded(/*strict=*/true, /*extra=*/0);
        std::fprintf(stderr, "message: %s\n", run.second.c_str());
        std::exit(run.first == cudaSuccess ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "message: ");
}

TEST(CudaSimGuardDeathTest, WithoutTheModeTheGuardIsNotChecked) {
  // What a GPU does: the extra element lands in the gap, unseen.
  EXPECT_EXIT(
      {
        std::exit(runGuarded(/*strict=*/false, /*extra=*/1).first == cudaSuccess
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(CudaSimGuardDeathTest, OnlyTheNextLaunchIsGuarded) {
  // A guard declared for a launch the execution refuses is not carried
  // over to the next launch, which writes where the guard was.
  EXPECT_EXIT(
      {
        setenv("AMPC_CUDA_SIM_STRICT_MEMORY", "1", 1);
        float *arena = nullptr;
        if (cudaMalloc(&arena, 1024) != cudaSuccess)
          std::exit(2);
        AMPC_GUARD(arena, 256, 64, "result 0 of node 'y' (op Add)");
        ampc::cuda::launch("writeRow", writeRow, 1, 2048, 0, nullptr, arena,
                           64, 0); // 2048 threads: refused
        bool refused = cudaGetLastError() == cudaErrorInvalidConfiguration;
        ampc::cuda::launch("writeRow", writeRow, 1, 32, 0, nullptr, arena,
                           80, 0);
        std::exit(refused && cudaDeviceSynchronize() == cudaSuccess ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

} // namespace
