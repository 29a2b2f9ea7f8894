//===- CpuKernels.h - kernels the CPU target's generated code calls -*- C++ -*-===//
//
// Included by the C++ that lib/Target/Cpu writes for a model, and compiled
// with it by the host compiler; depends on Float16.h and OpenBLAS's cblas.h
// only. Storage types: f32 float, f64 double, f16 and bf16 uint16_t (bits),
// integers as themselves, booleans uint8_t. Arithmetic on 16-bit floats is
// done in FP32 and rounded to nearest even where the value is stored, which
// for + - * / and sqrt is exactly the 16-bit operation (FP32 has more than
// twice the precision plus two bits), so the CPU and GPU targets differ only
// in the order of accumulation.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CPUKERNELS_H
#define AMPC_RUNTIME_CPUKERNELS_H

#include "ampc/Runtime/Float16.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace ampc::cpu {

// Loads and stores: every float value is computed on as float (double for
// f64); stores round to the buffer's type.
inline float load(float v) { return v; }
inline double load(double v) { return v; }
inline float loadF16(uint16_t v) { return numeric::f16BitsToF32(v); }
inline float loadBf16(uint16_t v) { return numeric::bf16BitsToF32(v); }
inline uint16_t storeF16(float v) { return numeric::f32ToF16Bits(v); }
inline uint16_t storeBf16(float v) { return numeric::f32ToBf16Bits(v); }

/// Calls `body(out, in...)` for every element of an output of `rank`
/// dimensions `dims`, with the linear offsets into the output (contiguous)
/// and into each input (`strides`, 0 along broadcast dimensions).
template <int N, typename Body>
void forEach(int rank, const int64_t *dims, const int64_t *const *strides,
             Body body) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= dims[d];
  if (total == 0)
    return;
  int64_t index[16] = {0};
  int64_t offsets[N > 0 ? N : 1] = {0};
  for (int64_t out = 0; out < total; ++out) {
    if constexpr (N == 0)
      body(out);
    else if constexpr (N == 1)
      body(out, offsets[0]);
    else if constexpr (N == 2)
      body(out, offsets[0], offsets[1]);
    else
      body(out, offsets[0], offsets[1], offsets[2]);
    // Odometer increment of the multi-index, updating input offsets.
    for (int d = rank - 1; d >= 0; --d) {
      if (++index[d] < dims[d]) {
        for (int i = 0; i < N; ++i)
          offsets[i] += strides[i][d];
        break;
      }
      for (int i = 0; i < N; ++i)
        offsets[i] -= strides[i][d] * (dims[d] - 1);
      index[d] = 0;
    }
  }
}

/// C (M x N) = alpha * op(A) * op(B) + beta * C in FP32, row-major, the
/// accumulation FP32 whatever the storage type (cblas_sgemm).
inline void sgemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  float alpha, const float *a, const float *b, float beta,
                  float *c) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m * n; ++i)
      c[i] = beta == 0.0f ? 0.0f : beta * c[i];
    return;
  }
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans,
              transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
              static_cast<int>(n), static_cast<int>(k), alpha, a,
              static_cast<int>(transA ? m : k), b,
              static_cast<int>(transB ? k : n), beta, c, static_cast<int>(n));
}

/// A scratch FP32 copy of `count` elements of any float storage type.
template <typename T, typename Load>
std::vector<float> widen(const T *data, int64_t count, Load load) {
  std::vector<float> out(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    out[i] = load(data[i]);
  return out;
}

/// Softmax (or log-softmax) over the last of `outer x axisSize x inner`
/// dimensions, computed in float.
template <typename In, typename Out, typename Load, typename Store>
void softmax(const In *in, Out *out, int64_t outer, int64_t axisSize,
             int64_t inner, bool logarithm, Load load, Store store) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      const int64_t base = o * axisSize * inner + i;
      float maxValue = -INFINITY;
      for (int64_t a = 0; a < axisSize; ++a)
        maxValue = std::max(maxValue, static_cast<float>(load(in[base + a * inner])));
      float sum = 0.0f;
      for (int64_t a = 0; a < axisSize; ++a)
        sum += std::exp(static_cast<float>(load(in[base + a * inner])) - maxValue);
      for (int64_t a = 0; a < axisSize; ++a) {
        float x = static_cast<float>(load(in[base + a * inner])) - maxValue;
        out[base + a * inner] =
            store(logarithm ? x - std::log(sum) : std::exp(x) / sum);
      }
    }
}

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUKERNELS_H
