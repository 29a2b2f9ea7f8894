//===- CudaSimCountersTest.cpp - what the CUDA execution counts -----------===//
//
// test/Target/Cuda/launch-count.test pins the counts of a training step;
// they are worth pinning only if they are honest: work counts when it runs,
// once per run, under the kind and name its call gave it, and work still
// queued, refused at the call, or dropped after a sticky failure does not
// count. Compiled with AMPC_CUDA_SIM, as a --target=cuda-sim library is.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"
#include "ampc/CudaSim/Counters.h"

#include <cublasLt.h>
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace {

__global__ void fill(int *out, int value, int n) {
  AMPC_FOR(i, n) out[i] = value;
}

/// A barrier only the even threads reach: the kernel fails when it runs.
__global__ void divergentBarrier(int *out) {
  if (threadIdx.x % 2)
    return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

void CUDART_CB nothing(void *) {}

std::string counters() {
  std::vector<char> text(ampc_cudasim_counters(nullptr, 0) + 1);
  ampc_cudasim_counters(text.data(), text.size());
  return text.data();
}

/// From nothing queued: work earlier tests left queued would count here.
void resetCounters() {
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  ampc_cudasim_counters_reset();
}

int *deviceInts(size_t count) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, count * sizeof(int)), cudaSuccess);
  return static_cast<int *>(p);
}

TEST(CudaSimCounters, WorkCountsWhenItRunsByKindAndName) {
  int *d = deviceInts(64);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  resetCounters();
  ampc::cuda::launch("fill", fill, 2, 32, 0, s, d, 1, 64);
  ampc::cuda::launch("fill", fill, 2, 32, 0, s, d, 2, 64);
  ampc::cuda::launch("fill<int>", fill, 1, 32, 0, s, d, 3, 64);
  // Pinned: into pageable memory the copy would be synchronous.
  int *host = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void **>(&host), 64 * sizeof(int)),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(host, d, 64 * sizeof(int), cudaMemcpyDeviceToHost,
                            s),
            cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 4, s), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(s, nothing, nullptr), cudaSuccess);
  // On the legacy stream: returns once staged, lands when that stream runs.
  const int zero = 0;
  ASSERT_EQ(cudaMemcpy(d, &zero, 4, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(counters(), "") << "work counted before it ran";
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(host[63], 3);
  EXPECT_EQ(counters(), "kernel 2 fill\n"
                        "kernel 1 fill<int>\n"
                        "copy 1 cudaMemcpyDeviceToHost\n"
                        "copy 1 cudaMemcpyHostToDevice\n"
                        "memset 1 cudaMemsetAsync\n"
                        "host_function 1 cudaLaunchHostFunc\n");
  ampc_cudasim_counters_reset();
  EXPECT_EQ(counters(), "");
  cudaFreeHost(host);
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST(CudaSimCounters, RefusedCallsAndHostCopiesAreNotCounted) {
  int *d = deviceInts(1);
  resetCounters();
  ampc::cuda::launch("fill", fill, 1, 2048, 0, nullptr, d, 1, 1);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  int host[2] = {1, 2};
  EXPECT_EQ(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue); // past the end of the allocation
  cudaGetLastError();
  EXPECT_EQ(cudaMemcpy(&host[1], &host[0], 4, cudaMemcpyHostToHost),
            cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(counters(), "");
  cudaFree(d);
}

TEST(CudaSimCounters, AGraphCountsOncePerReplay) {
  int *d = deviceInts(32);
  cudaStream_t s;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  resetCounters();
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal),
            cudaSuccess);
  ampc::cuda::launch("fill", fill, 1, 32, 0, s, d, 1, 32);
  cudaGraph_t graph;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess);
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(counters(), "") << "the capture ran nothing";
  for (int replay = 0; replay < 3; ++replay)
    ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  EXPECT_EQ(counters(), "kernel 3 fill\ngraph 3 cudaGraphLaunch\n");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s);
  cudaFree(d);
}

/// 1x1 GEMMs in FP32 with the given epilogue, on the legacy stream.
class TinyGemm {
public:
  explicit TinyGemm(cublasLtEpilogue_t epilogue) {
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(
                  desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                  sizeof epilogue),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, CUDA_R_32F, 1, 1, 1),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference),
              CUBLAS_STATUS_SUCCESS);
    int returned = 0;
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(handle, desc, layout, layout,
                                             layout, layout, preference, 1,
                                             &result, &returned),
              CUBLAS_STATUS_SUCCESS);
  }
  ~TinyGemm() {
    cublasLtMatmulPreferenceDestroy(preference);
    cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  TinyGemm(const TinyGemm &) = delete;
  TinyGemm &operator=(const TinyGemm &) = delete;

  cublasStatus_t operator()(const float *a, const float *b, float *d) {
    const float one = 1, zero = 0;
    return cublasLtMatmul(handle, desc, &one, a, layout, b, layout, &zero, d,
                          layout, d, layout, &result.algo, nullptr, 0, 0);
  }

private:
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t result = {};
};

TEST(CudaSimCounters, GemmsCountByEpilogueWhenTheyRun) {
  float *a, *b, *d;
  for (float **p : {&a, &b, &d})
    ASSERT_EQ(cudaMalloc(reinterpret_cast<void **>(p), 4), cudaSuccess);
  const float two = 2, three = 3;
  ASSERT_EQ(cudaMemcpy(a, &two, 4, cudaMemcpyHostToDevice), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b, &three, 4, cudaMemcpyHostToDevice), cudaSuccess);
  TinyGemm plain(CUBLASLT_EPILOGUE_DEFAULT), relu(CUBLASLT_EPILOGUE_RELU);
  resetCounters();
  ASSERT_EQ(plain(a, b, d), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(relu(a, b, d), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plain(a, b, d), CUBLAS_STATUS_SUCCESS);
  // D overlapping A: refused at the call.
  EXPECT_EQ(plain(a, b, a), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(counters(), "") << "GEMMs counted before they ran";
  float product = 0;
  ASSERT_EQ(cudaMemcpy(&product, d, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(product, 6);
  EXPECT_EQ(counters(), "gemm 2 CUBLASLT_EPILOGUE_DEFAULT\n"
                        "gemm 1 CUBLASLT_EPILOGUE_RELU\n"
                        "copy 1 cudaMemcpyDeviceToHost\n");
  for (float *p : {a, b, d})
    cudaFree(p);
}

TEST(CudaSimCounters, TheTextIsTruncatedAsSnprintfDoes) {
  int *d = deviceInts(32);
  resetCounters();
  ampc::cuda::launch("fill", fill, 1, 32, 0, nullptr, d, 1, 32);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::string whole = "kernel 1 fill\n";
  EXPECT_EQ(ampc_cudasim_counters(nullptr, 0), whole.size());
  char buffer[8];
  std::memset(buffer, 'x', sizeof buffer);
  EXPECT_EQ(ampc_cudasim_counters(buffer, 5), whole.size());
  EXPECT_STREQ(buffer, "kern");
  EXPECT_EQ(buffer[5], 'x') << "wrote past the size it was given";
  cudaFree(d);
}

// The step a sticky failure ends: the failing kernel ran (and counts), the
// work queued after it never runs (and does not). A child process, since
// the failure poisons the device for good.
TEST(CudaSimCountersDeathTest, WorkDroppedAfterAFailureIsNotCounted) {
  EXPECT_EXIT(
      {
        int *d = deviceInts(64);
        resetCounters();
        ampc::cuda::launch("divergentBarrier", divergentBarrier, 1, 64, 0,
                           nullptr, d);
        ampc::cuda::launch("fill", fill, 1, 32, 0, nullptr, d, 1, 64);
        bool ok = cudaDeviceSynchronize() == cudaErrorLaunchFailure;
        ok &= counters() == "kernel 1 divergentBarrier\n";
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "divergent barrier");
}

} // namespace
