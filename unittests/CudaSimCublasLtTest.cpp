//===- CudaSimCublasLtTest.cpp - cuBLASLt on the CPU against references ---===//
//
// cublasLtMatmul of libampc_cudasim against a naive FP64 reference rounded
// to D's type (exactly, where the operands are small integers), and every
// strict check triggered once by a call that breaks the contract, with the
// message checked. Work is deferred: results are read after
// cudaStreamSynchronize. FP8 GEMMs (issue 42): E4M3/E5M2 operands, their
// scales and amax, and each FP8 rule the simulation enforces.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Common/Float8.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

//===----------------------------------------------------------------------===//
// Host-side values in the device types
//===----------------------------------------------------------------------===//

size_t sizeOf(cudaDataType_t type) {
  return type == CUDA_R_64F ? 8 : type == CUDA_R_32F ? 4 : 2;
}

/// Rounds `v` to `type` (to nearest even) and back.
double roundTo(double v, cudaDataType_t type) {
  switch (type) {
  case CUDA_R_16F: return __half2float(__float2half_rn(static_cast<float>(v)));
  case CUDA_R_16BF:
    return __bfloat162float(__float2bfloat16_rn(static_cast<float>(v)));
  case CUDA_R_32F: return static_cast<float>(v);
  default: return v;
  }
}

std::vector<unsigned char> encode(const std::vector<double> &values,
                                  cudaDataType_t type) {
  std::vector<unsigned char> bytes(values.size() * sizeOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    unsigned char *at = bytes.data() + i * sizeOf(type);
    if (type == CUDA_R_16F) {
      __half h = __float2half_rn(static_cast<float>(values[i]));
      std::memcpy(at, &h, 2);
    } else if (type == CUDA_R_16BF) {
      __nv_bfloat16 h = __float2bfloat16_rn(static_cast<float>(values[i]));
      std::memcpy(at, &h, 2);
    } else if (type == CUDA_R_32F) {
      float f = static_cast<float>(values[i]);
      std::memcpy(at, &f, 4);
    } else {
      std::memcpy(at, &values[i], 8);
    }
  }
  return bytes;
}

std::vector<double> decode(const std::vector<unsigned char> &bytes,
                           cudaDataType_t type) {
  std::vector<double> values(bytes.size() / sizeOf(type));
  for (size_t i = 0; i < values.size(); ++i) {
    const unsigned char *at = bytes.data() + i * sizeOf(type);
    if (type == CUDA_R_16F) {
      __half h;
      std::memcpy(&h, at, 2);
      values[i] = __half2float(h);
    } else if (type == CUDA_R_16BF) {
      __nv_bfloat16 h;
      std::memcpy(&h, at, 2);
      values[i] = __bfloat162float(h);
    } else if (type == CUDA_R_32F) {
      float f;
      std::memcpy(&f, at, 4);
      values[i] = f;
    } else {
      std::memcpy(&values[i], at, 8);
    }
  }
  return values;
}

/// cudaMalloc'd memory, freed at the end of the test.
class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    EXPECT_EQ(cudaMalloc(&pointer_, bytes), cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(pointer_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  void *get() const { return pointer_; }
  char *at(size_t offset) const {
    return static_cast<char *>(pointer_) + offset;
  }
  void upload(const std::vector<double> &values, cudaDataType_t type,
              size_t offset = 0) {
    std::vector<unsigned char> bytes = encode(values, type);
    ASSERT_LE(offset + bytes.size(), bytes_);
    ASSERT_EQ(cudaMemcpy(at(offset), bytes.data(), bytes.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  /// Waits for the legacy stream, then reads `count` values of `type`.
  std::vector<double> download(size_t count, cudaDataType_t type,
                               size_t offset = 0) {
    EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
    std::vector<unsigned char> bytes(count * sizeOf(type));
    EXPECT_EQ(cudaMemcpy(bytes.data(), at(offset), bytes.size(),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return decode(bytes, type);
  }

private:
  void *pointer_ = nullptr;
  size_t bytes_;
};

/// A failed call's status and the message cublasLtGetStatusString gives.
::testing::AssertionResult failsWith(cublasStatus_t got, cublasStatus_t want,
                                     const std::string &needle) {
  const std::string text = cublasLtGetStatusString(got);
  if (got != want)
    return ::testing::AssertionFailure()
           << "status " << cublasLtGetStatusName(got) << ", expected "
           << cublasLtGetStatusName(want) << " (" << text << ")";
  if (text.rfind(cublasLtGetStatusName(want), 0) != 0 ||
      text.find(needle) == std::string::npos)
    return ::testing::AssertionFailure()
           << "message \"" << text << "\" lacks \"" << needle << "\"";
  return ::testing::AssertionSuccess();
}

//===----------------------------------------------------------------------===//
// One GEMM: its description, descriptors, operands and reference
//===----------------------------------------------------------------------===//

struct Spec {
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cudaDataType_t scale = CUDA_R_32F;
  cudaDataType_t ab = CUDA_R_32F, cd = CUDA_R_32F;
  bool transA = false, transB = false;
  int64_t m = 3, n = 5, k = 4;
  int32_t batch = 1;
  // Batch strides in elements; -1: one packed matrix after another.
  int64_t strideA = -1, strideB = -1, strideC = -1, strideD = -1;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;

  int64_t rowsA() const { return transA ? k : m; }
  int64_t colsA() const { return transA ? m : k; }
  int64_t rowsB() const { return transB ? n : k; }
  int64_t colsB() const { return transB ? k : n; }
  int64_t sA() const { return strideA < 0 ? m * k : strideA; }
  int64_t sB() const { return strideB < 0 ? k * n : strideB; }
  int64_t sC() const { return strideC < 0 ? m * n : strideC; }
  int64_t sD() const { return strideD < 0 ? m * n : strideD; }
  size_t elementsA() const { return (batch - 1) * sA() + m * k; }
  size_t elementsB() const { return (batch - 1) * sB() + k * n; }
  size_t elementsC() const { return (batch - 1) * sC() + m * n; }
  size_t elementsD() const { return (batch - 1) * sD() + m * n; }
  bool hasBias() const {
    return epilogue == CUBLASLT_EPILOGUE_BIAS ||
           epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
           epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
  }
};

cublasLtMatrixLayout_t makeLayout(cudaDataType_t type, int64_t rows,
                                  int64_t cols, int32_t batch, int64_t stride) {
  cublasLtMatrixLayout_t layout = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&layout, type, rows, cols, rows),
            CUBLAS_STATUS_SUCCESS);
  if (batch > 1) {
    EXPECT_EQ(
        cublasLtMatrixLayoutSetAttribute(
            layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                  sizeof stride),
              CUBLAS_STATUS_SUCCESS);
  }
  return layout;
}

/// The handle, the descriptors of a Spec and a preference, released at the
/// end of the test.
class Plan {
public:
  explicit Plan(const Spec &spec) : spec(spec) {
    EXPECT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, spec.compute, spec.scale),
              CUBLAS_STATUS_SUCCESS);
    cublasOperation_t ta = spec.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t tb = spec.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(setDesc(CUBLASLT_MATMUL_DESC_TRANSA, ta), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(setDesc(CUBLASLT_MATMUL_DESC_TRANSB, tb), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, spec.epilogue),
              CUBLAS_STATUS_SUCCESS);
    a = makeLayout(spec.ab, spec.rowsA(), spec.colsA(), spec.batch, spec.sA());
    b = makeLayout(spec.ab, spec.rowsB(), spec.colsB(), spec.batch, spec.sB());
    c = makeLayout(spec.cd, spec.m, spec.n, spec.batch, spec.sC());
    d = makeLayout(spec.cd, spec.m, spec.n, spec.batch, spec.sD());
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference),
              CUBLAS_STATUS_SUCCESS);
  }
  ~Plan() {
    cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c, d})
      cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  Plan(const Plan &) = delete;
  Plan &operator=(const Plan &) = delete;

  template <typename T>
  cublasStatus_t setDesc(cublasLtMatmulDescAttributes_t attribute,
                         const T &value) {
    return cublasLtMatmulDescSetAttribute(desc, attribute, &value,
                                          sizeof value);
  }
  void setAlignment(uint32_t bytes) {
    for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                           CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(preference, attribute,
                                                     &bytes, sizeof bytes),
                CUBLAS_STATUS_SUCCESS);
  }
  cublasStatus_t heuristic() {
    int returned = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        handle, desc, a, b, c, d, preference, 1, &result, &returned);
    if (status == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(returned, 1);
    }
    return status;
  }
  /// alpha and beta in the scale type.
  cublasStatus_t matmul(double alpha, double beta, const void *A, const void *B,
                        const void *C, void *D, cudaStream_t stream = 0,
                        const cublasLtMatmulAlgo_t *algo = nullptr,
                        bool useHeuristic = true) {
    float alpha32 = static_cast<float>(alpha),
          beta32 = static_cast<float>(beta);
    const bool f64 = spec.scale == CUDA_R_64F;
    const void *alphaPtr = f64 ? static_cast<const void *>(&alpha) : &alpha32;
    const void *betaPtr = f64 ? static_cast<const void *>(&beta) : &beta32;
    return cublasLtMatmul(handle, desc, alphaPtr, A, a, B, b, betaPtr, C, c, D,
                          d,
                          algo           ? algo
                          : useHeuristic ? &result.algo
                                         : nullptr,
                          nullptr, 0, stream);
  }

  Spec spec;
  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t result = {};
};

double geluTanh(double x) {
  const double sqrtTwoOverPi = 0.7978845608028654;
  return 0.5 * x * (1 + std::tanh(sqrtTwoOverPi * (x + 0.044715 * x * x * x)));
}

/// D, column-major, every batch: act(alpha op(A) op(B) + beta C + bias).
std::vector<double> reference(const Spec &s, const std::vector<double> &A,
                              const std::vector<double> &B,
                              const std::vector<double> &C,
                              const std::vector<double> &bias, double alpha,
                              double beta) {
  std::vector<double> D(s.elementsD(), 0);
  for (int32_t batch = 0; batch < s.batch; ++batch)
    for (int64_t j = 0; j < s.n; ++j)
      for (int64_t i = 0; i < s.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < s.k; ++l) {
          const double a = s.transA ? A[batch * s.sA() + l + i * s.rowsA()]
                                    : A[batch * s.sA() + i + l * s.rowsA()];
          const double b = s.transB ? B[batch * s.sB() + j + l * s.rowsB()]
                                    : B[batch * s.sB() + l + j * s.rowsB()];
          sum += a * b;
        }
        double v = alpha * sum;
        if (beta != 0)
          v += beta * C[batch * s.sC() + i + j * s.m];
        if (s.hasBias())
          v += bias[i];
        if (s.epilogue == CUBLASLT_EPILOGUE_RELU ||
            s.epilogue == CUBLASLT_EPILOGUE_RELU_BIAS)
          v = std::max(v, 0.0);
        if (s.epilogue == CUBLASLT_EPILOGUE_GELU ||
            s.epilogue == CUBLASLT_EPILOGUE_GELU_BIAS)
          v = geluTanh(v);
        D[batch * s.sD() + i + j * s.m] = roundTo(v, s.cd);
      }
  return D;
}

std::vector<double> integers(size_t count, int low, int high, unsigned seed) {
  std::mt19937 random(seed);
  std::uniform_int_distribution<int> pick(low, high);
  std::vector<double> values(count);
  for (double &v : values)
    v = pick(random);
  return values;
}

/// Runs `s` on integer operands (exact in every type) and compares D with
/// the reference exactly.
void expectExact(const Spec &s, double alpha, double beta, unsigned seed) {
  SCOPED_TRACE(testing::Message() << "transA " << s.transA << " transB "
                                  << s.transB << " batch " << s.batch);
  std::vector<double> A = integers(s.elementsA(), -4, 4, seed);
  std::vector<double> B = integers(s.elementsB(), -4, 4, seed + 1);
  std::vector<double> C = integers(s.elementsC(), -8, 8, seed + 2);
  std::vector<double> bias = integers(s.m, -5, 5, seed + 3);
  DeviceBuffer a(A.size() * sizeOf(s.ab)), b(B.size() * sizeOf(s.ab));
  DeviceBuffer c(C.size() * sizeOf(s.cd)), d(s.elementsD() * sizeOf(s.cd));
  DeviceBuffer biasBuffer(bias.size() * sizeOf(s.cd));
  a.upload(A, s.ab);
  b.upload(B, s.ab);
  c.upload(C, s.cd);
  biasBuffer.upload(bias, s.cd);
  Plan plan(s);
  if (s.hasBias()) {
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasBuffer.get()),
              CUBLAS_STATUS_SUCCESS);
  }
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(alpha, beta, a.get(), b.get(), c.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(s.elementsD(), s.cd),
            reference(s, A, B, C, bias, alpha, beta));
}

//===----------------------------------------------------------------------===//
// Results
//===----------------------------------------------------------------------===//

struct Types {
  cudaDataType_t ab, cd;
};
std::string typesName(const testing::TestParamInfo<Types> &info) {
  auto name = [](cudaDataType_t t) {
    return t == CUDA_R_16F    ? "F16"
           : t == CUDA_R_16BF ? "BF16"
           : t == CUDA_R_32F  ? "F32"
                              : "F64";
  };
  return std::string(name(info.param.ab)) + "to" + name(info.param.cd);
}

class CublasLtTypes : public testing::TestWithParam<Types> {
protected:
  Spec spec() const {
    Spec s;
    s.ab = GetParam().ab;
    s.cd = GetParam().cd;
    if (s.ab == CUDA_R_64F) {
      s.compute = CUBLAS_COMPUTE_64F;
      s.scale = CUDA_R_64F;
    }
    return s;
  }
};

TEST_P(CublasLtTypes, SmallIntegerGemmIsExactWithEveryTranspose) {
  for (bool transA : {false, true})
    for (bool transB : {false, true}) {
      Spec s = spec();
      s.transA = transA;
      s.transB = transB;
      expectExact(s, 1, 0, 7 + 2 * transA + transB);
    }
}

TEST_P(CublasLtTypes, AlphaAndBetaScaleProductAndC) {
  expectExact(spec(), 2, -3, 11);
}

TEST_P(CublasLtTypes, BiasAndActivationEpilogues) {
  for (cublasLtEpilogue_t e : {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU,
                               CUBLASLT_EPILOGUE_RELU_BIAS}) {
    Spec s = spec();
    s.epilogue = e;
    SCOPED_TRACE(static_cast<int>(e));
    expectExact(s, 1, 1, 23);
  }
}

TEST_P(CublasLtTypes, RandomOperandsWithinRounding) {
  Spec s = spec();
  s.m = 7;
  s.n = 6;
  s.k = 9;
  s.transA = true;
  s.epilogue = CUBLASLT_EPILOGUE_GELU_BIAS;
  std::mt19937 random(5);
  std::uniform_real_distribution<double> pick(-1, 1);
  auto values = [&](size_t count, cudaDataType_t type) {
    std::vector<double> v(count);
    for (double &x : v)
      x = roundTo(pick(random), type); // what the device holds
    return v;
  };
  std::vector<double> A = values(s.elementsA(), s.ab),
                      B = values(s.elementsB(), s.ab);
  std::vector<double> C = values(s.elementsC(), s.cd), bias = values(s.m, s.cd);
  DeviceBuffer a(A.size() * sizeOf(s.ab)), b(B.size() * sizeOf(s.ab));
  DeviceBuffer c(C.size() * sizeOf(s.cd)), d(s.elementsD() * sizeOf(s.cd));
  DeviceBuffer biasBuffer(bias.size() * sizeOf(s.cd));
  a.upload(A, s.ab);
  b.upload(B, s.ab);
  c.upload(C, s.cd);
  biasBuffer.upload(bias, s.cd);
  Plan plan(s);
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasBuffer.get()),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(0.75, -0.5, a.get(), b.get(), c.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  std::vector<double> got = d.download(s.elementsD(), s.cd);
  std::vector<double> want = reference(s, A, B, C, bias, 0.75, -0.5);
  // One rounding of D, plus FP32 accumulation (FP64 for CUDA_R_64F).
  const double ulp = s.cd == CUDA_R_16F    ? 1.0 / 1024
                     : s.cd == CUDA_R_16BF ? 1.0 / 128
                     : s.cd == CUDA_R_32F  ? 1e-6
                                           : 1e-14;
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got[i], want[i], ulp * std::max(1.0, std::fabs(want[i]))) << i;
}

INSTANTIATE_TEST_SUITE_P(Documented, CublasLtTypes,
                         testing::Values(Types{CUDA_R_16F, CUDA_R_16F},
                                         Types{CUDA_R_16F, CUDA_R_32F},
                                         Types{CUDA_R_16BF, CUDA_R_16BF},
                                         Types{CUDA_R_16BF, CUDA_R_32F},
                                         Types{CUDA_R_32F, CUDA_R_32F},
                                         Types{CUDA_R_64F, CUDA_R_64F}),
                         typesName);

TEST(CudaSimCublasLt, BatchesWithBroadcastOperand) {
  Spec s;
  s.ab = s.cd = CUDA_R_16F;
  s.batch = 3;
  s.strideA = 0; // one A for every batch
  s.m = 4;       // 4 x 4 halves: batches of B and D start 32 bytes apart
  s.n = 4;
  s.k = 4;
  // Strides of 32 bytes need the preference to say so.
  std::vector<double> A = integers(s.elementsA(), -3, 3, 1);
  std::vector<double> B = integers(s.elementsB(), -3, 3, 2);
  DeviceBuffer a(A.size() * 2), b(B.size() * 2), d(s.elementsD() * 2);
  a.upload(A, s.ab);
  b.upload(B, s.ab);
  Plan plan(s);
  plan.setAlignment(32);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  std::vector<double> got = d.download(s.elementsD(), s.cd);
  EXPECT_EQ(got, reference(s, A, B, {}, {}, 1, 0));
  // Batch 2 used A (batch 0's) with its own B: not a repeat of batch 0.
  EXPECT_NE(std::vector<double>(got.begin(), got.begin() + 16),
            std::vector<double>(got.begin() + 32, got.end()));
}

TEST(CudaSimCublasLt, LeadingDimensionsAndInterleavedBatches) {
  // Column-major, as cuBLASLt sees ampc's folded transposes: the batches of
  // A and D interleave (batch stride m, ld 2m: batch 1's columns sit
  // between batch 0's), B's rows are padded (ld k + 1).
  Spec s;
  s.m = 3;
  s.n = 4;
  s.k = 2;
  s.batch = 2;
  const int64_t lda = 2 * s.m, ldb = s.k + 1, ldd = 2 * s.m;
  s.strideA = s.strideC = s.strideD = s.m;
  s.strideB = ldb * s.n;
  Plan plan(s);
  for (auto [layout, ld] : {std::pair{plan.a, lda}, {plan.b, ldb},
                            {plan.c, ldd}, {plan.d, ldd}})
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(
                  layout, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld),
              CUBLAS_STATUS_SUCCESS);
  plan.setAlignment(4);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  const size_t elementsA = lda * s.k, elementsB = s.batch * s.strideB,
               elementsD = ldd * s.n;
  std::vector<double> A = integers(elementsA, -3, 3, 11);
  std::vector<double> B = integers(elementsB, -3, 3, 12);
  DeviceBuffer a(elementsA * 4), b(elementsB * 4), d(elementsD * 4);
  a.upload(A, s.ab);
  b.upload(B, s.ab);
  d.upload(std::vector<double>(elementsD, -100), s.cd);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  std::vector<double> got = d.download(elementsD, s.cd);
  for (int64_t batch = 0; batch < s.batch; ++batch)
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t l = 0; l < s.k; ++l)
          sum += A[batch * s.strideA + i + l * lda] *
                 B[batch * s.strideB + l + j * ldb];
        EXPECT_EQ(got[batch * s.strideD + i + j * ldd], sum)
            << "batch " << batch << " (" << i << ", " << j << ")";
      }
}

TEST(CudaSimCublasLt, LargeOutputsAreMadeInColumnBlocks) {
  // 2048 x 2100: more than the 4M-element product block, so op(B)'s columns
  // come in two blocks (2048, then 52), from B or from B transposed.
  for (bool transB : {false, true}) {
    Spec s;
    s.ab = CUDA_R_16F;
    s.m = 2048;
    s.n = 2100;
    s.k = 3;
    s.transB = transB;
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    expectExact(s, 1, 0, 41 + transB);
  }
}

TEST(CudaSimCublasLt, BiasIsAddedToEachRowOfD) {
  // D is 2 x 3: a bias of 2 entries, one per row (D's rows, not columns).
  Spec s;
  s.m = 2;
  s.n = 3;
  s.k = 1;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  DeviceBuffer a(8), b(12), d(24), bias(8);
  a.upload({1, 2}, CUDA_R_32F);
  b.upload({1, 10, 100}, CUDA_R_32F);
  bias.upload({1000, 2000}, CUDA_R_32F);
  Plan plan(s);
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.get()),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(6, CUDA_R_32F),
            (std::vector<double>{1001, 2002, 1010, 2020, 1100, 2200}));
}

/// The bias gradient a BGRADA / BGRADB GEMM writes (m = 2, n = 3, k = 2,
/// FP32), A and B column-major {1, 2, 3, 4} and {1, 10, ..., 100000}.
std::vector<double> biasGradient(cublasLtEpilogue_t epilogue, bool transA) {
  Spec s;
  s.m = 2;
  s.n = 3;
  s.k = 2;
  s.transA = transA;
  s.epilogue = epilogue;
  DeviceBuffer a(16), b(24), d(24), grad(12);
  a.upload({1, 2, 3, 4}, CUDA_R_32F);
  b.upload({1, 10, 100, 1000, 10000, 100000}, CUDA_R_32F);
  Plan plan(s);
  EXPECT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, grad.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  return grad.download(epilogue == CUBLASLT_EPILOGUE_BGRADA ? 2 : 3,
                       CUDA_R_32F);
}

TEST(CudaSimCublasLt, BiasGradientsSumOverK) {
  // BGRADA: op(A)'s rows over k, one per row of D; through TRANSA the
  // stored columns. BGRADB: op(B)'s columns over k, one per column of D.
  EXPECT_EQ(biasGradient(CUBLASLT_EPILOGUE_BGRADA, false),
            (std::vector<double>{4, 6}));
  EXPECT_EQ(biasGradient(CUBLASLT_EPILOGUE_BGRADA, true),
            (std::vector<double>{3, 7}));
  EXPECT_EQ(biasGradient(CUBLASLT_EPILOGUE_BGRADB, false),
            (std::vector<double>{11, 1100, 110000}));
}

TEST(CudaSimCublasLt, HalfOperandsWriteFp32GradientsUnrounded) {
  // The weight-gradient GEMM of issue 37, item 3: FP16 A/B, FP32 C/D and
  // the bias gradient in D's FP32 (cuBLASLt's default bias type). 2048 + 1
  // is 2049 in FP32 (FP16 has no 2049: its spacing there is 2).
  Spec s;
  s.ab = CUDA_R_16F;
  s.cd = CUDA_R_32F;
  s.m = 1;
  s.n = 1;
  s.k = 2;
  s.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  DeviceBuffer a(256), b(256), d(256), grad(256);
  a.upload({1, 1}, CUDA_R_16F);
  b.upload({2048, 1}, CUDA_R_16F);
  {
    Plan plan(s);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, grad.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(d.download(1, CUDA_R_32F), (std::vector<double>{2049}));
    EXPECT_EQ(grad.download(1, CUDA_R_32F), (std::vector<double>{2049}));
  }
  {
    // An FP16 bias gradient beside the FP32 D is not a combination
    // cuBLASLt takes for these types.
    Plan plan(s);
    int32_t biasType = CUDA_R_16F;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "bias type CUDA_R_16F with D CUDA_R_32F"));
  }
}

TEST(CudaSimCublasLt, BiasGradientEpiloguesAreChecked) {
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_BGRADB;
  DeviceBuffer a(4096), b(4096), d(4096);
  {
    // The gradient goes through the bias pointer: null is an error.
    Plan plan(s);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE,
                          "CUBLASLT_EPILOGUE_BGRADB needs "
                          "CUBLASLT_MATMUL_DESC_BIAS_POINTER"));
    // It is an output: it may not overlap an input.
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, b.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE,
                          "the bias gradient ["));
  }
  {
    // In D's type.
    s.ab = s.cd = CUDA_R_16F;
    Plan plan(s);
    int32_t biasType = CUDA_R_32F;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "bias type CUDA_R_32F with D CUDA_R_16F"));
  }
  {
    // One matrix: batched bias gradients are not simulated.
    s.ab = s.cd = CUDA_R_32F;
    s.batch = 2;
    Plan plan(s);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_EPILOGUE_BGRADB with a batch count of 2"));
  }
}

/// Bit (i, j) of a ReLU mask with `ld` bits per column (the simulation's
/// order: least significant bit first within a byte).
bool maskBit(const std::vector<unsigned char> &mask, int64_t ld, int64_t i,
             int64_t j) {
  const int64_t bit = j * ld + i;
  return (mask[bit / 8] >> (bit % 8)) & 1;
}

TEST(CudaSimCublasLt, ReluMaskEpiloguesAgainstADirectComputation) {
  // Forward: D (3 x 2) = relu(A B + bias) with RELU_AUX_BIAS, the mask
  // set where D is positive, column j's bits from bit j * 128. Backward:
  // dD = A2 B2 with DRELU_BGRAD on that mask: 0 where the bit is clear,
  // and the bias gradient the masked rows summed over the columns.
  Spec s;
  s.m = 3;
  s.n = 2;
  s.k = 2;
  s.epilogue = CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
  const int64_t ld = 128;
  const std::vector<double> av = {1, -2, 3, 4, 5, -6}, bv = {1, 2, -1, 1},
                            biasv = {0, -10, 1};
  DeviceBuffer a(256), b(256), d(256), bias(256), mask(256), a2(256), b2(256),
      d2(256), grad(256);
  a.upload(av, CUDA_R_32F);
  b.upload(bv, CUDA_R_32F);
  bias.upload(biasv, CUDA_R_32F);
  ASSERT_EQ(cudaMemset(mask.get(), 0xA5, 256), cudaSuccess);
  std::vector<double> want(6);
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < 3; ++i) {
      double v = biasv[i];
      for (int64_t kk = 0; kk < 2; ++kk)
        v += av[i + kk * 3] * bv[kk + j * 2];
      want[i + j * 3] = std::max(v, 0.0);
    }
  {
    Plan plan(s);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                           mask.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(d.download(6, CUDA_R_32F), want);
  ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess);
  std::vector<unsigned char> bits(32);
  ASSERT_EQ(cudaMemcpy(bits.data(), mask.get(), bits.size(),
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < 3; ++i)
      EXPECT_EQ(maskBit(bits, ld, i, j), want[i + j * 3] > 0)
          << "(" << i << ", " << j << ")";

  s.epilogue = CUBLASLT_EPILOGUE_DRELU_BGRAD;
  const std::vector<double> a2v = {1, 2, 3, 4, 5, 6}, b2v = {1, -1, 10, 1};
  a2.upload(a2v, CUDA_R_32F);
  b2.upload(b2v, CUDA_R_32F);
  std::vector<double> wantD(6), wantGrad(3, 0);
  for (int64_t j = 0; j < 2; ++j)
    for (int64_t i = 0; i < 3; ++i) {
      double v = 0;
      for (int64_t kk = 0; kk < 2; ++kk)
        v += a2v[i + kk * 3] * b2v[kk + j * 2];
      wantD[i + j * 3] = want[i + j * 3] > 0 ? v : 0;
      wantGrad[i] += wantD[i + j * 3];
    }
  {
    Plan plan(s);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, grad.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                           static_cast<const void *>(mask.get())),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.matmul(1, 0, a2.get(), b2.get(), d2.get(), d2.get()),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(d2.download(6, CUDA_R_32F), wantD);
  EXPECT_EQ(grad.download(3, CUDA_R_32F), wantGrad);
  // Some bits of each kind, or the test proves little.
  EXPECT_NE(std::count(want.begin(), want.end(), 0.0), 0);
  EXPECT_NE(std::count(want.begin(), want.end(), 0.0), 6);

  // DRELU (no bias gradient) writes the same D.
  s.epilogue = CUBLASLT_EPILOGUE_DRELU;
  {
    Plan plan(s);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                           static_cast<const void *>(mask.get())),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaMemset(d2.get(), 0, 256), cudaSuccess);
    ASSERT_EQ(plan.matmul(1, 0, a2.get(), b2.get(), d2.get(), d2.get()),
              CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(d2.download(6, CUDA_R_32F), wantD);
}

TEST(CudaSimCublasLt, ReluMaskEpiloguesAreChecked) {
  Spec s;
  s.epilogue = CUBLASLT_EPILOGUE_RELU_AUX;
  DeviceBuffer a(4096), b(4096), d(4096), mask(4096);
  {
    // cublasLt.h: AUX_LD "Must be divisible by 128 and be no less than the
    // number of rows in the output matrix" (bits).
    Plan plan(s);
    for (int64_t ld : {int64_t(0), int64_t(64), int64_t(130)}) {
      ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_INVALID_VALUE,
                            "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD " +
                                std::to_string(ld)))
          << ld;
    }
    // The mask is needed.
    int64_t ld = 128;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE,
                          "CUBLASLT_EPILOGUE_RELU_AUX needs "
                          "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER"));
    // An output: apart from the inputs.
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, a.get()),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE, "the ReLU mask ["));
    // Its alignment is the heuristic's, from the pointer at the query.
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                           static_cast<void *>(mask.at(0))),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
                           static_cast<void *>(mask.at(16))),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE,
                          "the ReLU mask 0x"));
    // A mask type other than the bit mask is not simulated.
    int32_t auxType = CUDA_R_16F;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE, auxType),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE"));
  }
  {
    // One matrix: batched masks are not simulated.
    s.epilogue = CUBLASLT_EPILOGUE_DRELU;
    s.batch = 2;
    Plan plan(s);
    int64_t ld = 128;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, ld),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_EPILOGUE_DRELU with a batch count of 2"));
  }
}

TEST(CudaSimCublasLt, GeluIsTheTanhForm) {
  // x = 1: tanh form 0.8411920, erf form 0.8413447.
  Spec s;
  s.m = s.n = s.k = 1;
  s.epilogue = CUBLASLT_EPILOGUE_GELU;
  DeviceBuffer a(4), b(4), d(4);
  a.upload({1}, CUDA_R_32F);
  b.upload({1}, CUDA_R_32F);
  Plan plan(s);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_NEAR(d.download(1, CUDA_R_32F)[0], geluTanh(1), 1e-6);
}

TEST(CudaSimCublasLt, Fp64GemmTakesTheBiasEpilogues) {
  for (cublasLtEpilogue_t e :
       {CUBLASLT_EPILOGUE_BIAS, CUBLASLT_EPILOGUE_RELU_BIAS,
        CUBLASLT_EPILOGUE_GELU_BIAS}) {
    Spec s;
    s.compute = CUBLAS_COMPUTE_64F;
    s.scale = s.ab = s.cd = CUDA_R_64F;
    s.epilogue = e;
    SCOPED_TRACE(static_cast<int>(e));
    if (e == CUBLASLT_EPILOGUE_GELU_BIAS) {
      Plan plan(s);
      DeviceBuffer bias(s.m * 8);
      ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.get()),
                CUBLAS_STATUS_SUCCESS);
      EXPECT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    } else {
      expectExact(s, 1, 0, 31);
    }
  }
}

TEST(CudaSimCublasLt, HalfOutputRoundsTiesToEven) {
  // Row 0: 2048 + 1 = 2049, halfway between the halves 2048 and 2050: even
  // 2048. Row 1: 2048 + 3 = 2051, halfway between 2050 and 2052: even 2052
  // (truncation would give 2050, rounding half up 2050 for row 0).
  Spec s;
  s.ab = s.cd = CUDA_R_16F;
  s.m = 2;
  s.n = 1;
  s.k = 2;
  DeviceBuffer a(8), b(4), d(4);
  a.upload({2048, 2048, 1, 3}, CUDA_R_16F); // column-major 2 x 2
  b.upload({1, 1}, CUDA_R_16F);
  Plan plan(s);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(2, CUDA_R_16F), (std::vector<double>{2048, 2052}));
}

TEST(CudaSimCublasLt, Bfloat16OutputRoundsTiesToEven) {
  // BF16 holds 8 significant bits: 257 and 259 are halfway cases.
  Spec s;
  s.ab = s.cd = CUDA_R_16BF;
  s.m = 2;
  s.n = 1;
  s.k = 2;
  DeviceBuffer a(8), b(4), d(4);
  a.upload({256, 256, 1, 3}, CUDA_R_16BF);
  b.upload({1, 1}, CUDA_R_16BF);
  Plan plan(s);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(2, CUDA_R_16BF), (std::vector<double>{256, 260}));
}

TEST(CudaSimCublasLt, OutputIsRoundedOnceAfterTheBias) {
  // 2049 + 1 in FP32 is 2050, a half. Rounding the product first (2048)
  // and again after the bias (2049 -> 2048) would give 2048.
  Spec s;
  s.ab = s.cd = CUDA_R_16F;
  s.m = 1;
  s.n = 1;
  s.k = 2;
  s.epilogue = CUBLASLT_EPILOGUE_BIAS;
  DeviceBuffer a(4), b(4), d(2), bias(2);
  a.upload({2048, 1}, CUDA_R_16F);
  b.upload({1, 1}, CUDA_R_16F);
  bias.upload({1}, CUDA_R_16F);
  Plan plan(s);
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias.get()),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(1, CUDA_R_16F), (std::vector<double>{2050}));
}

TEST(CudaSimCublasLt, BetaZeroLeavesCUnread) {
  // C == D, freshly allocated (NaN in the simulation) and never written.
  Spec s;
  DeviceBuffer a(s.elementsA() * 4), b(s.elementsB() * 4), d(s.elementsD() * 4);
  std::vector<unsigned char> nan(s.elementsD() * 4, 0xFF);
  ASSERT_EQ(cudaMemcpy(d.get(), nan.data(), nan.size(), cudaMemcpyHostToDevice),
            cudaSuccess);
  std::vector<double> A = integers(s.elementsA(), -2, 2, 3);
  std::vector<double> B = integers(s.elementsB(), -2, 2, 4);
  a.upload(A, CUDA_R_32F);
  b.upload(B, CUDA_R_32F);
  Plan plan(s);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(s.elementsD(), CUDA_R_32F),
            reference(s, A, B, {}, {}, 1, 0));
}

TEST(CudaSimCublasLt, OutOfPlaceCWithLeadingDimensionZeroBroadcasts) {
  // C's ld 0: every column of C is its first.
  Spec s;
  s.m = 2;
  s.n = 3;
  s.k = 1;
  DeviceBuffer a(8), b(12), c(8), d(24);
  a.upload({0, 0}, CUDA_R_32F);
  b.upload({0, 0, 0}, CUDA_R_32F);
  c.upload({5, 7}, CUDA_R_32F);
  Plan plan(s);
  cublasLtMatrixLayoutDestroy(plan.c);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&plan.c, CUDA_R_32F, 2, 3, 0),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.matmul(1, 1, a.get(), b.get(), c.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(6, CUDA_R_32F), (std::vector<double>{5, 7, 5, 7, 5, 7}));
}

TEST(CudaSimCublasLt, NullCdescMeansDdesc) {
  Spec s;
  std::vector<double> A = integers(s.elementsA(), -2, 2, 8);
  std::vector<double> B = integers(s.elementsB(), -2, 2, 9);
  std::vector<double> C = integers(s.elementsC(), -2, 2, 10);
  DeviceBuffer a(A.size() * 4), b(B.size() * 4), d(s.elementsD() * 4);
  a.upload(A, CUDA_R_32F);
  b.upload(B, CUDA_R_32F);
  d.upload(C, CUDA_R_32F);
  Plan plan(s);
  int returned = 0;
  ASSERT_EQ(cublasLtMatmulAlgoGetHeuristic(
                plan.handle, plan.desc, plan.a, plan.b, nullptr, plan.d,
                plan.preference, 1, &plan.result, &returned),
            CUBLAS_STATUS_SUCCESS);
  float one = 1;
  ASSERT_EQ(cublasLtMatmul(plan.handle, plan.desc, &one, a.get(), plan.a,
                           b.get(), plan.b, &one, d.get(), nullptr, d.get(),
                           plan.d, &plan.result.algo, nullptr, 0, 0),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(d.download(s.elementsD(), CUDA_R_32F),
            reference(s, A, B, C, {}, 1, 1));
}

TEST(CudaSimCublasLt, QueuedWorkKeepsTheCallsArguments) {
  // The descriptors are gone and alpha's variable changed before the
  // stream runs the GEMM; the GEMM uses what the call was given.
  Spec s;
  std::vector<double> A = integers(s.elementsA(), -2, 2, 12);
  std::vector<double> B = integers(s.elementsB(), -2, 2, 13);
  DeviceBuffer a(A.size() * 4), b(B.size() * 4), d(s.elementsD() * 4);
  a.upload(A, CUDA_R_32F);
  b.upload(B, CUDA_R_32F);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  {
    Plan plan(s);
    ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cudaStreamSynchronize(0), cudaSuccess); // uploads done
    float alpha = 3, beta = 0;
    ASSERT_EQ(cublasLtMatmul(plan.handle, plan.desc, &alpha, a.get(), plan.a,
                             b.get(), plan.b, &beta, d.get(), plan.c, d.get(),
                             plan.d, &plan.result.algo, nullptr, 0, stream),
              CUBLAS_STATUS_SUCCESS);
    alpha = 100;
  }
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(d.download(s.elementsD(), CUDA_R_32F),
            reference(s, A, B, {}, {}, 3, 0));
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

//===----------------------------------------------------------------------===//
// The heuristic
//===----------------------------------------------------------------------===//

TEST(CudaSimCublasLt, HeuristicReturnsOneAlgoWithoutWorkspace) {
  Plan plan(Spec{});
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.result.state, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.result.workspaceSize, 0u);
  EXPECT_EQ(plan.result.wavesCount, 1.0f);
}

TEST(CudaSimCublasLt, HeuristicRefusesCombinationsCuBlasLtLacks) {
  struct Case {
    cublasComputeType_t compute;
    cudaDataType_t scale, a, b, cd;
    const char *needle;
  } cases[] = {
      {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F, CUDA_R_16F,
       "is not among the type combinations cuBLASLt supports"},
      {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16F, CUDA_R_16BF,
       "is not among the type combinations cuBLASLt supports"},
      {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F,
       "is not among the type combinations cuBLASLt supports"},
      {CUBLAS_COMPUTE_32F, CUDA_R_32F, CUDA_R_16F, CUDA_R_16BF, CUDA_R_32F,
       "A is CUDA_R_16F but B is CUDA_R_16BF"},
      {CUBLAS_COMPUTE_64F, CUDA_R_32F, CUDA_R_64F, CUDA_R_64F, CUDA_R_64F,
       "scale type CUDA_R_32F with CUBLAS_COMPUTE_64F"},
      {CUBLAS_COMPUTE_64F, CUDA_R_64F, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
       "is not among the type combinations cuBLASLt supports"},
      {CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F, CUDA_R_32F, CUDA_R_32F,
       CUDA_R_32F, "CUBLAS_COMPUTE_32F_FAST_TF32 is not simulated"},
  };
  for (const Case &c : cases) {
    Spec s;
    s.compute = c.compute;
    s.scale = c.scale;
    s.ab = c.a;
    s.cd = c.cd;
    Plan plan(s);
    cublasLtMatrixLayoutDestroy(plan.b);
    plan.b = makeLayout(c.b, s.k, s.n, 1, 0);
    EXPECT_TRUE(
        failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED, c.needle))
        << c.needle;
  }
}

TEST(CudaSimCublasLt, HeuristicRefusesUnsupportedEpilogues) {
  Spec s;
  s.ab = s.cd = CUDA_R_16F;
  {
    Plan plan(s);
    ASSERT_EQ(
        plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_GELU_AUX),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_EPILOGUE_GELU_AUX is not simulated"));
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE,
                           CUBLASLT_EPILOGUE_DGELU_BGRAD),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_EPILOGUE_DGELU_BGRAD is not simulated"));
  }
  {
    // The bias is in D's type.
    s.epilogue = CUBLASLT_EPILOGUE_BIAS;
    Plan plan(s);
    int32_t biasType = CUDA_R_32F;
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, biasType),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "bias type CUDA_R_32F with D CUDA_R_16F"));
  }
}

TEST(CudaSimCublasLt, HeuristicChecksShapes) {
  {
    Plan plan(Spec{}); // A 3 x 4, B 4 x 5
    cublasLtMatrixLayoutDestroy(plan.b);
    plan.b = makeLayout(CUDA_R_32F, 3, 5, 1, 0);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_INVALID_VALUE,
                          "op(A) (A 3x4, TRANSA CUBLAS_OP_N) has 4 columns but "
                          "op(B) (B 3x5, TRANSB CUBLAS_OP_N) has 3 rows (k "
                          "differs)"));
  }
  {
    Plan plan(Spec{});
    int64_t ld = 2;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(
                  plan.a, CUBLASLT_MATRIX_LAYOUT_LD, &ld, sizeof ld),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(
        failsWith(plan.heuristic(), CUBLAS_STATUS_INVALID_VALUE,
                  "Adesc: leading dimension 2 is less than its 3 rows"));
  }
  {
    Spec s;
    s.batch = 2;
    Plan plan(s);
    int32_t one = 1;
    ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(
                  plan.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &one, sizeof one),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_INVALID_VALUE,
                          "Bdesc has batch count 1 but Ddesc has 2"));
  }
  {
    Spec s;
    s.batch = 2;
    s.strideC = s.strideD = 0;
    Plan plan(s);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_INVALID_VALUE,
                          "the batches would write over each other"));
  }
}

//===----------------------------------------------------------------------===//
// Strict checks of cublasLtMatmul
//===----------------------------------------------------------------------===//

class CudaSimCublasLtStrict : public testing::Test {
protected:
  CudaSimCublasLtStrict() : plan(Spec{}), a(4096), b(4096), d(4096) {}
  void SetUp() override { ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS); }
  Plan plan;
  DeviceBuffer a, b, d;
};

TEST_F(CudaSimCublasLtStrict, OutputOverlappingAnInput) {
  // A spans 48 bytes from the buffer's start; D starts 32 bytes in.
  DeviceBuffer shared(4096);
  plan.setAlignment(16);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 0, shared.get(), b.get(), shared.at(32), shared.at(32)),
      CUBLAS_STATUS_INVALID_VALUE, "overlaps A ["));
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 0, shared.get(), b.get(), shared.at(32), shared.at(32)),
      CUBLAS_STATUS_INVALID_VALUE,
      "cuBLASLt does not allow its output to overlap an input other than C == "
      "D"));
}

TEST_F(CudaSimCublasLtStrict, COverlappingDWithoutBeingD) {
  // D spans 60 bytes from the buffer's start; C starts 32 bytes in.
  DeviceBuffer shared(4096);
  plan.setAlignment(16);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 1, a.get(), b.get(), shared.at(32), shared.at(0)),
      CUBLAS_STATUS_INVALID_VALUE, "without being C (in place needs C == D"));
}

TEST_F(CudaSimCublasLtStrict, InPlaceWithDifferentLayouts) {
  int64_t ld = 4;
  ASSERT_EQ(cublasLtMatrixLayoutSetAttribute(plan.c, CUBLASLT_MATRIX_LAYOUT_LD,
                                             &ld, sizeof ld),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 1, a.get(), b.get(), d.get(), d.get()),
      CUBLAS_STATUS_INVALID_VALUE,
      "C == D (in place) needs Cdesc equal to Ddesc, but they differ in "
      "ld: 4 and 3 (C and D)"));
}

TEST_F(CudaSimCublasLtStrict, PointerLessAlignedThanTheDefault256) {
  // No preference set: the algo assumes cuBLASLt's default 256 bytes.
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 0, a.at(64), b.get(), d.get(), d.get()),
      CUBLAS_STATUS_INVALID_VALUE,
      "is 64-byte aligned, but the algo was chosen for 256-byte alignment "
      "(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES)"));
  // Told, the heuristic chooses for 64 bytes, and the call goes through.
  plan.setAlignment(64);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.matmul(1, 0, a.at(64), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
}

TEST_F(CudaSimCublasLtStrict, NullAlgoMeansDefaultAlignment) {
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.at(128),
                                    d.at(128), 0, nullptr, false),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "(cuBLASLt's default without a preference)"));
}

TEST(CudaSimCublasLt, BatchStrideLessAlignedThanTheAlgo) {
  Spec s;
  s.batch = 2; // A's batch stride: 12 floats, 48 bytes
  Plan plan(s);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  DeviceBuffer a(4096), b(4096), d(4096);
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "A's batch stride of 48 bytes is not a multiple of the "
                        "256-byte alignment"));
}

TEST_F(CudaSimCublasLtStrict, HostPointer) {
  std::vector<float> host(64);
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 0, host.data(), b.get(), d.get(), d.get()),
      CUBLAS_STATUS_INVALID_VALUE, "is a host pointer, not device memory"));
}

TEST_F(CudaSimCublasLtStrict, PinnedHostPointer) {
  void *pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned, 4096), cudaSuccess);
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), pinned, d.get(), d.get()),
                        CUBLAS_STATUS_INVALID_VALUE, "B ["));
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), pinned, d.get(), d.get()),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "is pinned host memory (cudaMallocHost), not device "
                        "memory"));
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
}

TEST_F(CudaSimCublasLtStrict, FreedPointer) {
  void *freed = nullptr;
  ASSERT_EQ(cudaMalloc(&freed, 4096), cudaSuccess);
  ASSERT_EQ(cudaFree(freed), cudaSuccess);
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), freed, freed),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "is in device memory that cudaFree released (use after "
                        "free)"));
}

TEST_F(CudaSimCublasLtStrict, OperandRunsPastItsAllocation) {
  DeviceBuffer small(32); // A needs 48 bytes
  EXPECT_TRUE(
      failsWith(plan.matmul(1, 0, small.get(), b.get(), d.get(), d.get()),
                CUBLAS_STATUS_INVALID_VALUE,
                "runs past the end of its device allocation"));
}

TEST_F(CudaSimCublasLtStrict, AlgoFromAnotherProblem) {
  cublasLtMatmulAlgo_t other = plan.result.algo;
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(
      plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get(), 0, &other),
      CUBLAS_STATUS_INVALID_VALUE, "for a different problem"));
  cublasLtMatmulAlgo_t zero = {};
  EXPECT_TRUE(
      failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get(), 0, &zero),
                CUBLAS_STATUS_INVALID_VALUE,
                "algo was not returned by cublasLtMatmulAlgoGetHeuristic"));
}

TEST_F(CudaSimCublasLtStrict, BiasEpilogueWithoutBias) {
  ASSERT_EQ(
      plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU_BIAS),
      CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "CUBLASLT_EPILOGUE_RELU_BIAS needs "
                        "CUBLASLT_MATMUL_DESC_BIAS_POINTER, which is null"));
}

TEST_F(CudaSimCublasLtStrict, BiasLessAlignedThanAtTheQuery) {
  // The heuristic took the bias alignment from the (null) pointer: 256.
  DeviceBuffer bias(4096);
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  const void *biasPointer = bias.at(64);
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_BIAS_POINTER, biasPointer),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "set the bias pointer before the query"));
  // Set before the query, the same pointer is fine.
  ASSERT_EQ(plan.heuristic(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(plan.matmul(1, 0, a.get(), b.get(), d.get(), d.get()),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamSynchronize(0), cudaSuccess);
}

TEST_F(CudaSimCublasLtStrict, MisalignedWorkspace) {
  float one = 1, zero = 0;
  DeviceBuffer workspace(4096);
  EXPECT_TRUE(failsWith(
      cublasLtMatmul(plan.handle, plan.desc, &one, a.get(), plan.a, b.get(),
                     plan.b, &zero, d.get(), plan.c, d.get(), plan.d,
                     &plan.result.algo, workspace.at(128), 1024, 0),
      CUBLAS_STATUS_INVALID_VALUE,
      "is not 256-byte aligned, as cuBLASLt requires"));
}

TEST_F(CudaSimCublasLtStrict, ScalarsInDeviceMemory) {
  float zero = 0;
  EXPECT_TRUE(
      failsWith(cublasLtMatmul(plan.handle, plan.desc, d.get(), a.get(), plan.a,
                               b.get(), plan.b, &zero, d.get(), plan.c, d.get(),
                               plan.d, &plan.result.algo, nullptr, 0, 0),
                CUBLAS_STATUS_INVALID_VALUE,
                "is device memory, but the pointer mode is "
                "CUBLASLT_POINTER_MODE_HOST"));
}

TEST_F(CudaSimCublasLtStrict, DestroyedDescriptorsAndHandle) {
  cublasLtMatrixLayout_t gone = nullptr;
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&gone, CUDA_R_32F, 3, 4, 3),
            CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutDestroy(gone), CUBLAS_STATUS_SUCCESS);
  float one = 1;
  EXPECT_TRUE(failsWith(
      cublasLtMatmul(plan.handle, plan.desc, &one, a.get(), gone, b.get(),
                     plan.b, &one, d.get(), plan.c, d.get(), plan.d,
                     &plan.result.algo, nullptr, 0, 0),
      CUBLAS_STATUS_INVALID_VALUE, "is not a live cublasLtMatrixLayout_t"));
  EXPECT_TRUE(failsWith(cublasLtMatrixLayoutDestroy(gone),
                        CUBLAS_STATUS_INVALID_VALUE, "destroyed twice"));
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_TRUE(failsWith(
      cublasLtMatmul(handle, plan.desc, &one, a.get(), plan.a, b.get(), plan.b,
                     &one, d.get(), plan.c, d.get(), plan.d, &plan.result.algo,
                     nullptr, 0, 0),
      CUBLAS_STATUS_NOT_INITIALIZED, "is not a live cuBLASLt handle"));
}

//===----------------------------------------------------------------------===//
// Attributes and status strings
//===----------------------------------------------------------------------===//

TEST(CudaSimCublasLt, AttributesRoundTripAndCheckSizes) {
  Plan plan(Spec{});
  cublasOperation_t op = CUBLAS_OP_T;
  ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_TRANSA, op),
            CUBLAS_STATUS_SUCCESS);
  int32_t got = -1;
  size_t written = 0;
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(plan.desc,
                                           CUBLASLT_MATMUL_DESC_TRANSA, &got,
                                           sizeof got, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(got, CUBLAS_OP_T);
  EXPECT_EQ(written, sizeof got);
  // Size query: sizeInBytes 0.
  ASSERT_EQ(cublasLtMatmulDescGetAttribute(plan.desc,
                                           CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                           nullptr, 0, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(written, sizeof(void *));

  int64_t wide = CUBLAS_OP_N;
  EXPECT_TRUE(failsWith(plan.setDesc(CUBLASLT_MATMUL_DESC_TRANSB, wide),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "CUBLASLT_MATMUL_DESC_TRANSB takes 4 bytes, got 8"));
  // 63: no attribute, but inside the enum's range (its enumerators need 6
  // bits); a value outside it would be undefined behaviour in C++.
  EXPECT_TRUE(failsWith(
      plan.setDesc(static_cast<cublasLtMatmulDescAttributes_t>(63), op),
      CUBLAS_STATUS_INVALID_VALUE, "unknown attribute 63"));
  EXPECT_TRUE(failsWith(plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE, 12345u),
                        CUBLAS_STATUS_INVALID_VALUE,
                        "12345 is not a cublasLtEpilogue_t"));
  void *scale = nullptr;
  EXPECT_TRUE(failsWith(
      plan.setDesc(CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER, scale),
      CUBLAS_STATUS_NOT_SUPPORTED,
      "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER is not simulated"));

  int32_t order = CUBLASLT_ORDER_ROW;
  EXPECT_TRUE(
      failsWith(cublasLtMatrixLayoutSetAttribute(
                    plan.a, CUBLASLT_MATRIX_LAYOUT_ORDER, &order, sizeof order),
                CUBLAS_STATUS_NOT_SUPPORTED,
                "only CUBLASLT_ORDER_COL (column-major) is simulated"));
  uint64_t rows = 0;
  ASSERT_EQ(cublasLtMatrixLayoutGetAttribute(plan.a,
                                             CUBLASLT_MATRIX_LAYOUT_ROWS, &rows,
                                             sizeof rows, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(rows, 3u);

  uint32_t alignment = 0;
  ASSERT_EQ(cublasLtMatmulPreferenceGetAttribute(
                plan.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                &alignment, sizeof alignment, &written),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(alignment, 256u); // cuBLASLt's documented default
}

TEST(CudaSimCublasLt, StatusStringNamesTheStatusAndTheDetail) {
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS),
               "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED),
               "CUBLAS_STATUS_NOT_SUPPORTED");
  cublasLtMatmulDesc_t desc = nullptr;
  EXPECT_EQ(cublasLtMatmulDescCreate(&desc, static_cast<cublasComputeType_t>(1),
                                     CUDA_R_32F),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_STREQ(
      cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE),
      "CUBLAS_STATUS_INVALID_VALUE: cublasLtMatmulDescCreate: 1 is not "
      "a cublasComputeType_t");
}

//===----------------------------------------------------------------------===//
// FP8 (issue 42)
//===----------------------------------------------------------------------===//

/// One FP8 GEMM in the "TN" form: D (m x n, `dType`) = op(A) op(B) with A
/// stored k x m (`aType`, transposed) and B k x n (`bType`).
struct Fp8Gemm {
  cudaDataType_t aType = CUDA_R_8F_E4M3, bType = CUDA_R_8F_E5M2,
                 dType = CUDA_R_16BF;
  int64_t m = 16, n = 5, k = 32;
  cublasOperation_t transA = CUBLAS_OP_T, transB = CUBLAS_OP_N;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;

  cublasLtHandle_t handle = nullptr;
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  cublasLtMatmulHeuristicResult_t result = {};

  void create() {
    ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatmulDescCreate(&desc, compute, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(set(CUBLASLT_MATMUL_DESC_TRANSA, transA), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(set(CUBLASLT_MATMUL_DESC_TRANSB, transB), CUBLAS_STATUS_SUCCESS);
    const int64_t aRows = transA == CUBLAS_OP_T ? k : m;
    const int64_t aCols = transA == CUBLAS_OP_T ? m : k;
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, aType, aRows, aCols, aRows),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&b, bType, k, n, k),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatrixLayoutCreate(&d, dType, m, n, m),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(cublasLtMatmulPreferenceCreate(&preference),
              CUBLAS_STATUS_SUCCESS);
  }
  ~Fp8Gemm() {
    cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, d})
      cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
    cublasLtDestroy(handle);
  }
  template <typename T>
  cublasStatus_t set(cublasLtMatmulDescAttributes_t attribute, const T &value) {
    return cublasLtMatmulDescSetAttribute(desc, attribute, &value,
                                          sizeof value);
  }
  cublasStatus_t heuristic() {
    int returned = 0;
    return cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, d, d, preference,
                                          1, &result, &returned);
  }
  cublasStatus_t matmul(float alpha, const void *A, const void *B, void *D) {
    const float beta = 0;
    return cublasLtMatmul(handle, desc, &alpha, A, a, B, b, &beta, D, d, D, d,
                          &result.algo, nullptr, 0, 0);
  }
};

std::vector<uint8_t> fp8Codes(const std::vector<double> &values,
                              cudaDataType_t type) {
  std::vector<uint8_t> codes;
  for (double v : values) {
    const float f = static_cast<float>(v);
    codes.push_back(type == CUDA_R_8F_E4M3 ? ampc::fp8::encodeE4M3(f, false)
                                           : ampc::fp8::encodeE5M2(f, false));
  }
  return codes;
}

/// E4M3 x E5M2 (the gradients' pair) and E4M3 x E4M3 (the forward's), BF16
/// and FP32 D: D = ((alpha * scaleA) * scaleB) * op(A) op(B), rounded once,
/// and the amax of |D| before the rounding, against a direct computation on
/// operands exact in both formats (integers, so every sum is exact).
TEST(CudaSimCublasLtFp8, ScalesMultiplyTheProductAndTheAmaxIsWritten) {
  for (auto [bType, dType] : {std::pair{CUDA_R_8F_E5M2, CUDA_R_16BF},
                              std::pair{CUDA_R_8F_E4M3, CUDA_R_32F},
                              std::pair{CUDA_R_8F_E4M3, CUDA_R_16F}}) {
    SCOPED_TRACE(testing::Message() << "B type " << bType << " D type "
                                    << dType);
    Fp8Gemm g;
    g.bType = bType;
    g.dType = dType;
    g.create();
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_FAST_ACCUM, int8_t{1}),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<double> A = integers(g.k * g.m, -6, 6, 1);
    const std::vector<double> B = integers(g.k * g.n, -4, 4, 2);
    DeviceBuffer a(A.size()), b(B.size()), d(g.m * g.n * 4), scalars(16);
    std::vector<uint8_t> aCodes = fp8Codes(A, g.aType),
                         bCodes = fp8Codes(B, g.bType);
    ASSERT_EQ(cudaMemcpy(a.get(), aCodes.data(), aCodes.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.get(), bCodes.data(), bCodes.size(),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
    const float scaleA = 0.5f, scaleB = 0.375f, alpha = 3.0f;
    scalars.upload({scaleA, scaleB, -1.0}, CUDA_R_32F);
    const void *aScale = scalars.at(0), *bScale = scalars.at(4);
    void *amax = scalars.at(8);
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, aScale),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, bScale),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.matmul(alpha, a.get(), b.get(), d.get()),
              CUBLAS_STATUS_SUCCESS);
    const std::vector<double> D = d.download(g.m * g.n, dType);
    const double factor = static_cast<float>(alpha * scaleA) * scaleB;
    double wantAmax = 0;
    for (int64_t j = 0; j < g.n; ++j)
      for (int64_t i = 0; i < g.m; ++i) {
        double sum = 0;
        for (int64_t l = 0; l < g.k; ++l)
          sum += A[l + i * g.k] * B[l + j * g.k];
        const double v = static_cast<float>(factor * sum);
        wantAmax = std::max(wantAmax, std::fabs(v));
        EXPECT_EQ(D[i + j * g.m], roundTo(v, dType)) << i << ", " << j;
      }
    EXPECT_EQ(scalars.download(1, CUDA_R_32F, 8)[0], wantAmax);
    EXPECT_GT(wantAmax, 0);
  }
}

/// Null scale pointers mean 1; an FP8 code's value is decoded exactly (a
/// subnormal and the largest finite value of each format).
TEST(CudaSimCublasLtFp8, NullScalesAreOneAndCodesDecodeExactly) {
  Fp8Gemm g;
  g.m = 16, g.n = 1, g.k = 16;
  g.dType = CUDA_R_32F;
  g.create();
  ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
  // Row i of op(A) holds a one at column i; B holds one value per row.
  std::vector<uint8_t> aCodes(g.k * g.m, 0), bCodes(g.k);
  for (int64_t i = 0; i < g.m; ++i)
    aCodes[i + i * g.k] = ampc::fp8::encodeE4M3(1.0f);
  for (int64_t l = 0; l < g.k; ++l)
    bCodes[l] = static_cast<uint8_t>(l == 0 ? 0x01 : l == 1 ? 0x7B : 0x80 | l);
  DeviceBuffer a(aCodes.size()), b(bCodes.size()), d(g.m * 4);
  ASSERT_EQ(cudaMemcpy(a.get(), aCodes.data(), aCodes.size(),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(cudaMemcpy(b.get(), bCodes.data(), bCodes.size(),
                       cudaMemcpyHostToDevice),
            cudaSuccess);
  ASSERT_EQ(g.matmul(1.0f, a.get(), b.get(), d.get()), CUBLAS_STATUS_SUCCESS);
  const std::vector<double> D = d.download(g.m, CUDA_R_32F);
  EXPECT_EQ(D[0], std::ldexp(1.0, -16)); // E5M2's smallest subnormal
  EXPECT_EQ(D[1], 57344.0);              // E5M2's largest finite value
  for (int64_t l = 2; l < g.k; ++l)
    EXPECT_EQ(D[l], ampc::fp8::decodeE5M2(static_cast<uint8_t>(0x80 | l)));
}

/// Each rule of the FP8 GEMMs refused once, with the message checked.
TEST(CudaSimCublasLtFp8, RulesAreEnforced) {
  // Each case changes the GEMM before its descriptors are made.
  const std::pair<std::function<void(Fp8Gemm &)>, const char *> cases[] = {
      {[](Fp8Gemm &g) { g.aType = CUDA_R_8F_E5M2; }, "both CUDA_R_8F_E5M2"},
      {[](Fp8Gemm &g) { g.transA = CUBLAS_OP_N; }, "the \"TN\" form"},
      {[](Fp8Gemm &g) { g.bType = CUDA_R_16BF; }, "take FP8 A and B"},
      {[](Fp8Gemm &g) { g.k = 24; }, "lda is 24 bytes, not a multiple of 16"},
      {[](Fp8Gemm &g) { g.m = 12; }, "ldc is 24 bytes, not a multiple of 16"},
      {[](Fp8Gemm &g) { g.dType = CUDA_R_8F_E4M3; },
       "an FP8 D (CUDA_R_8F_E4M3, with D_SCALE_POINTER) is not simulated"},
      {[](Fp8Gemm &g) { g.compute = CUBLAS_COMPUTE_32F_PEDANTIC; },
       "FP8 needs CUBLAS_COMPUTE_32F and CUDA_R_32F"},
  };
  for (const auto &[change, message] : cases) {
    Fp8Gemm g;
    change(g);
    g.create();
    EXPECT_TRUE(failsWith(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED, message));
  }
  {
    Fp8Gemm g;
    g.create();
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_RELU),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "CUBLASLT_EPILOGUE_RELU with CUDA_R_16BF D is not "
                          "simulated for FP8"));
  }
  {
    Fp8Gemm g;
    g.create();
    uint32_t eight = 8;
    ASSERT_EQ(cublasLtMatmulPreferenceSetAttribute(
                  g.preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                  &eight, sizeof eight),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(g.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "MIN_ALIGNMENT_B_BYTES is 8; FP8 GEMMs need"));
  }
  {
    // A scale on a GEMM without FP8 operands.
    Plan plan(Spec{});
    DeviceBuffer scale(4);
    const void *pointer = scale.get();
    ASSERT_EQ(plan.setDesc(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, pointer),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(plan.heuristic(), CUBLAS_STATUS_NOT_SUPPORTED,
                          "takes them for FP8 A and B only"));
  }
  {
    // A scale in host memory, found at the call.
    Fp8Gemm g;
    g.create();
    float host = 1;
    const void *pointer = &host;
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, pointer),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    DeviceBuffer a(g.k * g.m), b(g.k * g.n), d(g.m * g.n * 2);
    EXPECT_TRUE(failsWith(g.matmul(1.0f, a.get(), b.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE,
                          "A's scale (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER)"));
  }
  {
    // The amax inside D.
    Fp8Gemm g;
    g.create();
    DeviceBuffer a(g.k * g.m), b(g.k * g.n), d(g.m * g.n * 2);
    void *amax = d.at(8);
    ASSERT_EQ(g.set(CUBLASLT_MATMUL_DESC_AMAX_D_POINTER, amax),
              CUBLAS_STATUS_SUCCESS);
    ASSERT_EQ(g.heuristic(), CUBLAS_STATUS_SUCCESS);
    EXPECT_TRUE(failsWith(g.matmul(1.0f, a.get(), b.get(), d.get()),
                          CUBLAS_STATUS_INVALID_VALUE, "overlaps D"));
  }
}

} // namespace
