//===- CublasLt.cpp - cuBLASLt's matmul on the CPU ------------------------===//
//
// The part of cuBLASLt the CUDA target uses (the handle, the matmul, layout
// and preference descriptors, the heuristic and cublasLtMatmul), defined
// against cuBLASLt's own declarations (cublasLt.h), with the documented
// contract checked at the call instead of left to a fault or a wrong result:
//
// - cublasLtMatmul validates everything before it queues the GEMM on the
//   stream, and says by name what is wrong: operands that are not live
//   device memory, an output that overlaps an input (other than C == D with
//   Ddesc == Cdesc), pointers and batch strides less aligned than the
//   heuristic was told, an algo obtained for another problem, shapes that do
//   not chain. The queued work captures the problem by value (descriptors
//   may change or go once the call returns, as with cuBLASLt) and reads the
//   operands when the stream runs it.
// - The heuristic accepts exactly the type combinations cuBLASLt documents
//   and the simulation implements; anything else is CUBLAS_STATUS_NOT_SUPPORTED
//   with a message that says which of the two it is.
// - Numerics: operands are widened to the compute type (FP32, or FP64 for
//   CUBLAS_COMPUTE_64F), multiplied by OpenBLAS, the epilogue (alpha, beta C,
//   bias, activation) is applied in the compute type, and D is rounded once,
//   to nearest even.
//
// Sources for the contract (the cuBLAS documentation, docs.nvidia.com/cuda/
// cublas/, and cublasLt.h of CUDA 13.1, the headers this file compiles
// against):
// - MIN_ALIGNMENT_{A,B,C,D}_BYTES default to 256 (cublasLt.h,
//   cublasLtMatmulPreferenceAttributes_t: "uint32_t, default: 256"); the
//   workspace "must be 256B aligned" (cublasLtMatmul, parameters).
// - Types: cublasLtMatmul, "Datatypes Supported": COMPUTE_32F with scale
//   CUDA_R_32F takes A/B of 16F, 16BF (C/D of the same type or 32F) or 32F
//   (C/D 32F); COMPUTE_64F with CUDA_R_64F takes 64F only. Every one of these
//   rows lists a bias type (that of D), i.e. supports the bias epilogues;
//   "Epilogue is not supported" appears only on integer and complex rows,
//   so FP64 GEMMs with CUBLASLT_EPILOGUE_BIAS are supported.
// - Bias: CUBLASLT_EPILOGUE_BIAS "Apply (broadcast) bias from the bias
//   vector. Bias vector length must match matrix D rows ... broadcast to all
//   columns and added before applying the final postprocessing"
//   (cublasLtEpilogue_t); the heuristic "depend[s] on [the bias pointer's]
//   value to determine expected pointer alignment" (cublasLt.h,
//   CUBLASLT_MATMUL_DESC_BIAS_POINTER).
// - In-place needs C == D and Cdesc == Ddesc; out-of-place needs C and D of
//   one type, shape and batch count, and C's ld may be 0 (broadcast); Cdesc
//   may be null (then Ddesc) (cublasLtMatmul, note).
// - Bias gradients: CUBLASLT_EPILOGUE_BGRADA "Apply Bias gradient to the
//   input matrix A. The bias size corresponds to the number of rows of the
//   matrix D. The reduction happens over the GEMM's "k" dimension. Store
//   Bias gradient in bias buffer" (CUBLASLT_MATMUL_DESC_BIAS_POINTER);
//   BGRADB likewise from B, the number of columns of D (cublasLtEpilogue_t).
//   The bias (gradient) type defaults to D's (CUBLASLT_MATMUL_DESC_BIAS_
//   DATA_TYPE). The sum is written, not scaled by alpha, and D is the plain
//   product; the simulation sums in the compute type, pairwise (the CPU
//   target's ReduceSum order; cuBLASLt's is unspecified), and runs them for
//   one matrix (batched bias gradients are not simulated).
// - ReLU masks (cublasLt.h): RELU_AUX / RELU_AUX_BIAS are RELU / RELU_BIAS
//   that also write "a ReLu bit-mask matrix" through
//   CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER; DRELU "Appl[ies] ReLu
//   gradient to matmul output" with that mask as input, and DRELU_BGRAD
//   also stores the "Bias gradient in the auxiliary output" (the bias
//   pointer, D's type, length D's rows). EPILOGUE_AUX_LD is "in elements
//   (i.e. bits)", "divisible by 128 and ... no less than the number of
//   rows in the output matrix"; EPILOGUE_AUX_DATA_TYPE: "ReLu uses a
//   bit-mask". Not documented, and the simulation's choices (those of the
//   CPU target's unfused relu_grad and ReduceSum, so that the two agree
//   bit for bit): a bit is set where D's element as stored is positive
//   (cuBLASLt may test the unrounded value: they differ only where a
//   positive value rounds to zero in D's type); bits are least significant
//   first within a byte (only cuBLASLt reads the mask); DRELU writes 0
//   where the bit is clear; DRELU_BGRAD sums D's rows as stored, pairwise
//   in the compute type (cuBLASLt's order and rounding are unspecified;
//   with an FP32 D only the order can differ). Batched masks are not
//   simulated.
// - GELU: the documentation says only "x:=GELU(x)"; the tanh form is what
//   the epilogue computes in practice (PyTorch's addmm replaces a missing
//   GELU epilogue with gelu(approximate='tanh')).
// - FP8 (issue 42; cublasLtMatmul, "To use FP8 kernels, the following set of
//   requirements must be satisfied", and the FP8 rows of "Datatypes
//   Supported"): A and B CUDA_R_8F_E4M3 or CUDA_R_8F_E5M2, not both E5M2;
//   CUBLAS_COMPUTE_32F with scale type CUDA_R_32F; A transposed and B not
//   (the "TN" form Ada and Hopper require); the Tensor Core conditions as
//   requirements (pointers 16-byte aligned; lda, ldb, and ldc/ldd and m in
//   bytes, multiples of 16). A_SCALE_POINTER and B_SCALE_POINTER are device
//   FP32 scalars (null: 1) multiplying the product; AMAX_D_POINTER a device
//   FP32 that receives the largest |D| "before" D's rounding. The
//   simulation implements C/D of CUDA_R_16BF, CUDA_R_16F or CUDA_R_32F (C
//   of D's type) with the DEFAULT and BIAS epilogues (the bias in D's
//   16-bit type); an FP8 D (which cuBLASLt lists, with D_SCALE_POINTER) and
//   the other epilogues are refused as not simulated, and scale pointers on
//   a GEMM without FP8 operands are refused (the simulation's strictness).
//   Numerics (the CPU target's FP8 GEMM computes the same): the FP8 codes
//   decoded exactly (ampc/Kernels/Common/Float8.h), their products summed in
//   FP32 (OpenBLAS), then v = product * ((alpha * scaleA) * scaleB) in FP32,
//   + beta C, + bias, the amax taken over |v| (a NaN makes it NaN), and v
//   rounded once to D's type. CUBLASLT_MATMUL_DESC_FAST_ACCUM is accepted
//   and changes nothing here: the simulation accumulates in FP32 either way
//   (on Hopper, fast accumulation skips the periodic promotion of the
//   Tensor Cores' partial sums to FP32).
//
//===----------------------------------------------------------------------===//

#include "Sim.h"

#include "ampc/Kernels/Common/Float8.h"
#include "ampc/Kernels/Common/KernelMath.h"

#include <cblas.h>
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace ampc::sim {
namespace {

//===----------------------------------------------------------------------===//
// Status details
//===----------------------------------------------------------------------===//

std::mutex detailMutex;
std::map<int, std::string> statusText; // status -> "NAME: latest detail"

const char *statusName(cublasStatus_t status) {
  switch (status) {
  case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
  case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
  case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
  case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
  case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
  case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
  case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
  case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
  case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "CUBLAS_STATUS_<unknown>";
}

//===----------------------------------------------------------------------===//
// Names, for messages
//===----------------------------------------------------------------------===//

std::string hex(const void *p) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%p", p);
  return buffer;
}

/// "[0x1000+256)": a byte range as the messages show it.
std::string range(const void *p, uint64_t bytes) {
  return "[" + hex(p) + "+" + std::to_string(bytes) + ")";
}

std::string typeName(int32_t type) {
  switch (type) {
  case -1: return "unset (-1)";
  case CUDA_R_16F: return "CUDA_R_16F";
  case CUDA_R_16BF: return "CUDA_R_16BF";
  case CUDA_R_32F: return "CUDA_R_32F";
  case CUDA_R_64F: return "CUDA_R_64F";
  case CUDA_R_8I: return "CUDA_R_8I";
  case CUDA_R_32I: return "CUDA_R_32I";
  case CUDA_C_8I: return "CUDA_C_8I";
  case CUDA_C_16F: return "CUDA_C_16F";
  case CUDA_C_16BF: return "CUDA_C_16BF";
  case CUDA_C_32F: return "CUDA_C_32F";
  case CUDA_C_64F: return "CUDA_C_64F";
  case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
  case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
  case CUDA_R_4F_E2M1: return "CUDA_R_4F_E2M1";
  }
  return "cudaDataType " + std::to_string(type);
}

std::string computeName(int32_t compute) {
  switch (compute) {
  case CUBLAS_COMPUTE_16F: return "CUBLAS_COMPUTE_16F";
  case CUBLAS_COMPUTE_16F_PEDANTIC: return "CUBLAS_COMPUTE_16F_PEDANTIC";
  case CUBLAS_COMPUTE_32F: return "CUBLAS_COMPUTE_32F";
  case CUBLAS_COMPUTE_32F_PEDANTIC: return "CUBLAS_COMPUTE_32F_PEDANTIC";
  case CUBLAS_COMPUTE_32F_FAST_16F: return "CUBLAS_COMPUTE_32F_FAST_16F";
  case CUBLAS_COMPUTE_32F_FAST_16BF: return "CUBLAS_COMPUTE_32F_FAST_16BF";
  case CUBLAS_COMPUTE_32F_FAST_TF32: return "CUBLAS_COMPUTE_32F_FAST_TF32";
  case CUBLAS_COMPUTE_32F_EMULATED_16BFX9:
    return "CUBLAS_COMPUTE_32F_EMULATED_16BFX9";
  case CUBLAS_COMPUTE_64F: return "CUBLAS_COMPUTE_64F";
  case CUBLAS_COMPUTE_64F_PEDANTIC: return "CUBLAS_COMPUTE_64F_PEDANTIC";
  case CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT:
    return "CUBLAS_COMPUTE_64F_EMULATED_FIXEDPOINT";
  case CUBLAS_COMPUTE_32I: return "CUBLAS_COMPUTE_32I";
  case CUBLAS_COMPUTE_32I_PEDANTIC: return "CUBLAS_COMPUTE_32I_PEDANTIC";
  }
  return "";
}

std::string epilogueName(uint32_t epilogue) {
  switch (epilogue) {
  case CUBLASLT_EPILOGUE_DEFAULT: return "CUBLASLT_EPILOGUE_DEFAULT";
  case CUBLASLT_EPILOGUE_RELU: return "CUBLASLT_EPILOGUE_RELU";
  case CUBLASLT_EPILOGUE_RELU_AUX: return "CUBLASLT_EPILOGUE_RELU_AUX";
  case CUBLASLT_EPILOGUE_BIAS: return "CUBLASLT_EPILOGUE_BIAS";
  case CUBLASLT_EPILOGUE_RELU_BIAS: return "CUBLASLT_EPILOGUE_RELU_BIAS";
  case CUBLASLT_EPILOGUE_RELU_AUX_BIAS:
    return "CUBLASLT_EPILOGUE_RELU_AUX_BIAS";
  case CUBLASLT_EPILOGUE_DRELU: return "CUBLASLT_EPILOGUE_DRELU";
  case CUBLASLT_EPILOGUE_DRELU_BGRAD: return "CUBLASLT_EPILOGUE_DRELU_BGRAD";
  case CUBLASLT_EPILOGUE_GELU: return "CUBLASLT_EPILOGUE_GELU";
  case CUBLASLT_EPILOGUE_GELU_AUX: return "CUBLASLT_EPILOGUE_GELU_AUX";
  case CUBLASLT_EPILOGUE_GELU_BIAS: return "CUBLASLT_EPILOGUE_GELU_BIAS";
  case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
    return "CUBLASLT_EPILOGUE_GELU_AUX_BIAS";
  case CUBLASLT_EPILOGUE_DGELU: return "CUBLASLT_EPILOGUE_DGELU";
  case CUBLASLT_EPILOGUE_DGELU_BGRAD: return "CUBLASLT_EPILOGUE_DGELU_BGRAD";
  case CUBLASLT_EPILOGUE_BGRADA: return "CUBLASLT_EPILOGUE_BGRADA";
  case CUBLASLT_EPILOGUE_BGRADB: return "CUBLASLT_EPILOGUE_BGRADB";
  }
  return "";
}

const char *opName(int32_t op) {
  switch (op) {
  case CUBLAS_OP_N: return "CUBLAS_OP_N";
  case CUBLAS_OP_T: return "CUBLAS_OP_T";
  case CUBLAS_OP_C: return "CUBLAS_OP_C";
  case CUBLAS_OP_CONJG: return "CUBLAS_OP_CONJG";
  }
  return "unknown";
}

//===----------------------------------------------------------------------===//
// Objects and the registry of live ones
//===----------------------------------------------------------------------===//

struct Handle {
  int unused = 0;
};

struct MatmulDesc {
  int32_t computeType = CUBLAS_COMPUTE_32F;
  int32_t scaleType = CUDA_R_32F;
  int32_t pointerMode = CUBLASLT_POINTER_MODE_HOST;
  int32_t transA = CUBLAS_OP_N;
  int32_t transB = CUBLAS_OP_N;
  int32_t transC = CUBLAS_OP_N;
  int32_t fillMode = CUBLAS_FILL_MODE_FULL;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  const void *bias = nullptr;
  int64_t biasBatchStride = 0;
  int32_t smCountTarget = 0;
  int32_t biasDataType = -1; // -1: D's type
  // The ReLU bit mask of RELU_AUX / RELU_AUX_BIAS (written) and DRELU /
  // DRELU_BGRAD (read); ld and batch stride in bits.
  const void *aux = nullptr;
  int64_t auxLd = 0;
  int64_t auxBatchStride = 0;
  int32_t auxDataType = -1; // -1: the epilogue's own (ReLU: a bit mask)
  // FP8 GEMMs: device FP32 scalars (null: 1) and the amax output.
  const void *aScale = nullptr, *bScale = nullptr, *cScale = nullptr,
             *dScale = nullptr;
  void *amaxD = nullptr;
  int8_t fastAccum = 0;
};

struct Layout {
  uint32_t type = CUDA_R_32F;
  int32_t order = CUBLASLT_ORDER_COL;
  uint64_t rows = 0;
  uint64_t cols = 0;
  int64_t ld = 0;
  int32_t batchCount = 1;
  int64_t batchStride = 0;
  int64_t planeOffset = 0;
  uint32_t batchMode = CUBLASLT_BATCH_MODE_STRIDED;
};

struct Preference {
  uint32_t searchMode = CUBLASLT_SEARCH_BEST_FIT;
  uint64_t maxWorkspaceBytes = 0;
  uint32_t reductionSchemeMask = CUBLASLT_REDUCTION_SCHEME_MASK;
  uint32_t minAlignment[4] = {256, 256, 256, 256}; // A, B, C, D
  float maxWavesCount = 0;
  uint64_t implMask = ~uint64_t(0);
};

// One host thread per handle at a time (cuBLASLt's rule); the registries
// are shared by all handles, hence the lock.
std::mutex registryMutex;
std::unordered_set<const void *> liveHandles, liveDescs, liveLayouts,
    livePreferences;

template <typename T>
T *lookup(std::unordered_set<const void *> &set, const void *object) {
  std::lock_guard<std::mutex> lock(registryMutex);
  return set.count(object) ? static_cast<T *>(const_cast<void *>(object))
                           : nullptr;
}

template <typename T, typename Opaque>
cublasStatus_t create(std::unordered_set<const void *> &set, Opaque **out,
                      const T &initial, const char *call) {
  if (!out)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    std::string(call) + ": the output pointer is null");
  T *object = new T(initial);
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    set.insert(object);
  }
  *out = reinterpret_cast<Opaque *>(object);
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t destroy(std::unordered_set<const void *> &set,
                       const void *object, const char *call, const char *what) {
  if (!object)
    return CUBLAS_STATUS_SUCCESS;
  {
    std::lock_guard<std::mutex> lock(registryMutex);
    if (!set.erase(object))
      return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                      std::string(call) + ": " + hex(object) +
                          " is not a live " + what +
                          " (destroyed twice, or never created)");
  }
  delete static_cast<const T *>(object);
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Attributes: one table per object, one Set/Get for all
//===----------------------------------------------------------------------===//

/// Where an attribute lives in its object. `offset` < 0: an attribute of
/// cublasLt.h the simulation does not implement.
struct Attribute {
  const char *name;
  size_t size;
  ptrdiff_t offset;
};

constexpr ptrdiff_t kNotSimulated = -1;

#define AMPC_FIELD(Type, field) sizeof(Type::field), offsetof(Type, field)

const Attribute *descAttribute(int attr) {
  static const std::map<int, Attribute> table = {
      {CUBLASLT_MATMUL_DESC_COMPUTE_TYPE,
       {"CUBLASLT_MATMUL_DESC_COMPUTE_TYPE",
        AMPC_FIELD(MatmulDesc, computeType)}},
      {CUBLASLT_MATMUL_DESC_SCALE_TYPE,
       {"CUBLASLT_MATMUL_DESC_SCALE_TYPE", AMPC_FIELD(MatmulDesc, scaleType)}},
      {CUBLASLT_MATMUL_DESC_POINTER_MODE,
       {"CUBLASLT_MATMUL_DESC_POINTER_MODE",
        AMPC_FIELD(MatmulDesc, pointerMode)}},
      {CUBLASLT_MATMUL_DESC_TRANSA,
       {"CUBLASLT_MATMUL_DESC_TRANSA", AMPC_FIELD(MatmulDesc, transA)}},
      {CUBLASLT_MATMUL_DESC_TRANSB,
       {"CUBLASLT_MATMUL_DESC_TRANSB", AMPC_FIELD(MatmulDesc, transB)}},
      {CUBLASLT_MATMUL_DESC_TRANSC,
       {"CUBLASLT_MATMUL_DESC_TRANSC", AMPC_FIELD(MatmulDesc, transC)}},
      {CUBLASLT_MATMUL_DESC_FILL_MODE,
       {"CUBLASLT_MATMUL_DESC_FILL_MODE", AMPC_FIELD(MatmulDesc, fillMode)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE", AMPC_FIELD(MatmulDesc, epilogue)}},
      {CUBLASLT_MATMUL_DESC_BIAS_POINTER,
       {"CUBLASLT_MATMUL_DESC_BIAS_POINTER", AMPC_FIELD(MatmulDesc, bias)}},
      {CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE,
       {"CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE",
        AMPC_FIELD(MatmulDesc, biasBatchStride)}},
      {CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET,
       {"CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET",
        AMPC_FIELD(MatmulDesc, smCountTarget)}},
      {CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
       {"CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE",
        AMPC_FIELD(MatmulDesc, biasDataType)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER",
        AMPC_FIELD(MatmulDesc, aux)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD", AMPC_FIELD(MatmulDesc, auxLd)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE",
        AMPC_FIELD(MatmulDesc, auxBatchStride)}},
      {CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE,
       {"CUBLASLT_MATMUL_DESC_ALPHA_VECTOR_BATCH_STRIDE", 8, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_A_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_A_SCALE_POINTER", AMPC_FIELD(MatmulDesc, aScale)}},
      {CUBLASLT_MATMUL_DESC_B_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_B_SCALE_POINTER", AMPC_FIELD(MatmulDesc, bScale)}},
      {CUBLASLT_MATMUL_DESC_C_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_C_SCALE_POINTER", AMPC_FIELD(MatmulDesc, cScale)}},
      {CUBLASLT_MATMUL_DESC_D_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_D_SCALE_POINTER", AMPC_FIELD(MatmulDesc, dScale)}},
      {CUBLASLT_MATMUL_DESC_AMAX_D_POINTER,
       {"CUBLASLT_MATMUL_DESC_AMAX_D_POINTER", AMPC_FIELD(MatmulDesc, amaxD)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE",
        AMPC_FIELD(MatmulDesc, auxDataType)}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_POINTER", 8, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_AMAX_POINTER", 8, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_FAST_ACCUM,
       {"CUBLASLT_MATMUL_DESC_FAST_ACCUM", AMPC_FIELD(MatmulDesc, fastAccum)}},
      {CUBLASLT_MATMUL_DESC_A_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_A_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_B_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_B_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_C_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_C_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_D_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_D_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER,
       {"CUBLASLT_MATMUL_DESC_D_OUT_SCALE_POINTER", 8, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE,
       {"CUBLASLT_MATMUL_DESC_D_OUT_SCALE_MODE", 4, kNotSimulated}},
      {CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR,
       {"CUBLASLT_MATMUL_DESC_EMULATION_DESCRIPTOR", 8, kNotSimulated}},
  };
  auto it = table.find(attr);
  return it == table.end() ? nullptr : &it->second;
}

const Attribute *layoutAttribute(int attr) {
  static const std::map<int, Attribute> table = {
      {CUBLASLT_MATRIX_LAYOUT_TYPE,
       {"CUBLASLT_MATRIX_LAYOUT_TYPE", AMPC_FIELD(Layout, type)}},
      {CUBLASLT_MATRIX_LAYOUT_ORDER,
       {"CUBLASLT_MATRIX_LAYOUT_ORDER", AMPC_FIELD(Layout, order)}},
      {CUBLASLT_MATRIX_LAYOUT_ROWS,
       {"CUBLASLT_MATRIX_LAYOUT_ROWS", AMPC_FIELD(Layout, rows)}},
      {CUBLASLT_MATRIX_LAYOUT_COLS,
       {"CUBLASLT_MATRIX_LAYOUT_COLS", AMPC_FIELD(Layout, cols)}},
      {CUBLASLT_MATRIX_LAYOUT_LD,
       {"CUBLASLT_MATRIX_LAYOUT_LD", AMPC_FIELD(Layout, ld)}},
      {CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
       {"CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT", AMPC_FIELD(Layout, batchCount)}},
      {CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
       {"CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET",
        AMPC_FIELD(Layout, batchStride)}},
      {CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET,
       {"CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET",
        AMPC_FIELD(Layout, planeOffset)}},
      {CUBLASLT_MATRIX_LAYOUT_BATCH_MODE,
       {"CUBLASLT_MATRIX_LAYOUT_BATCH_MODE", AMPC_FIELD(Layout, batchMode)}},
  };
  auto it = table.find(attr);
  return it == table.end() ? nullptr : &it->second;
}

const Attribute *preferenceAttribute(int attr) {
  static const std::map<int, Attribute> table = {
      {CUBLASLT_MATMUL_PREF_SEARCH_MODE,
       {"CUBLASLT_MATMUL_PREF_SEARCH_MODE",
        AMPC_FIELD(Preference, searchMode)}},
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
       {"CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES",
        AMPC_FIELD(Preference, maxWorkspaceBytes)}},
      {CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
       {"CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK",
        AMPC_FIELD(Preference, reductionSchemeMask)}},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
       {"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES", sizeof(uint32_t),
        offsetof(Preference, minAlignment) + 0 * sizeof(uint32_t)}},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
       {"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES", sizeof(uint32_t),
        offsetof(Preference, minAlignment) + 1 * sizeof(uint32_t)}},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
       {"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES", sizeof(uint32_t),
        offsetof(Preference, minAlignment) + 2 * sizeof(uint32_t)}},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
       {"CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES", sizeof(uint32_t),
        offsetof(Preference, minAlignment) + 3 * sizeof(uint32_t)}},
      {CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT,
       {"CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT",
        AMPC_FIELD(Preference, maxWavesCount)}},
      {CUBLASLT_MATMUL_PREF_IMPL_MASK,
       {"CUBLASLT_MATMUL_PREF_IMPL_MASK", AMPC_FIELD(Preference, implMask)}},
  };
  auto it = table.find(attr);
  return it == table.end() ? nullptr : &it->second;
}

#undef AMPC_FIELD

/// Checks a new value of an attribute (in a copy of the object): returns
/// CUBLAS_STATUS_SUCCESS, or the status after failBlas.
using Validator = cublasStatus_t (*)(const char *call, const void *object,
                                     const Attribute &attribute);

template <typename T>
cublasStatus_t setAttribute(const char *call, T *object, const char *what,
                            const Attribute *attribute, int attr,
                            const void *buf, size_t size, Validator validate) {
  const std::string prefix = std::string(call) + ": ";
  if (!object)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + "the descriptor is not a live " + what +
                        " (destroyed, or never created)");
  if (!attribute)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + "unknown attribute " + std::to_string(attr));
  if (attribute->offset == kNotSimulated)
    return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                    prefix + attribute->name +
                        " is not simulated by ampc cuda-sim");
  if (!buf)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + attribute->name + ": buf is null");
  if (size != attribute->size)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + attribute->name + " takes " +
                        std::to_string(attribute->size) + " bytes, got " +
                        std::to_string(size));
  T updated = *object;
  std::memcpy(reinterpret_cast<char *>(&updated) + attribute->offset, buf,
              size);
  if (cublasStatus_t status = validate(call, &updated, *attribute))
    return status;
  *object = updated;
  return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t getAttribute(const char *call, const T *object, const char *what,
                            const Attribute *attribute, int attr, void *buf,
                            size_t size, size_t *written) {
  const std::string prefix = std::string(call) + ": ";
  if (!object)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + "the descriptor is not a live " + what +
                        " (destroyed, or never created)");
  if (!attribute)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + "unknown attribute " + std::to_string(attr));
  if (attribute->offset == kNotSimulated)
    return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                    prefix + attribute->name +
                        " is not simulated by ampc cuda-sim");
  if (size == 0) {
    if (!written)
      return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                      prefix + "sizeInBytes is 0 and sizeWritten is null");
    *written = attribute->size;
    return CUBLAS_STATUS_SUCCESS;
  }
  if (!buf)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + attribute->name + ": buf is null");
  if (size != attribute->size)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + attribute->name + " takes " +
                        std::to_string(attribute->size) + " bytes, got " +
                        std::to_string(size));
  std::memcpy(buf, reinterpret_cast<const char *>(object) + attribute->offset,
              size);
  if (written)
    *written = size;
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t invalid(const char *call, const Attribute &attribute,
                       const std::string &why) {
  return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                  std::string(call) + ": " + attribute.name + ": " + why);
}
cublasStatus_t notSimulated(const char *call, const Attribute &attribute,
                            const std::string &why) {
  return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                  std::string(call) + ": " + attribute.name + ": " + why);
}

cublasStatus_t validateDesc(const char *call, const void *object,
                            const Attribute &attribute) {
  const auto &d = *static_cast<const MatmulDesc *>(object);
  const std::string name = attribute.name;
  if (name == "CUBLASLT_MATMUL_DESC_COMPUTE_TYPE" &&
      computeName(d.computeType).empty())
    return invalid(call, attribute,
                   std::to_string(d.computeType) +
                       " is not a cublasComputeType_t");
  if (name == "CUBLASLT_MATMUL_DESC_POINTER_MODE") {
    if (d.pointerMode < CUBLASLT_POINTER_MODE_HOST ||
        d.pointerMode > CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST)
      return invalid(call, attribute,
                     std::to_string(d.pointerMode) +
                         " is not a cublasLtPointerMode_t");
    if (d.pointerMode != CUBLASLT_POINTER_MODE_HOST)
      return notSimulated(call, attribute,
                          "only CUBLASLT_POINTER_MODE_HOST is simulated");
  }
  auto checkOp = [&](int32_t op, bool onlyN) -> cublasStatus_t {
    if (op < CUBLAS_OP_N || op > CUBLAS_OP_CONJG)
      return invalid(call, attribute,
                     std::to_string(op) + " is not a cublasOperation_t");
    if (op == CUBLAS_OP_C || op == CUBLAS_OP_CONJG ||
        (onlyN && op != CUBLAS_OP_N))
      return notSimulated(
          call, attribute,
          std::string(opName(op)) + " is not simulated (" +
              (onlyN ? "CUBLAS_OP_N" : "CUBLAS_OP_N and CUBLAS_OP_T") +
              " are)");
    return CUBLAS_STATUS_SUCCESS;
  };
  if (name == "CUBLASLT_MATMUL_DESC_TRANSA")
    return checkOp(d.transA, false);
  if (name == "CUBLASLT_MATMUL_DESC_TRANSB")
    return checkOp(d.transB, false);
  // "Currently only CUBLAS_OP_N is supported" (cublasLt.h).
  if (name == "CUBLASLT_MATMUL_DESC_TRANSC")
    return checkOp(d.transC, true);
  if (name == "CUBLASLT_MATMUL_DESC_FILL_MODE") {
    if (d.fillMode < CUBLAS_FILL_MODE_LOWER ||
        d.fillMode > CUBLAS_FILL_MODE_FULL)
      return invalid(call, attribute,
                     std::to_string(d.fillMode) + " is not a cublasFillMode_t");
    if (d.fillMode != CUBLAS_FILL_MODE_FULL)
      return notSimulated(call, attribute,
                          "only CUBLAS_FILL_MODE_FULL is simulated");
  }
  if (name == "CUBLASLT_MATMUL_DESC_EPILOGUE" &&
      epilogueName(d.epilogue).empty())
    return invalid(call, attribute,
                   std::to_string(d.epilogue) + " is not a cublasLtEpilogue_t");
  if (name == "CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE" && d.biasBatchStride < 0)
    return notSimulated(call, attribute, "negative strides are not simulated");
  if (name == "CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET" && d.smCountTarget < 0)
    return invalid(call, attribute, "the SM count must not be negative");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t validateLayout(const char *call, const void *object,
                              const Attribute &attribute) {
  const auto &l = *static_cast<const Layout *>(object);
  const std::string name = attribute.name;
  if (name == "CUBLASLT_MATRIX_LAYOUT_ORDER") {
    if (l.order < CUBLASLT_ORDER_COL || l.order > CUBLASLT_ORDER_COL32_2R_4R4)
      return invalid(call, attribute,
                     std::to_string(l.order) + " is not a cublasLtOrder_t");
    if (l.order != CUBLASLT_ORDER_COL)
      return notSimulated(
          call, attribute,
          "only CUBLASLT_ORDER_COL (column-major) is simulated");
  }
  // "Currently only non-negative values are supported" (cublasLt.h).
  if (name == "CUBLASLT_MATRIX_LAYOUT_LD" && l.ld < 0)
    return invalid(call, attribute,
                   "leading dimension " + std::to_string(l.ld) +
                       " is negative");
  if (name == "CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT" && l.batchCount < 1)
    return invalid(call, attribute,
                   "batch count " + std::to_string(l.batchCount) +
                       " is less than 1");
  if (name == "CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET" &&
      l.batchStride < 0)
    return notSimulated(call, attribute,
                        "negative batch strides are not simulated");
  if (name == "CUBLASLT_MATRIX_LAYOUT_PLANE_OFFSET" && l.planeOffset != 0)
    return notSimulated(call, attribute,
                        "planar-complex layouts are not simulated");
  if (name == "CUBLASLT_MATRIX_LAYOUT_BATCH_MODE") {
    if (l.batchMode > CUBLASLT_BATCH_MODE_POINTER_ARRAY)
      return invalid(call, attribute,
                     std::to_string(l.batchMode) +
                         " is not a cublasLtBatchMode_t");
    if (l.batchMode != CUBLASLT_BATCH_MODE_STRIDED)
      return notSimulated(call, attribute,
                          "only CUBLASLT_BATCH_MODE_STRIDED is simulated");
  }
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t validatePreference(const char *call, const void *object,
                                  const Attribute &attribute) {
  const auto &p = *static_cast<const Preference *>(object);
  const std::string name = attribute.name;
  if (name == "CUBLASLT_MATMUL_PREF_SEARCH_MODE") {
    if (p.searchMode > CUBLASLT_SEARCH_RESERVED_09)
      return invalid(call, attribute,
                     std::to_string(p.searchMode) +
                         " is not a cublasLtMatmulSearch_t");
    if (p.searchMode != CUBLASLT_SEARCH_BEST_FIT)
      return notSimulated(call, attribute,
                          "only CUBLASLT_SEARCH_BEST_FIT is simulated");
  }
  if (name == "CUBLASLT_MATMUL_PREF_MAX_WAVES_COUNT" && !(p.maxWavesCount >= 0))
    return invalid(call, attribute, "the wave count must not be negative");
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// The problem: descriptor and layouts, checked and resolved
//===----------------------------------------------------------------------===//

bool isFp8(int32_t type) {
  return type == CUDA_R_8F_E4M3 || type == CUDA_R_8F_E5M2;
}

int64_t elementSize(int32_t type) {
  switch (type) {
  case CUDA_R_8F_E4M3:
  case CUDA_R_8F_E5M2: return 1;
  case CUDA_R_16F:
  case CUDA_R_16BF: return 2;
  case CUDA_R_32F: return 4;
  case CUDA_R_64F: return 8;
  }
  return 0;
}

bool hasBias(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_RELU_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS ||
         epilogue == CUBLASLT_EPILOGUE_GELU_BIAS;
}

/// The epilogues that write the ReLU bit mask to the aux pointer.
bool writesReluMask(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_RELU_AUX ||
         epilogue == CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
}

/// The epilogues that read the ReLU bit mask from the aux pointer.
bool readsReluMask(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_DRELU ||
         epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

/// The epilogues that write a bias gradient (from op(A) or op(B)) to the
/// bias pointer instead of reading a bias; the simulated ones.
bool hasBiasGradient(uint32_t epilogue) {
  return epilogue == CUBLASLT_EPILOGUE_BGRADA ||
         epilogue == CUBLASLT_EPILOGUE_BGRADB;
}

/// Those and DRELU_BGRAD, whose bias gradient is the masked D's row sums.
bool writesBiasGradient(uint32_t epilogue) {
  return hasBiasGradient(epilogue) ||
         epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD;
}

struct Problem {
  bool f64 = false; // compute (and scale) type FP64, else FP32
  int32_t computeType = 0, scaleType = 0;
  bool transA = false, transB = false;
  uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  int32_t biasType = -1; // resolved: never -1
  int64_t biasBatchStride = 0;
  int64_t auxLd = 0; // bits; the ReLU mask epilogues only
  Layout a, b, c, d;
  int64_t m = 0, n = 0, k = 0;
  int32_t batch = 1;
  // FP8 operands: the scale and amax pointers (null where unset) and the
  // accumulation setting, which the algo is chosen for.
  bool fp8 = false;
  const void *aScale = nullptr, *bScale = nullptr;
  void *amaxD = nullptr;
  int8_t fastAccum = 0;
};

/// Elements from a matrix's first to its last, all batches (0 if empty).
uint64_t extentElements(const Layout &l) {
  if (l.rows == 0 || l.cols == 0)
    return 0;
  uint64_t one = (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows;
  if (l.batchCount > 1 && l.batchStride > 0)
    one += static_cast<uint64_t>(l.batchCount - 1) * l.batchStride;
  return one;
}

uint64_t matrixElements(const Layout &l) {
  return l.rows == 0 || l.cols == 0
             ? 0
             : (l.cols - 1) * static_cast<uint64_t>(l.ld) + l.rows;
}

/// Whether no two elements of a layout's batches share an address. Batches
/// may interleave (a batch stride less than one matrix, with ld spanning
/// every batch's column) as long as they do not collide: taken smallest
/// stride first, each dimension must step past all the ones before it.
bool writesOnce(const Layout &l) {
  std::pair<uint64_t, uint64_t> dims[] = {
      {1, l.rows},
      {static_cast<uint64_t>(l.ld), l.cols},
      {static_cast<uint64_t>(l.batchStride),
       static_cast<uint64_t>(l.batchCount)}};
  std::sort(std::begin(dims), std::end(dims));
  uint64_t extent = 0;
  for (auto [stride, size] : dims) {
    if (size <= 1)
      continue;
    if (stride <= extent)
      return false;
    extent += (size - 1) * stride;
  }
  return true;
}

/// How two layouts differ ("" if they do not), e.g. "ld: 4 and 3".
std::string layoutDifference(const Layout &x, const Layout &y) {
  auto differs = [](const char *field, int64_t a, int64_t b) {
    return std::string(field) + ": " + std::to_string(a) + " and " +
           std::to_string(b);
  };
  if (x.type != y.type)
    return "type: " + typeName(x.type) + " and " + typeName(y.type);
  if (x.rows != y.rows)
    return differs("rows", x.rows, y.rows);
  if (x.cols != y.cols)
    return differs("columns", x.cols, y.cols);
  if (x.ld != y.ld)
    return differs("ld", x.ld, y.ld);
  if (x.batchCount != y.batchCount)
    return differs("batch count", x.batchCount, y.batchCount);
  if (x.batchCount > 1 && x.batchStride != y.batchStride)
    return differs("batch stride", x.batchStride, y.batchStride);
  return "";
}

std::string shape(const Layout &l) {
  return std::to_string(l.rows) + "x" + std::to_string(l.cols);
}

/// The type rows of cublasLtMatmul's "Datatypes Supported" table that the
/// simulation implements; `documented` says whether cuBLASLt lists the
/// combination at all (so the message can tell "cuBLASLt has no such GEMM"
/// from "the simulation does not run it").
bool simulatedTypes(bool f64, int32_t ab, int32_t cd, bool *documented) {
  *documented = false;
  if (f64) {
    *documented = (ab == CUDA_R_64F && cd == CUDA_R_64F) ||
                  (ab == CUDA_C_64F && cd == CUDA_C_64F);
    return ab == CUDA_R_64F && cd == CUDA_R_64F;
  }
  switch (ab) {
  case CUDA_R_16F:
  case CUDA_R_16BF:
    *documented = cd == ab || cd == CUDA_R_32F;
    return *documented;
  case CUDA_R_32F: *documented = cd == CUDA_R_32F; return *documented;
  case CUDA_R_8I: // documented with a 32F C/D
    *documented = cd == CUDA_R_32F;
    return false;
  case CUDA_C_8I:
  case CUDA_C_32F: *documented = cd == CUDA_C_32F; return false;
  }
  return false;
}

/// The FP8 rules (the file's comment, "FP8"), checked before the rest of
/// describe.
cublasStatus_t describeFp8(const char *call, const MatmulDesc &desc,
                           const Layout &a, const Layout &b, const Layout &c,
                           const Layout &d) {
  const std::string prefix = std::string(call) + ": FP8 GEMM: ";
  auto notSupported = [&](const std::string &why) {
    return failBlas(CUBLAS_STATUS_NOT_SUPPORTED, prefix + why);
  };
  if (!isFp8(a.type) || !isFp8(b.type))
    return notSupported("A is " + typeName(a.type) + " and B " +
                        typeName(b.type) +
                        "; cuBLASLt's FP8 GEMMs take FP8 A and B");
  if (a.type == CUDA_R_8F_E5M2 && b.type == CUDA_R_8F_E5M2)
    return notSupported("A and B are both CUDA_R_8F_E5M2, a pair cuBLASLt "
                        "does not support (one may be E5M2)");
  if (desc.computeType != CUBLAS_COMPUTE_32F ||
      desc.scaleType != CUDA_R_32F)
    return notSupported("compute type " + computeName(desc.computeType) +
                        " with scale type " + typeName(desc.scaleType) +
                        "; FP8 needs CUBLAS_COMPUTE_32F and CUDA_R_32F");
  if (desc.transA != CUBLAS_OP_T || desc.transB != CUBLAS_OP_N)
    return notSupported(
        std::string("TRANSA ") + opName(desc.transA) + " and TRANSB " +
        opName(desc.transB) +
        "; FP8 GEMMs need A transposed and B not (the \"TN\" form)");
  if (isFp8(d.type))
    return notSupported("an FP8 D (" + typeName(d.type) +
                        ", with D_SCALE_POINTER) is not simulated by ampc "
                        "cuda-sim (D of CUDA_R_16BF, CUDA_R_16F or "
                        "CUDA_R_32F is)");
  if (d.type != CUDA_R_16BF && d.type != CUDA_R_16F && d.type != CUDA_R_32F)
    return notSupported("D is " + typeName(d.type) +
                        ", not among the FP8 rows of cuBLASLt's types");
  if (desc.cScale || desc.dScale)
    return notSupported("C_SCALE_POINTER and D_SCALE_POINTER scale FP8 C and "
                        "D; this GEMM's are " + typeName(d.type));
  if (desc.epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      !(desc.epilogue == CUBLASLT_EPILOGUE_BIAS && d.type != CUDA_R_32F))
    return notSupported(epilogueName(desc.epilogue) + " with " +
                        typeName(d.type) +
                        " D is not simulated for FP8 (DEFAULT, and BIAS with "
                        "a 16-bit D, are)");
  // The Tensor Core conditions, required for FP8 (in bytes).
  struct Dimension {
    const char *what;
    int64_t bytes;
  };
  const int64_t dSize = elementSize(d.type);
  for (const Dimension &dim :
       {Dimension{"lda", a.ld}, Dimension{"ldb", b.ld},
        Dimension{"ldc", c.ld * dSize}, Dimension{"ldd", d.ld * dSize},
        Dimension{"k (A's rows)", static_cast<int64_t>(a.rows)},
        Dimension{"m (D's rows)", static_cast<int64_t>(d.rows) * dSize}})
    if (dim.bytes % 16)
      return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                      prefix + dim.what + " is " + std::to_string(dim.bytes) +
                          " bytes, not a multiple of 16 (FP8 GEMMs need "
                          "16-byte multiples)");
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t describe(const char *call, const MatmulDesc &desc,
                        const Layout &a, const Layout &b, const Layout &c,
                        const Layout &d, Problem &p) {
  const std::string prefix = std::string(call) + ": ";
  auto notSupported = [&](const std::string &why) {
    return failBlas(CUBLAS_STATUS_NOT_SUPPORTED, prefix + why);
  };
  auto invalidValue = [&](const std::string &why) {
    return failBlas(CUBLAS_STATUS_INVALID_VALUE, prefix + why);
  };

  // Types.
  const int32_t compute = desc.computeType;
  const bool f32 =
      compute == CUBLAS_COMPUTE_32F || compute == CUBLAS_COMPUTE_32F_PEDANTIC;
  const bool f64 =
      compute == CUBLAS_COMPUTE_64F || compute == CUBLAS_COMPUTE_64F_PEDANTIC;
  if (!f32 && !f64)
    return notSupported("compute type " + computeName(compute) +
                        " is not simulated (ampc cuda-sim runs "
                        "CUBLAS_COMPUTE_32F and CUBLAS_COMPUTE_64F)");
  const bool fp8 = isFp8(a.type) || isFp8(b.type);
  if (fp8) {
    if (cublasStatus_t status = describeFp8(call, desc, a, b, c, d))
      return status;
  } else if (desc.aScale || desc.bScale || desc.cScale || desc.dScale ||
             desc.amaxD) {
    return notSupported(
        "a scale or amax pointer (CUBLASLT_MATMUL_DESC_A/B/C/D_SCALE_POINTER, "
        "AMAX_D_POINTER) on a GEMM of " + typeName(a.type) + " A and " +
        typeName(b.type) +
        " B: ampc cuda-sim takes them for FP8 A and B only");
  }
  const int32_t scale = f64 ? CUDA_R_64F : CUDA_R_32F;
  if (desc.scaleType != scale)
    return notSupported("scale type " + typeName(desc.scaleType) + " with " +
                        computeName(compute) + ": cuBLASLt's real GEMMs with " +
                        "this compute type take " + typeName(scale));
  if (a.type != b.type && !fp8)
    return notSupported(
        "A is " + typeName(a.type) + " but B is " + typeName(b.type) +
        "; cuBLASLt takes A and B of one type with " + computeName(compute));
  if (c.type != d.type)
    return invalidValue("C is " + typeName(c.type) + " but D is " +
                        typeName(d.type) +
                        "; cuBLASLt needs C and D of one type");
  bool documented = false;
  if (!fp8 && !simulatedTypes(f64, a.type, d.type, &documented))
    return notSupported(
        "A/B " + typeName(a.type) + " with C/D " + typeName(d.type) + " and " +
        computeName(compute) +
        (documented ? " is not simulated by ampc cuda-sim"
                    : " is not among the type combinations cuBLASLt "
                      "supports (cublasLtMatmul, \"Datatypes Supported\")"));

  // Epilogue: every simulated type row above supports the bias epilogues,
  // with the bias in D's type.
  const uint32_t epilogue = desc.epilogue;
  const bool mask = writesReluMask(epilogue) || readsReluMask(epilogue);
  if (epilogue != CUBLASLT_EPILOGUE_DEFAULT &&
      epilogue != CUBLASLT_EPILOGUE_RELU &&
      epilogue != CUBLASLT_EPILOGUE_GELU && !hasBias(epilogue) &&
      !hasBiasGradient(epilogue) && !mask)
    return notSupported(epilogueName(epilogue) +
                        " is not simulated (DEFAULT, RELU, RELU_AUX, BIAS, "
                        "RELU_BIAS, RELU_AUX_BIAS, DRELU, DRELU_BGRAD, GELU, "
                        "GELU_BIAS, BGRADA and BGRADB are)");
  if ((hasBiasGradient(epilogue) || mask) && d.batchCount > 1)
    return notSupported(epilogueName(epilogue) +
                        " with a batch count of " +
                        std::to_string(d.batchCount) +
                        " is not simulated (one matrix is)");
  if (mask) {
    // cublasLt.h, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: the ReLU bit mask's
    // leading dimension is in bits, "Must be divisible by 128 and be no
    // less than the number of rows in the output matrix";
    // CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: "ReLu uses a bit-mask".
    if (desc.auxLd % 128 != 0 || desc.auxLd < static_cast<int64_t>(d.rows) ||
        desc.auxLd <= 0)
      return invalidValue(
          epilogueName(epilogue) + ": CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD " +
          std::to_string(desc.auxLd) +
          " (bits) must be a positive multiple of 128 and at least D's " +
          std::to_string(d.rows) + " rows");
    if (desc.auxDataType != -1)
      return notSupported(epilogueName(epilogue) +
                          " with CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE " +
                          typeName(desc.auxDataType) +
                          " is not simulated (the ReLU mask is a bit mask)");
  }
  const int32_t biasType = desc.biasDataType == -1
                               ? static_cast<int32_t>(d.type)
                               : desc.biasDataType;
  if ((hasBias(epilogue) || writesBiasGradient(epilogue)) &&
      biasType != static_cast<int32_t>(d.type))
    return notSupported("bias type " + typeName(biasType) + " with D " +
                        typeName(d.type) + ": cuBLASLt takes the bias in D's " +
                        "type for these types");
  if (desc.transC != CUBLAS_OP_N || desc.fillMode != CUBLAS_FILL_MODE_FULL ||
      desc.pointerMode != CUBLASLT_POINTER_MODE_HOST)
    return notSupported("the descriptor uses an attribute value that is not "
                        "simulated");

  // Layouts.
  const Layout *layouts[4] = {&a, &b, &c, &d};
  const char *names[4] = {"A", "B", "C", "D"};
  for (int i = 0; i < 4; ++i) {
    const Layout &l = *layouts[i];
    if (l.order != CUBLASLT_ORDER_COL ||
        l.batchMode != CUBLASLT_BATCH_MODE_STRIDED || l.planeOffset != 0)
      return notSupported(
          std::string(names[i]) +
          "desc: only strided column-major layouts are simulated");
    const uint64_t limit = std::numeric_limits<int32_t>::max();
    if (l.rows > limit || l.cols > limit || static_cast<uint64_t>(l.ld) > limit)
      return notSupported(std::string(names[i]) + "desc: " + shape(l) +
                          " with ld " + std::to_string(l.ld) +
                          " exceeds int32_t, which cuBLASLt usually does not "
                          "support");
    // C may broadcast one column with ld 0 (cublasLtMatmul's note).
    const bool broadcastC = i == 2 && l.ld == 0;
    if (static_cast<uint64_t>(l.ld) < l.rows && !broadcastC)
      return invalidValue(std::string(names[i]) + "desc: leading dimension " +
                          std::to_string(l.ld) + " is less than its " +
                          std::to_string(l.rows) + " rows");
  }

  // Shapes: D (m x n) = op(A) (m x k) op(B) (k x n).
  const bool transA = desc.transA == CUBLAS_OP_T;
  const bool transB = desc.transB == CUBLAS_OP_T;
  const uint64_t aRows = transA ? a.cols : a.rows,
                 aCols = transA ? a.rows : a.cols;
  const uint64_t bRows = transB ? b.cols : b.rows,
                 bCols = transB ? b.rows : b.cols;
  auto op = [](const char *name, bool trans, const Layout &l) {
    return std::string("op(") + name + ") (" + name + " " + shape(l) +
           ", TRANS" + name + " " + (trans ? "CUBLAS_OP_T" : "CUBLAS_OP_N") +
           ")";
  };
  if (aRows != d.rows)
    return invalidValue(op("A", transA, a) + " has " + std::to_string(aRows) +
                        " rows but D has " + std::to_string(d.rows));
  if (bCols != d.cols)
    return invalidValue(op("B", transB, b) + " has " + std::to_string(bCols) +
                        " columns but D has " + std::to_string(d.cols));
  if (aCols != bRows)
    return invalidValue(op("A", transA, a) + " has " + std::to_string(aCols) +
                        " columns but " + op("B", transB, b) + " has " +
                        std::to_string(bRows) + " rows (k differs)");
  if (c.rows != d.rows || c.cols != d.cols)
    return invalidValue("C is " + shape(c) + " but D is " + shape(d));

  // Batches.
  for (int i = 0; i < 3; ++i)
    if (layouts[i]->batchCount != d.batchCount)
      return invalidValue(std::string(names[i]) + "desc has batch count " +
                          std::to_string(layouts[i]->batchCount) +
                          " but Ddesc has " + std::to_string(d.batchCount) +
                          " (set the count on every layout; stride 0 "
                          "broadcasts)");
  if (d.batchCount > 1 && matrixElements(d) > 0 && !writesOnce(d))
    return invalidValue("Ddesc: batch stride " + std::to_string(d.batchStride) +
                        " with ld " + std::to_string(d.ld) + " and " +
                        shape(d) +
                        " matrices: the batches would write over each other");

  p.f64 = f64;
  p.computeType = compute;
  p.scaleType = desc.scaleType;
  p.transA = transA;
  p.transB = transB;
  p.epilogue = epilogue;
  p.biasType = biasType;
  p.biasBatchStride = desc.biasBatchStride;
  p.auxLd = mask ? desc.auxLd : 0;
  p.a = a;
  p.b = b;
  p.c = c;
  p.d = d;
  p.m = static_cast<int64_t>(d.rows);
  p.n = static_cast<int64_t>(d.cols);
  p.k = static_cast<int64_t>(aCols);
  p.batch = d.batchCount;
  p.fp8 = fp8;
  p.aScale = desc.aScale;
  p.bScale = desc.bScale;
  p.amaxD = desc.amaxD;
  p.fastAccum = desc.fastAccum;
  return CUBLAS_STATUS_SUCCESS;
}

/// FNV-1a 64 of everything an algo is chosen for (not the pointers).
uint64_t problemHash(const Problem &p) {
  uint64_t h = 0xcbf29ce484222325ull;
  auto add = [&](uint64_t value) {
    for (int i = 0; i < 8; ++i) {
      h ^= (value >> (8 * i)) & 0xFF;
      h *= 0x100000001b3ull;
    }
  };
  add(p.computeType);
  add(p.scaleType);
  add(p.transA);
  add(p.transB);
  add(p.epilogue);
  add(static_cast<uint32_t>(p.biasType));
  add(p.biasBatchStride);
  add(p.auxLd);
  add(p.fastAccum);
  for (const Layout *l : {&p.a, &p.b, &p.c, &p.d}) {
    add(l->type);
    add(l->rows);
    add(l->cols);
    add(l->ld);
    add(l->batchCount);
    add(l->batchCount > 1 ? l->batchStride : 0);
  }
  return h;
}

/// The largest power of two up to 256 that divides `address` (256 for 0).
uint32_t alignmentOf(uint64_t address) {
  uint32_t align = 256;
  while (address % align)
    align /= 2;
  return align;
}

// What cublasLtMatmulAlgo_t::data holds for an algo of the heuristic.
constexpr uint64_t kAlgoMagic = 0x314d495343504d41ull; // "AMPCSIM1"
enum AlgoSlot {
  kMagic, kHash, kAlignA, kAlignB, kAlignC, kAlignD, kAlignBias, kIndex
};
/// The heuristic offers up to this many algos per problem, as cuBLASLt
/// offers several (the runtime times them, issue 37 item 3). They compute
/// the same bits here; AMPC_CUDA_SIM_FAILING_ALGO=I[,J...] makes the algos
/// of those indices fail with CUBLAS_STATUS_NOT_SUPPORTED when run (to test
/// the runtime's fallback).
constexpr int kSimAlgos = 3;

bool algoFails(uint64_t index) {
  const char *v = std::getenv("AMPC_CUDA_SIM_FAILING_ALGO");
  for (; v && *v; ++v) {
    char *end = nullptr;
    unsigned long long listed = std::strtoull(v, &end, 10);
    if (end == v)
      break;
    if (listed == index)
      return true;
    v = end;
    if (*v != ',')
      break;
  }
  return false;
}

//===----------------------------------------------------------------------===//
// Execution
//===----------------------------------------------------------------------===//

template <typename T> T load(const void *base, int64_t index, int32_t type) {
  switch (type) {
  case CUDA_R_8F_E4M3:
    return static_cast<T>(
        fp8::decodeE4M3(static_cast<const uint8_t *>(base)[index]));
  case CUDA_R_8F_E5M2:
    return static_cast<T>(
        fp8::decodeE5M2(static_cast<const uint8_t *>(base)[index]));
  case CUDA_R_16F:
    return static_cast<T>(
        __half2float(static_cast<const __half *>(base)[index]));
  case CUDA_R_16BF:
    return static_cast<T>(
        __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]));
  case CUDA_R_32F:
    return static_cast<T>(static_cast<const float *>(base)[index]);
  default: return static_cast<T>(static_cast<const double *>(base)[index]);
  }
}

/// Rounds once, to nearest even (cuda_fp16.h's and cuda_bf16.h's _rn
/// conversions; FP32 -> FP32 and FP64 -> FP64 are exact).
template <typename T> void store(void *base, int64_t index, int32_t type, T v) {
  switch (type) {
  case CUDA_R_16F:
    static_cast<__half *>(base)[index] = __float2half_rn(static_cast<float>(v));
    break;
  case CUDA_R_16BF:
    static_cast<__nv_bfloat16 *>(base)[index] =
        __float2bfloat16_rn(static_cast<float>(v));
    break;
  case CUDA_R_32F:
    static_cast<float *>(base)[index] = static_cast<float>(v);
    break;
  default: static_cast<double *>(base)[index] = static_cast<double>(v);
  }
}

void gemm(bool ta, bool tb, int m, int n, int k, const float *a, int lda,
          const float *b, int ldb, float *c, int ldc) {
  cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, a, lda, b, ldb,
              0.0f, c, ldc);
}
void gemm(bool ta, bool tb, int m, int n, int k, const double *a, int lda,
          const double *b, int ldb, double *c, int ldc) {
  cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0, a, lda, b, ldb, 0.0,
              c, ldc);
}

/// One queued cublasLtMatmul: the problem and the scalars by value, the
/// operands by address (read when the stream runs it).
struct Matmul {
  Problem p;
  double alpha = 1, beta = 0;
  const void *a = nullptr, *b = nullptr, *c = nullptr, *bias = nullptr;
  void *d = nullptr;
  const void *aux = nullptr; // the ReLU bit mask epilogues
};

/// An FP8 GEMM's scale: the FP32 scalar at `pointer` (device memory, read
/// when the stream runs the GEMM), 1 for null.
float scaleAt(const void *pointer) {
  return pointer ? *static_cast<const float *>(pointer) : 1.0f;
}

/// Bit (i, j) of a ReLU bit mask: column-major with `ld` bits per column,
/// least significant bit first within a byte. cuBLASLt documents the
/// column-major bit layout and ld (CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD)
/// but not the order of bits within a word; only cuBLASLt reads the mask
/// (DRELU after RELU_AUX), so the order is the simulation's own.
bool maskBit(const void *aux, int64_t ld, int64_t i, int64_t j) {
  const uint64_t bit = static_cast<uint64_t>(j) * ld + i;
  return (static_cast<const unsigned char *>(aux)[bit / 8] >> (bit % 8)) & 1;
}
void setMaskBit(void *aux, int64_t ld, int64_t i, int64_t j, bool on) {
  const uint64_t bit = static_cast<uint64_t>(j) * ld + i;
  unsigned char &byte = static_cast<unsigned char *>(aux)[bit / 8];
  const unsigned char flag = static_cast<unsigned char>(1u << (bit % 8));
  byte = on ? byte | flag : byte & ~flag;
}

/// Rows [row, row + rows) and columns [col, col + cols) of batch `batch` of
/// an operand, widened to T and packed (ld = rows), or the operand itself
/// where it already is T.
template <typename T>
const T *operand(const void *base, const Layout &l, int32_t batch, int64_t row,
                 int64_t rows, int64_t col, int64_t cols,
                 std::vector<T> &scratch, int64_t *ld) {
  const int64_t size = elementSize(l.type);
  const char *first = static_cast<const char *>(base) +
                      (batch * l.batchStride + row + col * l.ld) * size;
  if (size == static_cast<int64_t>(sizeof(T))) {
    *ld = l.ld;
    return reinterpret_cast<const T *>(first);
  }
  scratch.resize(static_cast<size_t>(rows * cols));
  for (int64_t j = 0; j < cols; ++j)
    for (int64_t i = 0; i < rows; ++i)
      scratch[i + j * rows] = load<T>(first, i + j * l.ld, l.type);
  *ld = rows;
  return scratch.data();
}

template <typename T> T activate(uint32_t epilogue, T v) {
  if (epilogue == CUBLASLT_EPILOGUE_RELU ||
      epilogue == CUBLASLT_EPILOGUE_RELU_BIAS || writesReluMask(epilogue))
    return v > T(0) ? v : T(0);
  if (epilogue == CUBLASLT_EPILOGUE_GELU ||
      epilogue == CUBLASLT_EPILOGUE_GELU_BIAS) {
    // The tanh form, the one cuBLASLt's GELU epilogue computes (PyTorch
    // falls back to gelu(approximate='tanh') where the epilogue is missing).
    const T c = static_cast<T>(0.7978845608028654); // sqrt(2 / pi)
    return T(0.5) * v * (T(1) + std::tanh(c * (v + T(0.044715) * v * v * v)));
  }
  return v;
}

/// The bias gradient of BGRADA / BGRADB: op(A)'s rows (m values) or op(B)'s
/// columns (n values) summed over k, pairwise in T, rounded once to the
/// bias type. One matrix (describe refuses batches).
template <typename T> void biasGradient(const Matmul &mm) {
  const Problem &p = mm.p;
  const bool fromA = p.epilogue == CUBLASLT_EPILOGUE_BGRADA;
  const Layout &l = fromA ? p.a : p.b;
  // Element (i, kk) of op(A), or (kk, j) of op(B), as stored.
  const bool trans = fromA ? p.transA : p.transB;
  const int64_t count = fromA ? p.m : p.n;
  for (int64_t i = 0; i < count; ++i) {
    const T sum = math::pairwiseSum<T>(0, p.k, [&](int64_t kk) {
      const int64_t row = fromA == trans ? kk : i, col = fromA == trans ? i : kk;
      return load<T>(fromA ? mm.a : mm.b, row + col * l.ld, l.type);
    });
    store<T>(const_cast<void *>(mm.bias), i, p.biasType, sum);
  }
}

template <typename T> cudaError_t execute(const Matmul &mm) {
  const Problem &p = mm.p;
  if (hasBiasGradient(p.epilogue))
    biasGradient<T>(mm);
  T alpha = static_cast<T>(mm.alpha);
  const T beta = static_cast<T>(mm.beta);
  // FP8: the product's factor (alpha * scaleA) * scaleB, in FP32.
  if (p.fp8)
    alpha = static_cast<T>((static_cast<float>(mm.alpha) * scaleAt(p.aScale)) *
                           scaleAt(p.bScale));
  T amax = T(0);
  const int64_t m = p.m, n = p.n, k = p.k;
  // D is made a block of columns at a time, so the FP32/FP64 product
  // needs at most 4M elements of scratch whatever D's size.
  const int64_t block = std::max<int64_t>(
      1, std::min<int64_t>(n, (int64_t(1) << 22) / std::max<int64_t>(m, 1)));
  std::vector<T> aScratch, bScratch, product(static_cast<size_t>(m * block));
  const int64_t cSize = elementSize(p.c.type), dSize = elementSize(p.d.type);
  const bool withBias = hasBias(p.epilogue);
  const bool writesMask = writesReluMask(p.epilogue),
             readsMask = readsReluMask(p.epilogue),
             dreluGradient = p.epilogue == CUBLASLT_EPILOGUE_DRELU_BGRAD;
  // DRELU_BGRAD: the masked values of each row of D, summed pairwise over
  // the columns once D is made (one matrix: describe refuses batches).
  std::vector<T> masked(dreluGradient ? static_cast<size_t>(m * n) : 0);
  // alpha == 0 leaves A and B unread, as in BLAS.
  const bool multiply = m > 0 && n > 0 && k > 0 && alpha != T(0);
  for (int32_t batch = 0; batch < p.batch; ++batch) {
    int64_t lda = 0;
    const T *a = multiply ? operand<T>(mm.a, p.a, batch, 0, p.a.rows, 0,
                                       p.a.cols, aScratch, &lda)
                          : nullptr;
    const char *c = static_cast<const char *>(mm.c) +
                    (mm.c ? batch * p.c.batchStride * cSize : 0);
    char *d = static_cast<char *>(mm.d) + batch * p.d.batchStride * dSize;
    const char *bias =
        static_cast<const char *>(mm.bias) +
        (mm.bias ? batch * p.biasBatchStride * elementSize(p.biasType) : 0);
    for (int64_t j0 = 0; j0 < n; j0 += block) {
      const int64_t cols = std::min(block, n - j0);
      if (multiply) {
        // Columns j0.. of op(B): columns of B, or rows of B transposed.
        int64_t ldb = 0;
        const T *b =
            p.transB
                ? operand<T>(mm.b, p.b, batch, j0, cols, 0, k, bScratch, &ldb)
                : operand<T>(mm.b, p.b, batch, 0, k, j0, cols, bScratch, &ldb);
        gemm(p.transA, p.transB, static_cast<int>(m), static_cast<int>(cols),
             static_cast<int>(k), a, static_cast<int>(lda), b,
             static_cast<int>(ldb), product.data(), static_cast<int>(m));
      } else {
        std::fill(product.begin(), product.end(), T(0));
      }
      for (int64_t jj = 0; jj < cols; ++jj) {
        const int64_t j = j0 + jj;
        for (int64_t i = 0; i < m; ++i) {
          T v = alpha * product[i + jj * m];
          // beta == 0 leaves C unread: it may hold anything, NaN included.
          if (beta != T(0))
            v += beta * load<T>(c, i + j * p.c.ld, p.c.type);
          if (withBias)
            v += load<T>(bias, i, p.biasType);
          if (readsMask && !maskBit(mm.aux, p.auxLd, i, j))
            v = T(0);
          // |v| before D's rounding; a NaN makes the amax NaN.
          if (p.amaxD && !(std::fabs(v) <= amax))
            amax = amax != amax ? amax : std::fabs(v);
          store<T>(d, i + j * p.d.ld, p.d.type, activate(p.epilogue, v));
          // The mask says where D is positive (NaN: clear), as stored: the
          // ReLU's gradient from its output, the CPU target's relu_grad.
          if (writesMask)
            setMaskBit(const_cast<void *>(mm.aux), p.auxLd, i, j,
                       load<T>(d, i + j * p.d.ld, p.d.type) > T(0));
          if (dreluGradient)
            masked[i + j * m] = load<T>(d, i + j * p.d.ld, p.d.type);
        }
      }
    }
  }
  // DRELU_BGRAD's bias gradient: D's rows (m values) as stored, summed
  // over its columns pairwise in the compute type (the CPU target's
  // ReduceSum of the masked gradient), rounded once to the bias type.
  if (dreluGradient)
    for (int64_t i = 0; i < m; ++i)
      store<T>(const_cast<void *>(mm.bias), i, p.biasType,
               math::pairwiseSum<T>(0, n, [&](int64_t j) {
                 return masked[i + j * m];
               }));
  if (p.amaxD)
    *static_cast<float *>(p.amaxD) = static_cast<float>(amax);
  return cudaSuccess;
}

//===----------------------------------------------------------------------===//
// cublasLtMatmul's checks of the memory it is given
//===----------------------------------------------------------------------===//

/// Fails unless [pointer, pointer + bytes) is live device memory. (Not
/// checkDevice: that records a CUDA error, and a cuBLASLt call reports
/// through its status alone.)
cublasStatus_t checkMemory(const char *call, const char *what,
                           const void *pointer, uint64_t bytes) {
  if (bytes == 0)
    return CUBLAS_STATUS_SUCCESS;
  const std::string prefix =
      std::string(call) + ": " + what + " " + range(pointer, bytes);
  if (!pointer)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    std::string(call) + ": " + what + " is null");
  switch (classify(pointer, bytes)) {
  case Memory::Device: return CUBLAS_STATUS_SUCCESS;
  case Memory::FreedDevice:
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + " is in device memory that cudaFree released "
                             "(use after free)");
  case Memory::PinnedHost:
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + " is pinned host memory (cudaMallocHost), not "
                             "device memory");
  case Memory::Host: break;
  }
  if (classify(pointer, 1) == Memory::Device)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + " runs past the end of its device allocation");
  if (classify(pointer, 1) == Memory::FreedDevice)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + " starts in device memory that cudaFree released "
                             "(use after free)");
  return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                  prefix + " is a host pointer, not device memory");
}

} // namespace

//===----------------------------------------------------------------------===//
// Sim.h
//===----------------------------------------------------------------------===//

cublasStatus_t failBlas(cublasStatus_t status, const std::string &message) {
  {
    std::lock_guard<std::mutex> lock(detailMutex);
    statusText[status] = std::string(statusName(status)) + ": " + message;
  }
  std::fprintf(stderr, "ampc cuda-sim: %s\n", message.c_str());
  return status;
}

} // namespace ampc::sim

using namespace ampc::sim;

extern "C" {

//===----------------------------------------------------------------------===//
// Handle and status
//===----------------------------------------------------------------------===//

cublasStatus_t cublasLtCreate(cublasLtHandle_t *lightHandle) {
  return create(liveHandles, lightHandle, Handle{}, "cublasLtCreate");
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
  if (!lookup<Handle>(liveHandles, lightHandle))
    return failBlas(CUBLAS_STATUS_NOT_INITIALIZED,
                    "cublasLtDestroy: " + hex(lightHandle) +
                        " is not a live cuBLASLt handle");
  return destroy<Handle>(liveHandles, lightHandle, "cublasLtDestroy",
                         "cuBLASLt handle");
}

const char *cublasLtGetStatusName(cublasStatus_t status) {
  return statusName(status);
}

/// The status's name and, if the simulation failed with it, the detail of
/// the latest such failure ("CUBLAS_STATUS_NOT_SUPPORTED: cublasLtMatmul:
/// ..."); valid until the next failure with the same status.
const char *cublasLtGetStatusString(cublasStatus_t status) {
  std::lock_guard<std::mutex> lock(detailMutex);
  auto it = statusText.find(status);
  return it == statusText.end() ? statusName(status) : it->second.c_str();
}

//===----------------------------------------------------------------------===//
// Matmul descriptor
//===----------------------------------------------------------------------===//

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *matmulDesc,
                                        cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
  if (computeName(computeType).empty())
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    "cublasLtMatmulDescCreate: " + std::to_string(computeType) +
                        " is not a cublasComputeType_t");
  MatmulDesc desc;
  desc.computeType = computeType;
  desc.scaleType = scaleType;
  return create(liveDescs, matmulDesc, desc, "cublasLtMatmulDescCreate");
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
  return destroy<MatmulDesc>(liveDescs, matmulDesc, "cublasLtMatmulDescDestroy",
                             "cublasLtMatmulDesc_t");
}

cublasStatus_t
cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                               cublasLtMatmulDescAttributes_t attr,
                               const void *buf, size_t sizeInBytes) {
  return setAttribute("cublasLtMatmulDescSetAttribute",
                      lookup<MatmulDesc>(liveDescs, matmulDesc),
                      "cublasLtMatmulDesc_t", descAttribute(attr), attr, buf,
                      sizeInBytes, validateDesc);
}

cublasStatus_t
cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                               cublasLtMatmulDescAttributes_t attr, void *buf,
                               size_t sizeInBytes, size_t *sizeWritten) {
  return getAttribute("cublasLtMatmulDescGetAttribute",
                      lookup<MatmulDesc>(liveDescs, matmulDesc),
                      "cublasLtMatmulDesc_t", descAttribute(attr), attr, buf,
                      sizeInBytes, sizeWritten);
}

//===----------------------------------------------------------------------===//
// Matrix layout
//===----------------------------------------------------------------------===//

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *matLayout,
                                          cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
  if (ld < 0)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    "cublasLtMatrixLayoutCreate: leading dimension " +
                        std::to_string(ld) + " is negative");
  Layout layout;
  layout.type = type;
  layout.rows = rows;
  layout.cols = cols;
  layout.ld = ld;
  return create(liveLayouts, matLayout, layout, "cublasLtMatrixLayoutCreate");
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
  return destroy<Layout>(liveLayouts, matLayout, "cublasLtMatrixLayoutDestroy",
                         "cublasLtMatrixLayout_t");
}

cublasStatus_t
cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                 cublasLtMatrixLayoutAttribute_t attr,
                                 const void *buf, size_t sizeInBytes) {
  return setAttribute("cublasLtMatrixLayoutSetAttribute",
                      lookup<Layout>(liveLayouts, matLayout),
                      "cublasLtMatrixLayout_t", layoutAttribute(attr), attr,
                      buf, sizeInBytes, validateLayout);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(
    cublasLtMatrixLayout_t matLayout, cublasLtMatrixLayoutAttribute_t attr,
    void *buf, size_t sizeInBytes, size_t *sizeWritten) {
  return getAttribute("cublasLtMatrixLayoutGetAttribute",
                      lookup<Layout>(liveLayouts, matLayout),
                      "cublasLtMatrixLayout_t", layoutAttribute(attr), attr,
                      buf, sizeInBytes, sizeWritten);
}

//===----------------------------------------------------------------------===//
// Preference
//===----------------------------------------------------------------------===//

cublasStatus_t
cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *pref) {
  return create(livePreferences, pref, Preference{},
                "cublasLtMatmulPreferenceCreate");
}

cublasStatus_t
cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  return destroy<Preference>(livePreferences, pref,
                             "cublasLtMatmulPreferenceDestroy",
                             "cublasLtMatmulPreference_t");
}

cublasStatus_t
cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                     cublasLtMatmulPreferenceAttributes_t attr,
                                     const void *buf, size_t sizeInBytes) {
  return setAttribute("cublasLtMatmulPreferenceSetAttribute",
                      lookup<Preference>(livePreferences, pref),
                      "cublasLtMatmulPreference_t", preferenceAttribute(attr),
                      attr, buf, sizeInBytes, validatePreference);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(
    cublasLtMatmulPreference_t pref, cublasLtMatmulPreferenceAttributes_t attr,
    void *buf, size_t sizeInBytes, size_t *sizeWritten) {
  return getAttribute("cublasLtMatmulPreferenceGetAttribute",
                      lookup<Preference>(livePreferences, pref),
                      "cublasLtMatmulPreference_t", preferenceAttribute(attr),
                      attr, buf, sizeInBytes, sizeWritten);
}

} // extern "C"

namespace {

/// Resolves the descriptors of a heuristic query or a matmul (Cdesc null:
/// Ddesc, as cuBLASLt takes it) and checks the problem they describe.
cublasStatus_t
resolve(const char *call, cublasLtHandle_t handle,
        cublasLtMatmulDesc_t descHandle, cublasLtMatrixLayout_t aHandle,
        cublasLtMatrixLayout_t bHandle, cublasLtMatrixLayout_t cHandle,
        cublasLtMatrixLayout_t dHandle, MatmulDesc *desc, Problem &problem) {
  const std::string prefix = std::string(call) + ": ";
  if (!lookup<Handle>(liveHandles, handle))
    return failBlas(CUBLAS_STATUS_NOT_INITIALIZED,
                    prefix + "lightHandle " + hex(handle) +
                        " is not a live cuBLASLt handle (cublasLtCreate)");
  const MatmulDesc *d = lookup<MatmulDesc>(liveDescs, descHandle);
  if (!d)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    prefix + "the matmul descriptor " + hex(descHandle) +
                        " is not a live cublasLtMatmulDesc_t");
  const Layout *layouts[4];
  cublasLtMatrixLayout_t handles[4] = {aHandle, bHandle,
                                       cHandle ? cHandle : dHandle, dHandle};
  const char *names[4] = {"Adesc", "Bdesc", "Cdesc", "Ddesc"};
  for (int i = 0; i < 4; ++i) {
    layouts[i] = lookup<Layout>(liveLayouts, handles[i]);
    if (!layouts[i])
      return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                      prefix + names[i] + " " + hex(handles[i]) +
                          " is not a live cublasLtMatrixLayout_t");
  }
  *desc = *d;
  return describe(call, *d, *layouts[0], *layouts[1], *layouts[2], *layouts[3],
                  problem);
}

} // namespace

extern "C" {

//===----------------------------------------------------------------------===//
// Heuristic
//===----------------------------------------------------------------------===//

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
    cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
    cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requestedAlgoCount,
    cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
    int *returnAlgoCount) {
  const char *call = "cublasLtMatmulAlgoGetHeuristic";
  if (requestedAlgoCount <= 0)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    std::string(call) + ": requestedAlgoCount is " +
                        std::to_string(requestedAlgoCount) +
                        "; at least 1 is needed");
  if (!heuristicResultsArray || !returnAlgoCount)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    std::string(call) +
                        ": heuristicResultsArray or returnAlgoCount is null");
  *returnAlgoCount = 0;
  const Preference *pref = lookup<Preference>(livePreferences, preference);
  if (!pref)
    return failBlas(CUBLAS_STATUS_INVALID_VALUE,
                    std::string(call) + ": the preference " + hex(preference) +
                        " is not a live cublasLtMatmulPreference_t");
  MatmulDesc desc;
  Problem problem;
  if (cublasStatus_t status = resolve(call, lightHandle, operationDesc, Adesc,
                                      Bdesc, Cdesc, Ddesc, &desc, problem))
    return status;
  // FP8 kernels need 16-byte aligned operands (the file's comment, "FP8").
  if (problem.fp8)
    for (int i = 0; i < 4; ++i)
      if (pref->minAlignment[i] % 16)
        return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                        std::string(call) + ": FP8 GEMM: the preference's " +
                            "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" +
                            "ABCD"[i] + "_BYTES is " +
                            std::to_string(pref->minAlignment[i]) +
                            "; FP8 GEMMs need operands aligned to 16 bytes");
  // The one algo has wavesCount 1: a cap below that leaves no algo.
  if (pref->maxWavesCount > 0 && pref->maxWavesCount < 1.0f)
    return CUBLAS_STATUS_SUCCESS;

  const int count = std::min(requestedAlgoCount, kSimAlgos);
  for (int i = 0; i < count; ++i) {
    cublasLtMatmulHeuristicResult_t &result = heuristicResultsArray[i];
    std::memset(&result, 0, sizeof result);
    result.algo.data[kMagic] = kAlgoMagic;
    result.algo.data[kHash] = problemHash(problem);
    result.algo.data[kAlignA] = pref->minAlignment[0];
    result.algo.data[kAlignB] = pref->minAlignment[1];
    result.algo.data[kAlignC] = pref->minAlignment[2];
    result.algo.data[kAlignD] = pref->minAlignment[3];
    // The heuristic reads the bias pointer's value for its alignment (a
    // null pointer, divisible by anything, promises 256).
    // The aux pointer's likewise (cublasLt.h), in the same slot.
    result.algo.data[kAlignBias] =
        alignmentOf(reinterpret_cast<uintptr_t>(desc.bias)) |
        alignmentOf(reinterpret_cast<uintptr_t>(desc.aux)) << 16;
    result.algo.data[kIndex] = static_cast<uint64_t>(i);
    result.workspaceSize = 0;
    result.state = CUBLAS_STATUS_SUCCESS;
    result.wavesCount = 1.0f;
  }
  *returnAlgoCount = count;
  return CUBLAS_STATUS_SUCCESS;
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

cublasStatus_t
cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
               const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
               const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
               const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
               cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
               void *workspace, size_t workspaceSizeInBytes,
               cudaStream_t stream) {
  const char *call = "cublasLtMatmul";
  const std::string prefix = std::string(call) + ": ";
  auto invalidValue = [&](const std::string &why) {
    return failBlas(CUBLAS_STATUS_INVALID_VALUE, prefix + why);
  };
  MatmulDesc desc;
  Problem p;
  if (cublasStatus_t status = resolve(call, lightHandle, computeDesc, Adesc,
                                      Bdesc, Cdesc, Ddesc, &desc, p))
    return status;

  // The algo: from the heuristic, for this problem. A null algo is an
  // implicit query with the default preferences (256-byte alignment).
  uint64_t align[4] = {256, 256, 256, 256};
  uint64_t biasAlign = 256, auxAlign = 256;
  if (algo) {
    if (algo->data[kMagic] != kAlgoMagic)
      return invalidValue("algo was not returned by "
                          "cublasLtMatmulAlgoGetHeuristic (uninitialised, or "
                          "made by cublasLtMatmulAlgoInit, which is not "
                          "simulated)");
    if (algo->data[kHash] != problemHash(p))
      return invalidValue(
          "algo was chosen by cublasLtMatmulAlgoGetHeuristic "
          "for a different problem (the descriptor or a layout "
          "differs from the query's); query again for this one");
    for (int i = 0; i < 4; ++i)
      align[i] = algo->data[kAlignA + i];
    biasAlign = algo->data[kAlignBias] & 0xFFFF;
    auxAlign = algo->data[kAlignBias] >> 16;
    if (algo->data[kIndex] >= static_cast<uint64_t>(kSimAlgos))
      return invalidValue("algo was not returned by "
                          "cublasLtMatmulAlgoGetHeuristic (its index is out "
                          "of range)");
    if (algoFails(algo->data[kIndex]))
      return failBlas(CUBLAS_STATUS_NOT_SUPPORTED,
                      prefix + "algo " + std::to_string(algo->data[kIndex]) +
                          " does not run this problem "
                          "(AMPC_CUDA_SIM_FAILING_ALGO)");
  }

  // Scalars: CUBLASLT_POINTER_MODE_HOST, so read here, on the host.
  if (!alpha || !beta)
    return invalidValue(std::string(!alpha ? "alpha" : "beta") + " is null");
  for (const void *scalar : {alpha, beta})
    if (classify(scalar, 1) == Memory::Device)
      return invalidValue(std::string(scalar == alpha ? "alpha" : "beta") +
                          " " + hex(scalar) +
                          " is device memory, but the pointer mode is "
                          "CUBLASLT_POINTER_MODE_HOST");
  const double alphaValue = p.f64 ? *static_cast<const double *>(alpha)
                                  : *static_cast<const float *>(alpha);
  const double betaValue = p.f64 ? *static_cast<const double *>(beta)
                                 : *static_cast<const float *>(beta);
  const bool readsC = betaValue != 0;

  // Memory: what each operand spans, all batches.
  const uint64_t aBytes = extentElements(p.a) * elementSize(p.a.type);
  const uint64_t bBytes = extentElements(p.b) * elementSize(p.b.type);
  const uint64_t cBytes =
      readsC ? extentElements(p.c) * elementSize(p.c.type) : 0;
  const uint64_t dBytes = extentElements(p.d) * elementSize(p.d.type);
  // The bias is read (BIAS), or the bias gradient written (BGRADA: m
  // values, BGRADB: n).
  const bool gradient = writesBiasGradient(p.epilogue);
  const bool withBias = hasBias(p.epilogue) || gradient;
  const void *bias = withBias ? desc.bias : nullptr;
  uint64_t biasBytes = 0;
  const uint64_t biasLength = static_cast<uint64_t>(
      p.epilogue == CUBLASLT_EPILOGUE_BGRADB ? p.n : p.m);
  if (withBias && (gradient ? biasLength > 0 : p.m > 0 && p.n > 0)) {
    if (!bias)
      return invalidValue(epilogueName(p.epilogue) +
                          " needs CUBLASLT_MATMUL_DESC_BIAS_POINTER, which is "
                          "null");
    uint64_t elements = biasLength;
    if (p.batch > 1)
      elements += static_cast<uint64_t>(p.batch - 1) * p.biasBatchStride;
    biasBytes = elements * elementSize(p.biasType);
  }
  const bool needsA = p.k > 0 && p.m > 0 && p.n > 0 &&
                      (alphaValue != 0 || hasBiasGradient(p.epilogue));
  // The ReLU bit mask: bit (i, j) of D at j * ld + i, so the bits of the
  // last column end (n - 1) * ld + m bits in.
  const bool maskOut = writesReluMask(p.epilogue),
             maskIn = readsReluMask(p.epilogue);
  const void *aux = maskOut || maskIn ? desc.aux : nullptr;
  uint64_t auxBytes = 0;
  if ((maskOut || maskIn) && p.m > 0 && p.n > 0) {
    if (!aux)
      return invalidValue(epilogueName(p.epilogue) +
                          " needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, "
                          "which is null");
    auxBytes = (static_cast<uint64_t>(p.n - 1) * p.auxLd + p.m + 7) / 8;
  }
  if (cublasStatus_t s = checkMemory(call, "A", A, needsA ? aBytes : 0))
    return s;
  if (cublasStatus_t s = checkMemory(call, "B", B, needsA ? bBytes : 0))
    return s;
  if (cublasStatus_t s = checkMemory(call, "C", C, cBytes))
    return s;
  if (cublasStatus_t s = checkMemory(call, "D", D, dBytes))
    return s;
  if (cublasStatus_t s = checkMemory(call, "the bias", bias, biasBytes))
    return s;
  if (cublasStatus_t s = checkMemory(call, "the ReLU mask", aux, auxBytes))
    return s;
  // FP8: the scales are read and the amax written when the GEMM runs, as
  // FP32 scalars in device memory.
  for (auto [what, pointer] :
       {std::pair{"A's scale (CUBLASLT_MATMUL_DESC_A_SCALE_POINTER)",
                  p.aScale},
        std::pair{"B's scale (CUBLASLT_MATMUL_DESC_B_SCALE_POINTER)",
                  p.bScale},
        std::pair{"the amax (CUBLASLT_MATMUL_DESC_AMAX_D_POINTER)",
                  static_cast<const void *>(p.amaxD)}}) {
    if (!pointer)
      continue;
    if (cublasStatus_t s = checkMemory(call, what, pointer, sizeof(float)))
      return s;
    if (reinterpret_cast<uintptr_t>(pointer) % alignof(float))
      return invalidValue(std::string(what) + " " + hex(pointer) +
                          " is not aligned for an FP32 scalar");
  }
  if (p.amaxD && (overlaps(p.amaxD, sizeof(float), D, dBytes) ||
                  overlaps(p.amaxD, sizeof(float), p.aScale,
                           p.aScale ? sizeof(float) : 0) ||
                  overlaps(p.amaxD, sizeof(float), p.bScale,
                           p.bScale ? sizeof(float) : 0)))
    return invalidValue("the amax " + range(p.amaxD, sizeof(float)) +
                        " overlaps D or a scale; cuBLASLt's outputs may not "
                        "overlap each other or its inputs");
  if (workspaceSizeInBytes > 0 && !workspace)
    return invalidValue("workspace is null but workspaceSizeInBytes is " +
                        std::to_string(workspaceSizeInBytes));
  if (cublasStatus_t s =
          checkMemory(call, "the workspace", workspace, workspaceSizeInBytes))
    return s;

  // Alignment: of the pointers, and of every batch's start.
  struct Operand {
    const char *name;
    const void *pointer;
    const Layout *layout;
    uint64_t align;
    bool used;
  } operands[4] = {{"A", A, &p.a, align[0], needsA && aBytes > 0},
                   {"B", B, &p.b, align[1], needsA && bBytes > 0},
                   {"C", C, &p.c, align[2], cBytes > 0},
                   {"D", D, &p.d, align[3], dBytes > 0}};
  for (const Operand &o : operands) {
    if (!o.used || !o.align)
      continue;
    const auto address = reinterpret_cast<uintptr_t>(o.pointer);
    if (address % o.align)
      return invalidValue(
          std::string(o.name) + " " + hex(o.pointer) + " is " +
          std::to_string(alignmentOf(address)) +
          "-byte aligned, but the algo " + "was chosen for " +
          std::to_string(o.align) + "-byte alignment (" +
          (algo ? "CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_" + std::string(o.name) +
                      "_BYTES"
                : std::string("cuBLASLt's default without a preference")) +
          ")");
    const uint64_t strideBytes = static_cast<uint64_t>(o.layout->batchStride) *
                                 elementSize(o.layout->type);
    if (o.layout->batchCount > 1 && strideBytes % o.align)
      return invalidValue(std::string(o.name) + "'s batch stride of " +
                          std::to_string(strideBytes) +
                          " bytes is not a multiple " + "of the " +
                          std::to_string(o.align) +
                          "-byte alignment the algo was chosen for: batch 1 "
                          "starts misaligned");
  }
  // The bias and the ReLU mask: the heuristic took their alignment from
  // the descriptor's pointer at the query.
  struct Epilogue {
    const char *what, *which, *attribute;
    const void *pointer;
    uint64_t bytes, align;
  };
  for (const Epilogue &e :
       {Epilogue{"bias", "bias", "CUBLASLT_MATMUL_DESC_BIAS_POINTER", bias,
                 biasBytes, biasAlign},
        Epilogue{"ReLU mask", "aux",
                 "CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER", aux, auxBytes,
                 auxAlign}})
    if (e.bytes && reinterpret_cast<uintptr_t>(e.pointer) % e.align)
      return invalidValue(
          std::string("the ") + e.what + " " + hex(e.pointer) + " is " +
          std::to_string(alignmentOf(reinterpret_cast<uintptr_t>(e.pointer))) +
          "-byte aligned, but the algo was chosen for " +
          std::to_string(e.align) +
          "-byte alignment: cublasLtMatmulAlgoGetHeuristic takes the " +
          e.which + " alignment from " + e.attribute +
          "'s value at the query (null promises 256); set the " + e.which +
          " pointer before the query");
  if (workspace && reinterpret_cast<uintptr_t>(workspace) % 256)
    return invalidValue("the workspace " + hex(workspace) +
                        " is not 256-byte aligned, as cuBLASLt requires");

  // Overlaps: D is written while A, B, the bias (and C, unless C == D) are
  // read, in no order cuBLASLt promises.
  const std::string dRange = "D " + range(D, dBytes);
  const std::string rule = "; cuBLASLt does not allow its output to overlap an "
                           "input other than C == D";
  if (overlaps(D, dBytes, A, needsA ? aBytes : 0))
    return invalidValue(dRange + " overlaps A " + range(A, aBytes) + rule);
  if (overlaps(D, dBytes, B, needsA ? bBytes : 0))
    return invalidValue(dRange + " overlaps B " + range(B, bBytes) + rule);
  if (overlaps(D, dBytes, bias, biasBytes))
    return invalidValue(dRange + " overlaps the bias " +
                        range(bias, biasBytes) + rule);
  if (overlaps(D, dBytes, aux, auxBytes))
    return invalidValue(dRange + " overlaps the ReLU mask " +
                        range(aux, auxBytes) +
                        "; cuBLASLt's outputs may not overlap each other or "
                        "its inputs");
  if (maskIn && overlaps(bias, gradient ? biasBytes : 0, aux, auxBytes))
    return invalidValue("the bias gradient " + range(bias, biasBytes) +
                        " overlaps the ReLU mask " + range(aux, auxBytes) +
                        "; cuBLASLt's outputs may not overlap its inputs");
  if (maskOut) {
    // The mask is an output too: apart from every input.
    for (auto [name, pointer, bytes] :
         {std::tuple{"A", A, needsA ? aBytes : 0},
          std::tuple{"B", B, needsA ? bBytes : 0},
          std::tuple{"C", C, cBytes}, std::tuple{"the bias", bias, biasBytes}})
      if (overlaps(aux, auxBytes, pointer, bytes))
        return invalidValue("the ReLU mask " + range(aux, auxBytes) +
                            " overlaps " + name + " " + range(pointer, bytes) +
                            "; cuBLASLt's outputs may not overlap its inputs");
  }
  if (gradient) {
    // The bias gradient is an output too: apart from every input.
    const std::string gradRange =
        "the bias gradient " + range(bias, biasBytes);
    for (auto [name, pointer, bytes] :
         {std::tuple{"A", A, needsA ? aBytes : 0},
          std::tuple{"B", B, needsA ? bBytes : 0},
          std::tuple{"C", C, cBytes}})
      if (overlaps(bias, biasBytes, pointer, bytes))
        return invalidValue(gradRange + " overlaps " + name + " " +
                            range(pointer, bytes) +
                            "; cuBLASLt's outputs may not overlap its inputs");
  }
  if (C == D && C) {
    const std::string difference = layoutDifference(p.c, p.d);
    if (!difference.empty())
      return invalidValue("C == D (in place) needs Cdesc equal to Ddesc, but "
                          "they differ in " +
                          difference + " (C and D)");
  } else if (overlaps(D, dBytes, C, cBytes)) {
    return invalidValue(dRange + " overlaps C " + range(C, cBytes) +
                        " without being C (in place needs C == D and Cdesc "
                        "equal to Ddesc)");
  }

  // Its kernels launch on `stream`, which must be the current device's.
  if (!checkStreamDevice(stream, call))
    return failBlas(CUBLAS_STATUS_EXECUTION_FAILED,
                    prefix + "stream " + hex(stream) +
                        " is not a stream of the current device");
  Matmul mm;
  mm.p = p;
  mm.alpha = alphaValue;
  mm.beta = betaValue;
  mm.a = A;
  mm.b = B;
  mm.c = readsC ? C : nullptr;
  mm.d = D;
  mm.bias = bias;
  mm.aux = aux;
  const cudaError_t queued =
      enqueue(stream, call, Work::Gemm, epilogueName(p.epilogue),
              [mm]() -> cudaError_t {
                return mm.p.f64 ? execute<double>(mm) : execute<float>(mm);
              });
  if (queued != cudaSuccess)
    return failBlas(CUBLAS_STATUS_EXECUTION_FAILED,
                    prefix + "could not queue the GEMM on stream " +
                        hex(stream) + ": " + cudaGetErrorName(queued));
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
