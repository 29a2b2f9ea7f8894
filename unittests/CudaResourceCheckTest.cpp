//===- CudaResourceCheckTest.cpp - what nvcc compiles but a GPU cannot run -===//
//
// ampc::checkCudaResources, which the CUDA target's builds (--target=cuda and
// --target=cuda-sim) run on every generated source: device recursion and a
// kernel stack over the 1 KiB default are refused with the kernel's name; the
// kernels of CudaKernels.cuh (the non-recursive pairwise sum) pass. Needs
// nvcc (CUDA is at /usr/local/cuda on every machine that builds ampc).
//
//===----------------------------------------------------------------------===//

#include "ampc/Target/CudaTarget.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/raw_ostream.h"

#include <gtest/gtest.h>

namespace {

/// Writes `source` to a temporary .cu file and checks it.
bool check(const std::string &source, std::string &error) {
  llvm::SmallString<128> path;
  EXPECT_FALSE(llvm::sys::fs::createTemporaryFile("ampc-resources", "cu", path));
  llvm::FileRemover remove(path);
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(path, ec);
    out << source;
  }
  return ampc::checkCudaResources(path, error);
}

TEST(CudaResourceCheck, NvccIsThere) {
  ASSERT_FALSE(ampc::findNvcc().empty())
      << "nvcc is needed to build and test the CUDA target";
}

TEST(CudaResourceCheck, RefusesDeviceRecursion) {
  std::string error;
  EXPECT_FALSE(check(R"(
__device__ float sum(const float *x, long n) {
  if (n <= 64) { float s = 0; for (long i = 0; i < n; ++i) s += x[i]; return s; }
  return sum(x, n / 2) + sum(x + n / 2, n - n / 2);
}
__global__ void recursiveReduce(const float *x, float *out, long n) { *out = sum(x, n); }
)", error));
  EXPECT_NE(error.find("device recursion"), std::string::npos) << error;
  EXPECT_NE(error.find("sum("), std::string::npos) << error;
}

TEST(CudaResourceCheck, RefusesStackOverTheDefault) {
  std::string error;
  EXPECT_FALSE(check(R"(
__global__ void bigFrame(float *out, int k) {
  float local[1024];
  for (int i = 0; i < 1024; ++i) local[i] = out[i] * i;
  out[0] = local[k & 1023];
}
)", error));
  EXPECT_NE(error.find("kernel bigFrame"), std::string::npos) << error;
  EXPECT_NE(error.find("bytes of stack per thread"), std::string::npos) << error;
}

TEST(CudaResourceCheck, AcceptsThePairwiseReductions) {
  std::string error;
  EXPECT_TRUE(check(R"(
#include "ampc/Kernels/Cuda/CudaKernels.cuh"
template __global__ void ampc::cuda::reduce<double, ampc::cuda::As<double>, ampc::cuda::As<double>>(
    const double *, double *, int64_t, ampc::cuda::Strided, ampc::cuda::Strided, int64_t, ampc::cuda::Reduction);
template __global__ void ampc::cuda::layerNormGrad<float, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::AsF16, ampc::cuda::AsF16>(
    const uint16_t *, const uint16_t *, const float *, ampc::cuda::Strided, const float *, const float *, uint16_t *, int64_t, int64_t);
template __global__ void ampc::cuda::batchNormTrain<double, ampc::cuda::As<double>, ampc::cuda::As<double>, ampc::cuda::As<double>, ampc::cuda::As<double>, ampc::cuda::As<double>>(
    const double *, double *, int64_t, int64_t, int64_t, int64_t, double *, const double *, const double *,
    const double *, const double *, double, double, double, double *, double *, double *, double *,
    const double *, bool);
template __global__ void ampc::cuda::batchNormGrad<float, ampc::cuda::AsF16, ampc::cuda::AsF16, ampc::cuda::As<float>, ampc::cuda::As<float>, ampc::cuda::As<float>, float>(
    const uint16_t *, const uint16_t *, uint16_t *, int64_t, int64_t, int64_t, int64_t, float *, const float *,
    const float *, const float *, bool, float *, float *, const uint16_t *, const uint16_t *, uint16_t *);
)",
                    error))
      << error;
}

} // namespace
