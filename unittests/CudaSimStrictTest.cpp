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

#include "ampc/Runtime/CudaKernels.cuh"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

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

/// One operation, two call sites: a vote in each branch.
constexpr int kBallotLine = __LINE__ + 4;
constexpr int kBallotLine2 = __LINE__ + 4;
__global__ void splitBallot(int *out) {
  unsigned bits = threadIdx.x < 16
                      ? __ballot_sync(0xFFFFFFFFu, threadIdx.x % 3 == 0)
                      : __ballot_sync(0xFFFFFFFFu, threadIdx.x % 5 == 0);
  out[threadIdx.x] = static_cast<int>(bits);
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

TEST(CudaSimCallSiteDeathTest, VotesAtTwoCallSitesInOneWarp) {
  expectKernelFailure("splitBallot", splitBallot, 32,
                      {"splitBallot", at(kBallotLine), at(kBallotLine2)});
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

} // namespace
