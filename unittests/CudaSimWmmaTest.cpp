//===- CudaSimWmmaTest.cpp - warp matrix operations in the CUDA execution --===//
//
// nvcuda::wmma as the CUDA execution on the CPU implements it
// (ampc/CudaSim/Wmma.h): an exact 16x16x16 product (FP16 and BF16,
// FP32 sums in k order), accumulation, column-major operands and stores,
// elementwise use of a fragment, a divergent call refused, and the loads
// and stores seen by the race check. Compiled with the race check's
// instrumentation where the build has it (unittests/CMakeLists.txt).
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cuda/CudaKernels.cuh"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace {

namespace wmma = nvcuda::wmma;

/// C = A B (+ C when `accumulate`), once or `times` times onto the same
/// accumulator; A, B in the layouts given, C stored in `store`'s layout.
/// Every stored element is then scaled by `factor` elementwise.
template <typename T, typename LA, typename LB>
__global__ void product(const T *a, const T *b, float *c, int accumulate,
                        int times, wmma::layout_t store, float factor) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (accumulate)
    wmma::load_matrix_sync(acc, c, 16, store);
  else
    wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  for (int t = 0; t < times; ++t)
    wmma::mma_sync(acc, fa, fb, acc);
  for (int i = 0; i < acc.num_elements; ++i)
    acc.x[i] *= factor;
  wmma::store_matrix_sync(c, acc, 16, store);
}

/// One mma_sync in a frame of its own: called twice, its locals are at the
/// same address both times.
__attribute__((noinline)) void mmaOnce(
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> &acc,
    const wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> &fa,
    const wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> &fb) {
  wmma::mma_sync(acc, fa, fb, acc);
}

/// C = A B + (-A) B, negating A elementwise between two mma_sync with no
/// other warp operation between them: a lane that leaves the first
/// mma_sync before the others have read its share would give them -A.
__global__ void productThenNegated(const __half *a, const __half *b,
                                   float *c) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.0f);
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  mmaOnce(acc, fa, fb);
  for (int i = 0; i < fa.num_elements; ++i)
    fa.x[i] = __hneg(fa.x[i]);
  mmaOnce(acc, fa, fb);
  wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

/// Half of the warp loads from one call site, half from another.
__global__ void divergentLoad(const __half *a, float *out) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  if (threadIdx.x < 16)
    wmma::load_matrix_sync(fa, a, 16);
  else
    wmma::load_matrix_sync(fa, a, 16);
  out[threadIdx.x] = __half2float(fa.x[0]);
}

/// Warp 0 stores a tile to shared memory, warp 1 loads it: with a barrier
/// between them or (racing) without.
__global__ void handOver(const __half *a, const __half *b, float *out,
                         int barrier) {
  AMPC_SHARED(float[256], tile);
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  if (threadIdx.x / 32 == 0) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
    wmma::fill_fragment(acc, 0.0f);
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::mma_sync(acc, fa, fb, acc);
    wmma::store_matrix_sync(tile, acc, 16, wmma::mem_row_major);
  }
  if (barrier)
    __syncthreads();
  if (threadIdx.x / 32 == 1) {
    wmma::load_matrix_sync(acc, tile, 16, wmma::mem_row_major);
    wmma::store_matrix_sync(out, acc, 16, wmma::mem_row_major);
  }
}

template <typename T> T *deviceCopy(const std::vector<T> &host) {
  void *p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 4), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T *>(p);
}
template <typename T> std::vector<T> hostCopy(const T *d, size_t n) {
  std::vector<T> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), d, n * sizeof(T), cudaMemcpyDeviceToHost),
            cudaSuccess);
  return out;
}

void launchHandOver(const __half *a, const __half *b, float *out,
                    int barrier) {
  ampc::cuda::launch("handOver", handOver, 1, 64, 0, nullptr, a, b, out,
                     barrier);
}
void launchDivergentLoad(const __half *a, float *out) {
  ampc::cuda::launch("divergentLoad", divergentLoad, 1, 32, 0, nullptr, a,
                     out);
}

float toF(__half v) { return __half2float(v); }
float toF(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> T fromF(float v);
template <> __half fromF<__half>(float v) { return __float2half_rn(v); }
template <> __nv_bfloat16 fromF<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

/// Values with full mantissas, so that a product or a sum out of order
/// rounds differently.
template <typename T> std::vector<T> operand(int seed) {
  std::vector<T> v(256);
  for (int i = 0; i < 256; ++i)
    v[i] = fromF<T>(static_cast<float>((i * 7919 + seed * 104729) % 2003) /
                        1001.0f -
                    1.0f + 1.0f / 3.0f);
  return v;
}

/// What the execution must give: for each (m, n), the float C plus the
/// exact products A[m][k] B[k][n] added in k order, `times` times; A and B
/// read in their stored layouts, C in `store`'s.
template <typename T>
std::vector<float> expected(const std::vector<T> &a, bool aCol,
                            const std::vector<T> &b, bool bCol,
                            std::vector<float> c, bool cCol, int times,
                            float factor) {
  std::vector<float> out(256);
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 16; ++n) {
      float sum = c[cCol ? n * 16 + m : m * 16 + n];
      for (int t = 0; t < times; ++t)
        for (int k = 0; k < 16; ++k)
          sum += toF(a[aCol ? k * 16 + m : m * 16 + k]) *
                 toF(b[bCol ? n * 16 + k : k * 16 + n]);
      out[cCol ? n * 16 + m : m * 16 + n] = sum * factor;
    }
  return out;
}

template <typename T, typename LA, typename LB>
void checkProduct(bool accumulate, int times, wmma::layout_t store,
                  float factor) {
  const std::vector<T> a = operand<T>(1), b = operand<T>(2);
  std::vector<float> c(256);
  for (int i = 0; i < 256; ++i)
    c[i] = accumulate ? static_cast<float>(i) / 64.0f - 2.0f : 0.0f;
  T *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(c);
  ampc::cuda::launch("product", product<T, LA, LB>, 1, 32, 0, nullptr, da, db,
                     dc, accumulate ? 1 : 0, times, store, factor);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const std::vector<float> got = hostCopy(dc, 256);
  const std::vector<float> want =
      expected(a, std::is_same_v<LA, wmma::col_major>, b,
               std::is_same_v<LB, wmma::col_major>, c,
               store == wmma::mem_col_major, times, factor);
  for (int i = 0; i < 256; ++i)
    ASSERT_EQ(got[i], want[i]) << "element " << i;
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST(CudaSimWmma, HalfProductIsExactInFloatInKOrder) {
  checkProduct<__half, wmma::row_major, wmma::row_major>(false, 1,
                                                         wmma::mem_row_major, 1);
}

TEST(CudaSimWmma, AccumulatesOntoALoadedAccumulator) {
  checkProduct<__half, wmma::row_major, wmma::row_major>(true, 3,
                                                         wmma::mem_row_major, 1);
}

TEST(CudaSimWmma, ColumnMajorOperandsAndStore) {
  checkProduct<__half, wmma::col_major, wmma::col_major>(true, 1,
                                                         wmma::mem_col_major, 1);
  checkProduct<__half, wmma::row_major, wmma::col_major>(false, 1,
                                                         wmma::mem_row_major, 1);
  checkProduct<__half, wmma::col_major, wmma::row_major>(false, 1,
                                                         wmma::mem_col_major, 1);
}

TEST(CudaSimWmma, Bfloat16Product) {
  checkProduct<__nv_bfloat16, wmma::row_major, wmma::col_major>(
      true, 2, wmma::mem_row_major, 1);
}

TEST(CudaSimWmma, FragmentElementsUsedElementwise) {
  checkProduct<__half, wmma::row_major, wmma::row_major>(true, 1,
                                                         wmma::mem_row_major,
                                                         0.5f);
}

TEST(CudaSimWmma, NoLaneChangesItsShareBeforeTheWarpHasReadIt) {
  const std::vector<__half> a = operand<__half>(1), b = operand<__half>(2);
  __half *da = deviceCopy(a), *db = deviceCopy(b);
  float *dc = deviceCopy(std::vector<float>(256));
  for (const char *seed : {"reverse", "forward", "1", "2", "3"}) {
    setenv("AMPC_CUDA_SIM_SEED", seed, 1);
    ampc::cuda::launch("productThenNegated", productThenNegated, 1, 32, 0,
                       nullptr, da, db, dc);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << seed;
    const std::vector<float> got = hostCopy(dc, 256);
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 16; ++n) {
        float sum = 0;
        for (int k = 0; k < 16; ++k)
          sum += toF(a[m * 16 + k]) * toF(b[k * 16 + n]);
        for (int k = 0; k < 16; ++k)
          sum += -toF(a[m * 16 + k]) * toF(b[k * 16 + n]);
        ASSERT_EQ(got[m * 16 + n], sum) << seed << " (" << m << ", " << n << ")";
      }
  }
  unsetenv("AMPC_CUDA_SIM_SEED");
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
}

TEST(CudaSimWmmaDeathTest, ADivergentCallFails) {
  EXPECT_EXIT(
      {
        unsetenv("AMPC_CUDA_SIM_SEED");
        __half *a = deviceCopy(operand<__half>(1));
        float *out = deviceCopy(std::vector<float>(32));
        launchDivergentLoad(a, out);
        const cudaError_t e = cudaDeviceSynchronize();
        std::exit(e == cudaErrorLaunchFailure ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      "wmma::load_matrix_sync.*one call site for the whole warp");
}

#ifdef AMPC_RACE_INSTRUMENTED
TEST(CudaSimWmmaDeathTest, ASharedTileHandedOverWithoutABarrierRaces) {
  EXPECT_EXIT(
      {
        unsetenv("AMPC_CUDA_SIM_SEED");
        __half *a = deviceCopy(operand<__half>(1));
        __half *b = deviceCopy(operand<__half>(2));
        float *out = deviceCopy(std::vector<float>(256));
        launchHandOver(a, b, out, 0);
        const cudaError_t e = cudaDeviceSynchronize();
        std::exit(e == cudaErrorLaunchFailure &&
                          std::string(cudaGetErrorString(e)).find("data race") !=
                              std::string::npos
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0), "data race");
}
#endif

TEST(CudaSimWmma, ASharedTileHandedOverAfterABarrier) {
  __half *a = deviceCopy(operand<__half>(1)), *b = deviceCopy(operand<__half>(2));
  float *out = deviceCopy(std::vector<float>(256));
  for (const char *seed : {"1", "2", "3"}) {
    setenv("AMPC_CUDA_SIM_SEED", seed, 1);
    launchHandOver(a, b, out, 1);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess) << seed;
    const std::vector<float> want =
        expected(operand<__half>(1), false, operand<__half>(2), false,
                 std::vector<float>(256), false, 1, 1.0f);
    EXPECT_EQ(hostCopy(out, 256), want) << seed;
  }
  unsetenv("AMPC_CUDA_SIM_SEED");
  cudaFree(a);
  cudaFree(b);
  cudaFree(out);
}

} // namespace
