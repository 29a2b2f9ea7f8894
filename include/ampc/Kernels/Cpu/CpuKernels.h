//===- CpuKernels.h - kernels the CPU target's generated code calls -*- C++ -*-===//
//
// Included by the C++ that lib/Target/Cpu writes for a model, and compiled
// with it by the host compiler; depends on Float16.h and OpenBLAS's cblas.h
// only. Storage types: f32 float, f64 double, f16 and bf16 uint16_t (bits),
// integers as themselves, booleans uint8_t. Arithmetic on 16-bit floats is
// done in FP32 and rounded to nearest even where the value is stored, which
// for + - * / and sqrt is exactly the 16-bit operation (FP32 has more than
// twice the precision plus two bits), so the CPU and GPU targets differ only
// in the order of accumulation. Reductions, normalisations, pools and losses
// accumulate in float (double for f64 data) and sum pairwise; convolutions
// are im2col + GEMM. A kernel that can meet bad data at run time (a Gather
// index, a loss label) returns false, and the generated `infer` reports the
// node through `fail`.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CPUKERNELS_H
#define AMPC_RUNTIME_CPUKERNELS_H

#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Kernels/Common/KernelMath.h"
#include "ampc/Kernels/Common/TrainMath.h"
#include "ampc/Kernels/Cpu/ThreadPool.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#if defined(__F16C__)
#include <immintrin.h>
#endif
#include <utility>
#include <vector>

namespace ampc::cpu {

// Loads and stores: every float value is computed on as float (double for
// f64); stores round to the buffer's type.
inline float load(float v) { return v; }
inline double load(double v) { return v; }
#if defined(__F16C__)
// The F16C instructions convert exactly as Float16.h does (round to nearest
// even, NaNs quieted keeping the top payload bits), several times faster;
// the driver compiles with -mf16c when the compiling machine has them.
inline float loadF16(uint16_t v) { return _cvtsh_ss(v); }
inline uint16_t storeF16(float v) {
  return static_cast<uint16_t>(_cvtss_sh(v, _MM_FROUND_TO_NEAREST_INT));
}
#else
inline float loadF16(uint16_t v) { return numeric::f16BitsToF32(v); }
inline uint16_t storeF16(float v) { return numeric::f32ToF16Bits(v); }
#endif
inline float loadBf16(uint16_t v) { return numeric::bf16BitsToF32(v); }
inline uint16_t storeBf16(float v) { return numeric::f32ToBf16Bits(v); }

/// How the templated kernels read and write a storage type, as the CUDA
/// kernels do (CudaKernels.cuh): As<T> for plain types, AsF16 / AsBf16 for
/// 16-bit floats held as bits. A kernel takes its codecs as template
/// arguments (`reduce<float, AsF16, As<float>>`), never as function
/// objects; the buffers it reads and writes hold the codecs' Storage.
template <typename T> struct As {
  using Storage = T;
  static T load(T v) { return v; }
  template <typename C> static T store(C v) { return static_cast<T>(v); }
};
struct AsF16 {
  using Storage = uint16_t;
  static float load(uint16_t v) { return loadF16(v); }
  template <typename C> static uint16_t store(C v) {
    return storeF16(static_cast<float>(v));
  }
};
struct AsBf16 {
  using Storage = uint16_t;
  static float load(uint16_t v) { return loadBf16(v); }
  template <typename C> static uint16_t store(C v) {
    return storeBf16(static_cast<float>(v));
  }
};

namespace detail {
/// One innermost row of forEach: `inner` calls of `body` with the output
/// offset and each input's offset.
/// (Inputs that all advance by one element along the row, the common case
/// of operands of the result's shape, get a loop the compiler can
/// vectorise.)
template <typename Body, std::size_t... I>
inline void forEachRow(Body &body, int64_t out, int64_t inner,
                       const int64_t *offsets, const int64_t *step,
                       bool unit, std::index_sequence<I...>) {
  if (unit) {
    for (int64_t j = 0; j < inner; ++j)
      body(out + j, (offsets[I] + j)...);
    return;
  }
  for (int64_t j = 0; j < inner; ++j)
    body(out + j, (offsets[I] + j * step[I])...);
}
} // namespace detail

namespace detail {
/// forEach over output rows [firstRow, lastRow) (rows: the innermost
/// dimension's runs) of an output with `total` elements.
template <int N, typename Body>
void forEachRows(int rank, const int64_t *dims, const int64_t *const *strides,
                 int64_t firstRow, int64_t lastRow, Body &body) {
  constexpr int M = N > 0 ? N : 1;
  int64_t offsets[M] = {0};
  int64_t inner = rank > 0 ? dims[rank - 1] : 1;
  int64_t step[M] = {0};
  for (int i = 0; i < N; ++i)
    step[i] = rank > 0 ? strides[i][rank - 1] : 0;
  bool unit = true;
  for (int i = 0; i < N; ++i)
    unit = unit && step[i] == 1;
  // The multi-index of the first row, and the input offsets there.
  int64_t index[16] = {0};
  for (int64_t rest = firstRow, d = rank - 2; d >= 0 && rest; --d) {
    index[d] = rest % dims[d];
    rest /= dims[d];
    for (int i = 0; i < N; ++i)
      offsets[i] += index[d] * strides[i][d];
  }
  for (int64_t row = firstRow; row < lastRow; ++row) {
    detail::forEachRow(body, row * inner, inner, offsets, step, unit,
                       std::make_index_sequence<N>());
    // Odometer increment of the outer multi-index, updating input offsets.
    for (int d = rank - 2; d >= 0; --d) {
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

/// The rows (innermost runs of `inner` elements) of a `rank`-D shape; 0
/// for an empty one.
inline int64_t rowsOf(int rank, const int64_t *dims, int64_t &inner) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d)
    total *= dims[d];
  inner = rank > 0 ? dims[rank - 1] : 1;
  return total == 0 ? 0 : total / inner;
}
} // namespace detail

/// Calls `body(out, in...)` for every element of an output of `rank`
/// dimensions `dims`, with the linear offsets into the output (contiguous)
/// and into each of the N inputs (`strides`, 0 along broadcast dimensions).
/// The innermost dimension is a plain loop (contiguous inputs make it a
/// unit-stride loop the compiler vectorises); an odometer walks the others.
template <int N, typename Body>
void forEach(int rank, const int64_t *dims, const int64_t *const *strides,
             Body body) {
  int64_t inner;
  if (int64_t rows = detail::rowsOf(rank, dims, inner))
    detail::forEachRows<N>(rank, dims, strides, 0, rows, body);
}

/// forEach with the rows in parallel (parallelFor): for a `body` whose
/// calls are independent (each writes only its own output element).
template <int N, typename Body>
void parallelForEach(int rank, const int64_t *dims,
                     const int64_t *const *strides, Body body) {
  int64_t inner;
  const int64_t rows = detail::rowsOf(rank, dims, inner);
  if (rows == 0)
    return;
  parallelFor(0, rows, grainFor(inner), [&](int64_t b, int64_t e) {
    detail::forEachRows<N>(rank, dims, strides, b, e, body);
  });
}

namespace detail {
inline void blasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                     int k, float alpha, const float *a, int lda,
                     const float *b, int ldb, float beta, float *c, int ldc) {
  cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}
inline void blasGemm(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int m, int n,
                     int k, double alpha, const double *a, int lda,
                     const double *b, int ldb, double beta, double *c,
                     int ldc) {
  cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
              ldc);
}
} // namespace detail

/// C (M x N) = alpha * op(A) * op(B) + beta * C, row-major with leading
/// dimensions lda, ldb, ldc (elements between rows as stored), in T: float
/// (cblas_sgemm; FP32 accumulation whatever the storage type) or double
/// (cblas_dgemm, for f64 models).
template <typename T>
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 T alpha, const T *a, int64_t lda, const T *b, int64_t ldb,
                 T beta, T *c, int64_t ldc) {
  if (m == 0 || n == 0)
    return;
  if (k == 0) {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j)
        c[i * ldc + j] = beta == T(0) ? T(0) : beta * c[i * ldc + j];
    return;
  }
  detail::blasGemm(transA ? CblasTrans : CblasNoTrans,
                   transB ? CblasTrans : CblasNoTrans, static_cast<int>(m),
                   static_cast<int>(n), static_cast<int>(k), alpha, a,
                   static_cast<int>(lda), b, static_cast<int>(ldb), beta, c,
                   static_cast<int>(ldc));
}

/// The same with packed rows.
template <typename T>
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 T alpha, const T *a, const T *b, T beta, T *c) {
  gemm<T>(transA, transB, m, n, k, alpha, a, transA ? m : k, b,
          transB ? k : n, beta, c, n);
}

// Scratch memory: every buffer a kernel fills or uses besides its operands
// and results (`out` below, columns, window offsets, accumulators) is a
// block of the memory plan's arena (ampc.scratch, sized by
// ampc::emit::scratchLayout), so no kernel allocates inside a step.

/// An FP32 copy in `out` of `count` elements of any float storage type.
template <typename Load, typename T>
void widen(const T *data, int64_t count, float *out) {
  parallelFor(0, count, grainFor(1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = Load::load(data[i]);
  });
}

/// A copy in `out` of `count` elements in the compute type `C` (float, or
/// double for f64 data), loaded with the codec `Load`.
template <typename C, typename Load, typename T>
void convert(const T *data, int64_t count, C *out) {
  parallelFor(0, count, grainFor(1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      out[i] = static_cast<C>(Load::load(data[i]));
  });
}

/// A copy in `out`, in `C`, of `data` broadcast to `dims` (`strides` are
/// the input's, 0 along broadcast dimensions).
template <typename C, typename Load, typename T>
void broadcast(const T *data, int rank, const int64_t *dims,
               const int64_t *inputStrides, C *out) {
  const int64_t *strides[] = {inputStrides};
  parallelForEach<1>(rank, dims, strides, [&](int64_t o, int64_t i) {
    out[o] = static_cast<C>(Load::load(data[i]));
  });
}

template <typename T> bool isNan(T v) {
  if constexpr (std::is_floating_point_v<T>)
    return std::isnan(v);
  else
    return (void)v, false;
}

/// The identity of max for `T`: -infinity or the lowest integer.
template <typename T> T lowest() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}

// Sums pairwise over blocks of 64, as the CUDA kernels do (KernelMath.h).
using math::pairwiseSum;

/// The message infer's caller reads after a non-zero return; kept in the
/// instance state (`slot`), pointing to a string literal.
inline int32_t fail(unsigned char *slot, const char *message) {
  std::memcpy(slot, &message, sizeof(message));
  return 1;
}
inline const char *lastError(const unsigned char *slot) {
  const char *message;
  std::memcpy(&message, slot, sizeof(message));
  return message;
}

/// The library's threads (ThreadPool.h), kept in the instance state at
/// `slot`: `init` starts them from ampc_abi_config.num_threads (0: every
/// available core; 1: no pool, the serial code), and sets OpenBLAS's
/// thread count to the same number (process-global: the last instance
/// initialised sets it; the bits do not depend on it); `release` joins
/// them.
inline void startThreads(unsigned char *slot, int32_t requested) {
  int threads = threadsFor(requested);
  ThreadPool *pool = nullptr;
  if (threads > 1) {
    // A process out of threads runs the instance on the calling thread.
    try {
      pool = new ThreadPool(threads);
    } catch (...) {
      threads = 1;
    }
  }
  std::memcpy(slot, &pool, sizeof(pool));
  openblas_set_num_threads(threads);
}
inline ThreadPool *threadsAt(const unsigned char *slot) {
  ThreadPool *pool;
  std::memcpy(&pool, slot, sizeof(pool));
  return pool;
}
inline void stopThreads(unsigned char *slot) {
  delete threadsAt(slot);
  ThreadPool *none = nullptr;
  std::memcpy(slot, &none, sizeof(none));
}

/// Softmax (or log-softmax) over the middle of `outer x axisSize x inner`
/// dimensions, computed in `C` (float, or double for f64).
template <typename C, typename Load, typename Store, typename In, typename Out>
void softmax(const In *in, Out *out, int64_t outer, int64_t axisSize,
             int64_t inner, bool logarithm) {
  parallelFor(0, outer * inner, grainFor(axisSize), [&](int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * axisSize * inner + i;
      C maxValue = -std::numeric_limits<C>::infinity();
      for (int64_t a = 0; a < axisSize; ++a)
        maxValue = std::max(maxValue, static_cast<C>(Load::load(in[base + a * inner])));
      const C sum = pairwiseSum<C>(0, axisSize, [&](int64_t a) {
        return std::exp(static_cast<C>(Load::load(in[base + a * inner])) - maxValue);
      });
      const C logSum = std::log(sum);
      for (int64_t a = 0; a < axisSize; ++a) {
        C x = static_cast<C>(Load::load(in[base + a * inner])) - maxValue;
        out[base + a * inner] = Store::store(logarithm ? x - logSum : std::exp(x) / sum);
      }
    }
  });
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// Concat: copies `outer` blocks of `inBlock` elements of one input to
/// `out`, whose blocks are `outBlock` long, at `offset` within each block.
template <typename T>
void concatPart(const T *in, T *out, int64_t outer, int64_t inBlock,
                int64_t outBlock, int64_t offset) {
  if (inBlock == 0)
    return;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(out + o * outBlock + offset, in + o * inBlock,
                static_cast<size_t>(inBlock) * sizeof(T));
}

/// Gather along the middle of `outer x axisSize x inner` data: `count`
/// indices, negative ones counting from the end. Returns false (writing
/// nothing) when an index is out of range.
template <typename T, typename I>
bool gather(const T *data, const I *indices, T *out, int64_t outer,
            int64_t axisSize, int64_t count, int64_t inner) {
  for (int64_t i = 0; i < count; ++i) {
    int64_t k = static_cast<int64_t>(indices[i]);
    if (k < -axisSize || k >= axisSize)
      return false;
  }
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = static_cast<int64_t>(indices[i]);
      if (k < 0)
        k += axisSize;
      if (inner)
        std::memcpy(out + (o * count + i) * inner,
                    data + (o * axisSize + k) * inner,
                    static_cast<size_t>(inner) * sizeof(T));
    }
  return true;
}

/// Scatter (ampc.scatter) of storage `Codec::Storage`, combining in C:
/// `out` (outer x axisSize x inner) = data, then for each a, index j in
/// order, b: out[a, k, b] = combine(out[a, k, b], updates[a, j, b]), k =
/// indices[j] (+ axisSize when negative). Returns false, writing nothing,
/// when an index is outside [−axisSize, axisSize).
template <typename C, typename Codec, typename I>
bool scatter(const typename Codec::Storage *data, const I *indices,
             const typename Codec::Storage *updates,
             typename Codec::Storage *out, int64_t outer, int64_t axisSize,
             int64_t count, int64_t inner, math::ScatterReduction reduction) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>(indices[i]);
    if (k < -axisSize || k >= axisSize)
      return false;
  }
  if (out != data && outer * axisSize * inner > 0)
    std::memcpy(out, data,
                static_cast<size_t>(outer * axisSize * inner) *
                    sizeof(typename Codec::Storage));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = static_cast<int64_t>(indices[i]);
      if (k < 0)
        k += axisSize;
      const typename Codec::Storage *src = updates + (o * count + i) * inner;
      typename Codec::Storage *dst = out + (o * axisSize + k) * inner;
      for (int64_t b = 0; b < inner; ++b)
        dst[b] = reduction == math::ScatterNone
                     ? src[b]
                     : Codec::store(math::scatterCombine<C>(
                           static_cast<C>(Codec::load(dst[b])),
                           static_cast<C>(Codec::load(src[b])), reduction));
    }
  return true;
}

/// TopK's indices (ampc.top_k) along the middle of `outer x axisSize x
/// inner` input, compared in C: out (outer x k x inner) gets the positions
/// of the first k elements of each row in math::topKBefore's order.
/// `order` is scratch of axisSize entries.
template <typename C, typename Codec>
void topK(const typename Codec::Storage *in, int64_t *out, int64_t outer,
          int64_t axisSize, int64_t inner, int64_t k, bool largest,
          int64_t *order) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < inner; ++b) {
      const typename Codec::Storage *row = in + o * axisSize * inner + b;
      auto at = [&](int64_t a) { return static_cast<C>(Codec::load(row[a * inner])); };
      for (int64_t a = 0; a < axisSize; ++a)
        order[a] = a;
      std::partial_sort(order, order + k, order + axisSize,
                        [&](int64_t i, int64_t j) {
                          return math::topKBefore<C>(at(i), i, at(j), j,
                                                     largest);
                        });
      for (int64_t r = 0; r < k; ++r)
        out[(o * k + r) * inner + b] = order[r];
    }
}

//===----------------------------------------------------------------------===//
// Reductions and normalisation
//===----------------------------------------------------------------------===//

enum Reduction { ReduceSum = 0, ReduceMean = 1, ReduceMax = 2, ReduceProd = 3 };

/// ReduceSum/Mean/Max/Prod in `C` (a product in order). The input offset of an element is the sum of
/// a kept part (the `keptRank` dimensions `keptDims` with input strides
/// `keptStrides`, in output order) and a reduced part (likewise); every
/// output element reduces `count` = prod(reducedDims) elements, sums
/// pairwise. `reduced` (scratch, `count` entries) receives the input
/// offset of each reduced element.
template <typename C, typename Load, typename Store, typename In, typename Out>
void reduce(const In *in, Out *out, int keptRank, const int64_t *keptDims,
            const int64_t *keptStrides, int reducedRank,
            const int64_t *reducedDims, const int64_t *reducedStrides,
            Reduction kind, int64_t *reduced) {
  int64_t count = 0;
  const int64_t *rs[] = {reducedStrides};
  forEach<1>(reducedRank, reducedDims, rs,
             [&](int64_t, int64_t a) { reduced[count++] = a; });
  const int64_t *ks[] = {keptStrides};
  parallelForEach<1>(keptRank, keptDims, ks, [&](int64_t o, int64_t base) {
    C acc;
    if (kind == ReduceMax) {
      acc = lowest<C>();
      for (int64_t j = 0; j < count; ++j) {
        const C x = static_cast<C>(Load::load(in[base + reduced[j]]));
        if (x > acc || (isNan(x) && !isNan(acc)))
          acc = x;
      }
    } else if (kind == ReduceProd) {
      acc = C(1);
      for (int64_t j = 0; j < count; ++j)
        acc *= static_cast<C>(Load::load(in[base + reduced[j]]));
    } else {
      acc = pairwiseSum<C>(0, count, [&](int64_t j) {
        return static_cast<C>(Load::load(in[base + reduced[j]]));
      });
      if (kind == ReduceMean)
        acc = static_cast<C>(acc / static_cast<C>(count));
    }
    out[o] = Store::store(acc);
  });
}

/// LayerNormalization over the last `inner` elements of each of `outer`
/// rows: Mean, InvStdDev = 1 / sqrt(Var + epsilon) (population variance,
/// two passes) and Y = (X - Mean) * InvStdDev * scale + bias, computed in
/// `C`. `scale` and `bias` (may be null) hold `inner` values.
template <typename C, typename Load, typename Store, typename StoreStash,
          typename In, typename Out, typename Stash>
void layerNorm(const In *x, Out *y, Stash *mean, Stash *invStdDev,
               int64_t outer, int64_t inner, const C *scale, const C *bias,
               C epsilon) {
  parallelFor(0, outer, grainFor(inner), [&](int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const In *row = x + o * inner;
    C m, variance;
    math::meanAndVariance<C>(
        inner, [&](int64_t i) { return static_cast<C>(Load::load(row[i])); }, m,
        variance);
    const C inv = C(1) / std::sqrt(variance + epsilon);
    for (int64_t i = 0; i < inner; ++i) {
      C v = (static_cast<C>(Load::load(row[i])) - m) * inv * scale[i];
      if (bias)
        v += bias[i];
      y[o * inner + i] = Store::store(v);
    }
    mean[o] = StoreStash::store(m);
    invStdDev[o] = StoreStash::store(inv);
  }
  });
}

/// ampc.add_layer_norm: `sum` = x + addend (computed in `C`, stored in X's
/// type: the add's bits), then layerNorm of `sum`.
template <typename C, typename Load, typename Store, typename StoreStash,
          typename LoadAddend, typename In, typename Addend, typename Out,
          typename Stash>
void addLayerNorm(const In *x, const Addend *addend, In *sum, Out *y,
                  Stash *mean, Stash *invStdDev, int64_t outer, int64_t inner,
                  const C *scale, const C *bias, C epsilon) {
  parallelFor(0, outer * inner, grainFor(1), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      sum[i] = Load::store(static_cast<C>(Load::load(x[i])) +
                           static_cast<C>(LoadAddend::load(addend[i])));
  });
  layerNorm<C, Load, Store, StoreStash>(sum, y, mean, invStdDev, outer, inner,
                                        scale, bias, epsilon);
}

/// The per-channel moments of (n, c, inner) data in one pass:
/// math::pairwiseMoments over each channel's n · inner elements in index
/// order (the CUDA kernels batchNormPartials and batchNormApply compute the
/// same tree), each channel's given to `done(channel, moments)`.
template <typename C, typename Load, typename In, typename Done>
void channelMoments(const In *x, int64_t n, int64_t c, int64_t inner,
                    const Done &done) {
  const int64_t count = n * inner;
  parallelFor(0, c, grainFor(count), [&](int64_t c0, int64_t c1) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    // A leaf's terms loaded once, walking the planes (no division per
    // term), then leafMoments over them: pairwiseMoments' arithmetic.
    auto leaf = [&](int64_t b, int64_t e) {
      C terms[64];
      int64_t plane = b / inner, i = b % inner;
      for (int64_t j = 0; j < e - b; ++j) {
        terms[j] = static_cast<C>(Load::load(x[(plane * c + ch) * inner + i]));
        if (++i == inner)
          i = 0, ++plane;
      }
      return math::leafMoments<C>(0, e - b,
                                  [&](int64_t j) { return terms[j]; });
    };
    done(ch, math::pairwiseTree<math::Moments<C>, math::kMomentsMaxDepth>(
                 0, count, leaf,
                 [](const math::Moments<C> &l, const math::Moments<C> &r) {
                   return math::combineMoments(l, r);
                 }));
  }
  });
}

/// The per-channel mean and population variance of (n, c, inner) data
/// (BatchNormalization in training mode): channelMoments, variance =
/// M2 / count.
template <typename C, typename Load, typename In>
void channelStatistics(const In *x, int64_t n, int64_t c, int64_t inner,
                       C *mean, C *variance) {
  const int64_t count = n * inner;
  channelMoments<C, Load>(x, n, c, inner,
                          [&](int64_t ch, const math::Moments<C> &m) {
                            mean[ch] = m.mean;
                            variance[ch] = m.m2 / static_cast<C>(count);
                          });
}

/// BatchNormalization: Y = (X - mean) / sqrt(var + epsilon) * scale + bias
/// per channel of (n, c, inner) data, in `C`.
/// With `invStdDev` (channels values, may be null) also the inverse
/// standard deviation 1 / sqrt(var + epsilon) per channel, which
/// batch_norm_grad reads. The epilogue (math::batchNormEpilogue): a
/// residual of Y's shape read through the codec Residual (null: none) and
/// added in E, and ReLU.
template <typename C, typename Load, typename Store, typename Residual = Store,
          typename E = C, typename In, typename Out>
void batchNorm(const In *x, Out *y, int64_t n, int64_t c, int64_t inner,
               const C *scale, const C *bias, const C *mean,
               const C *variance, C epsilon, C *invStdDev = nullptr,
               const typename Residual::Storage *residual = nullptr,
               bool relu = false) {
  parallelFor(0, c, grainFor(n * inner), [&](int64_t c0, int64_t c1) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    if (invStdDev)
      invStdDev[ch] = C(1) / std::sqrt(variance[ch] + epsilon);
    const C factor = scale[ch] / std::sqrt(variance[ch] + epsilon);
    for (int64_t b = 0; b < n; ++b) {
      const int64_t base = (b * c + ch) * inner;
      for (int64_t i = 0; i < inner; ++i)
        y[base + i] = math::batchNormEpilogue<E, Store, Residual>(
            (static_cast<C>(Load::load(x[base + i])) - mean[ch]) * factor +
                bias[ch],
            residual, base + i, relu);
    }
  }
  });
}

//===----------------------------------------------------------------------===//
// Windows: convolution and pooling
//===----------------------------------------------------------------------===//

/// The spatial geometry of a convolution or pooling window over one
/// (batch, channel) plane.
struct Window {
  int rank;
  int64_t in[8], out[8], kernel[8], stride[8], padBegin[8], padEnd[8],
      dilation[8];

  int64_t inSize() const { return product(in); }
  int64_t outSize() const { return product(out); }
  int64_t kernelSize() const { return product(kernel); }
  int64_t product(const int64_t *dims) const {
    int64_t p = 1;
    for (int d = 0; d < rank; ++d)
      p *= dims[d];
    return p;
  }
};

/// Where each kernel position `k` of each output position `p` reads:
/// offsets[k * outSize + p] is the row-major offset into the plane, -1 for
/// the padding, -2 beyond the padded input (windows that ceil_mode adds).
/// With `columnMajor`, valid offsets are column-major (MaxPool's
/// storage_order 1) instead. `offsets` has outSize * kernelSize entries.
inline void windowOffsets(const Window &w, bool columnMajor,
                          int64_t *offsets) {
  const int64_t outSize = w.outSize(), kernelSize = w.kernelSize();
  int64_t k[8] = {0};
  for (int64_t ki = 0; ki < kernelSize; ++ki) {
    int64_t o[8] = {0};
    for (int64_t p = 0; p < outSize; ++p) {
      int64_t offset = 0, state = 0;
      for (int d = 0; d < w.rank; ++d) {
        const int64_t pos =
            o[d] * w.stride[d] - w.padBegin[d] + k[d] * w.dilation[d];
        if (pos >= w.in[d] + w.padEnd[d])
          state = -2;
        else if ((pos < 0 || pos >= w.in[d]) && state == 0)
          state = -1;
        if (!columnMajor)
          offset = offset * w.in[d] + pos;
      }
      if (columnMajor)
        for (int d = w.rank - 1; d >= 0; --d)
          offset = offset * w.in[d] +
                   (o[d] * w.stride[d] - w.padBegin[d] + k[d] * w.dilation[d]);
      offsets[ki * outSize + p] = state ? state : offset;
      for (int d = w.rank - 1; d >= 0 && ++o[d] == w.out[d]; --d)
        o[d] = 0;
    }
    for (int d = w.rank - 1; d >= 0 && ++k[d] == w.kernel[d]; --d)
      k[d] = 0;
  }
}

/// MaxPool over `planes` (batch x channel) planes: the largest value of each
/// window (NaN wins, the first maximum on ties) and its flat index into the
/// input (ONNX Indices: plane * inSize + the spatial offset, row-major or,
/// with `columnMajor`, column-major). `C` is the compare type. Scratch:
/// `offsets` and, with `columnMajor`, `reported` (windowOffsets).
template <typename C, typename Load, typename Store, typename In, typename Out>
void maxPool(const In *x, Out *y, int64_t *indices, int64_t planes,
             const Window &w, bool columnMajor,
             int64_t *offsets, int64_t *reported) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  windowOffsets(w, false, offsets);
  if (columnMajor)
    windowOffsets(w, true, reported);
  parallelFor(0, planes, grainFor(outSize * kernelSize), [&](int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t p = 0; p < outSize; ++p) {
      C best = lowest<C>();
      int64_t where = -1;
      for (int64_t k = 0; k < kernelSize; ++k) {
        const int64_t offset = offsets[k * outSize + p];
        if (offset < 0)
          continue;
        const C v = static_cast<C>(Load::load(x[q * inSize + offset]));
        if (where < 0 || v > best || (isNan(v) && !isNan(best))) {
          best = v;
          where = columnMajor ? reported[k * outSize + p] : offset;
        }
      }
      y[q * outSize + p] = Store::store(best);
      if (indices)
        indices[q * outSize + p] = where < 0 ? -1 : q * inSize + where;
    }
  });
}

/// AveragePool (GlobalAveragePool with a whole-plane window) over `planes`
/// planes, summing in `C`. The divisor counts the window's positions inside
/// the input, or with `countIncludePad` inside the padded input (positions
/// that ceil_mode adds beyond the end padding never count, as in PyTorch).
/// Scratch: `offsets` (windowOffsets).
template <typename C, typename Load, typename Store, typename In, typename Out>
void averagePool(const In *x, Out *y, int64_t planes, const Window &w,
                 bool countIncludePad,
                 int64_t *offsets) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  windowOffsets(w, false, offsets);
  parallelFor(0, planes, grainFor(outSize * kernelSize), [&](int64_t q0, int64_t q1) {
  for (int64_t q = q0; q < q1; ++q)
    for (int64_t p = 0; p < outSize; ++p) {
      C sum = 0;
      int64_t count = 0;
      for (int64_t k = 0; k < kernelSize; ++k) {
        const int64_t offset = offsets[k * outSize + p];
        if (offset >= 0)
          sum += static_cast<C>(Load::load(x[q * inSize + offset]));
        count += offset >= 0 || (countIncludePad && offset == -1);
      }
      y[q * outSize + p] = Store::store(sum / static_cast<C>(count));
    }
  });
}

/// The mean of each of `planes` planes of `size` elements, in `C`.
template <typename C, typename Load, typename Store, typename In, typename Out>
void globalAveragePool(const In *x, Out *y, int64_t planes, int64_t size) {
  parallelFor(0, planes, grainFor(size), [&](int64_t q0, int64_t q1) {
    for (int64_t q = q0; q < q1; ++q) {
      const C sum = pairwiseSum<C>(0, size, [&](int64_t i) {
        return static_cast<C>(Load::load(x[q * size + i]));
      });
      y[q] = Store::store(sum / static_cast<C>(size));
    }
  });
}

/// Conv in T (float on FP32 copies of 16-bit operands, or double): x (n, c,
/// in...), weight (m, c / group, kernel...), optional bias (m); y (n, m,
/// out...) gets the result. Per group and chunk of `images` (>= 1) images,
/// im2col of the chunk's images side by side, then one GEMM (the per-image
/// products of one chunk share the packing of the weight; see
/// cpuConvImagesPerGemm in KernelGeometry.h for how many images a chunk
/// has).
namespace detail {
/// Whether a convolution window is the identity on the plane (1x1 kernel,
/// stride 1, no padding), so that a plane is its own im2col matrix.
inline bool isDirectWindow(const Window &w) {
  if (w.kernelSize() != 1)
    return false;
  for (int d = 0; d < w.rank; ++d)
    if (w.stride[d] != 1 || w.padBegin[d] != 0 || w.in[d] != w.out[d])
      return false;
  return true;
}

/// One output row of a window (the positions along the last spatial
/// dimension that share the others) at one kernel position: the input
/// offset of output position `ow` of the row is base + start + ow·stride,
/// inside the input for lo <= ow < hi (nowhere when !valid).
struct WindowRow {
  bool valid;
  int64_t base, start, stride, lo, hi;
};

/// Calls `body(ki, r, row)` for every kernel position ki (row-major over
/// the kernel) and output row r (row-major over the output's leading
/// dimensions) in that order: the row-by-row form of windowOffsets, so that
/// im2col and col2im copy runs of a row instead of looking up every
/// element's offset.
template <typename Body>
void forEachWindowRow(const Window &w, Body body) {
  const int last = w.rank - 1;
  const int64_t kernelSize = w.kernelSize(), outLast = w.out[last],
                inLast = w.in[last], rows = w.outSize() / outLast;
  int64_t inStride[8], stride = 1;
  for (int d = last; d >= 0; --d) {
    inStride[d] = stride;
    stride *= w.in[d];
  }
  int64_t k[8] = {0};
  for (int64_t ki = 0; ki < kernelSize; ++ki) {
    WindowRow row;
    row.stride = w.stride[last];
    row.start = k[last] * w.dilation[last] - w.padBegin[last];
    // ow·stride + start in [0, inLast).
    row.lo = row.start >= 0 ? 0 : (-row.start + row.stride - 1) / row.stride;
    row.hi = inLast - row.start <= 0
                 ? 0
                 : (inLast - row.start + row.stride - 1) / row.stride;
    row.lo = std::min(row.lo, outLast);
    row.hi = std::max(row.lo, std::min(row.hi, outLast));
    int64_t o[8] = {0};
    for (int64_t r = 0; r < rows; ++r) {
      row.valid = true, row.base = 0;
      for (int d = 0; d < last; ++d) {
        const int64_t pos =
            o[d] * w.stride[d] - w.padBegin[d] + k[d] * w.dilation[d];
        row.valid = row.valid && pos >= 0 && pos < w.in[d];
        row.base += pos * inStride[d];
      }
      body(ki, r, row);
      for (int d = last - 1; d >= 0 && ++o[d] == w.out[d]; --d)
        o[d] = 0;
    }
    for (int d = last; d >= 0 && ++k[d] == w.kernel[d]; --d)
      k[d] = 0;
  }
}

/// The im2col matrix ((`channels` · kernel) x out) of `channels` planes at
/// `plane`, written to `columns` with rows `ld` apart (0 in the padding); a
/// copy of the planes for a direct window.
template <typename T>
void im2col(const T *plane, int64_t channels, const Window &w, bool direct,
            T *columns, int64_t ld) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  for (int64_t ci = 0; ci < channels; ++ci) {
    const T *src = plane + ci * inSize;
    T *rows = columns + ci * kernelSize * ld;
    if (direct) {
      std::copy(src, src + outSize, rows);
      continue;
    }
    const int64_t outLast = w.out[w.rank - 1];
    forEachWindowRow(w, [&](int64_t ki, int64_t r, const WindowRow &row) {
      T *dst = rows + ki * ld + r * outLast;
      if (!row.valid) {
        std::fill(dst, dst + outLast, T(0));
        return;
      }
      std::fill(dst, dst + row.lo, T(0));
      const T *at = src + row.base;
      if (row.stride == 1)
        std::copy(at + row.start + row.lo, at + row.start + row.hi,
                  dst + row.lo);
      else
        for (int64_t ow = row.lo; ow < row.hi; ++ow)
          dst[ow] = at[row.start + ow * row.stride];
      std::fill(dst + row.hi, dst + outLast, T(0));
    });
  }
}

/// col2im: adds each element of the (`channels` · kernel) x out columns
/// (rows `ld` apart) to the plane position im2col read it from, kernel
/// position by kernel position and in output order (padding dropped).
template <typename T>
void col2im(const T *columns, int64_t ld, int64_t channels, const Window &w,
            T *plane) {
  const int64_t inSize = w.inSize(), kernelSize = w.kernelSize(),
                outLast = w.out[w.rank - 1];
  for (int64_t ci = 0; ci < channels; ++ci) {
    T *dst = plane + ci * inSize;
    const T *rows = columns + ci * kernelSize * ld;
    forEachWindowRow(w, [&](int64_t ki, int64_t r, const WindowRow &row) {
      if (!row.valid)
        return;
      const T *src = rows + ki * ld + r * outLast;
      const int64_t origin = row.base + row.start;
      if (row.stride == 1)
        for (int64_t ow = row.lo; ow < row.hi; ++ow)
          dst[origin + ow] += src[ow];
      else
        for (int64_t ow = row.lo; ow < row.hi; ++ow)
          dst[origin + ow * row.stride] += src[ow];
    });
  }
}

/// The im2col matrix of group `g` of images [b, b + count) of x (n, c,
/// in...): each image's columns side by side, (Cg · kernel) x (count ·
/// out). The planes themselves, without a copy, for one image and a direct
/// window.
template <typename T>
const T *im2colImages(const T *x, int64_t b, int64_t count, int64_t g,
                      int64_t c, int64_t cg, const Window &w, bool direct,
                      T *columns) {
  const int64_t inSize = w.inSize(), outSize = w.outSize();
  const T *first = x + (b * c + g * cg) * inSize;
  if (count == 1 && direct)
    return first;
  // One channel of one image per iteration: im2col writes its own rows.
  const int64_t kernelSize = w.kernelSize(), ld = count * outSize;
  parallelFor(0, count * cg, grainFor(kernelSize * outSize),
              [&](int64_t b0, int64_t b1) {
                for (int64_t p = b0; p < b1; ++p) {
                  const int64_t j = p / cg, ci = p % cg;
                  im2col(first + j * c * inSize + ci * inSize, 1, w, direct,
                         columns + ci * kernelSize * ld + j * outSize, ld);
                }
              });
  return columns;
}

/// Rows [g·Mg, (g+1)·Mg) of images [b, b + count) of a (n, m, out...)
/// tensor as one Mg x (count · out) matrix, each image's row side by side:
/// `t` itself for one image, else a copy in `staging`.
template <typename T>
const T *gatherImages(const T *t, int64_t b, int64_t count, int64_t g,
                      int64_t m, int64_t mg, int64_t outSize, T *staging) {
  const T *first = t + (b * m + g * mg) * outSize;
  if (count == 1)
    return first;
  parallelFor(0, mg, grainFor(count * outSize), [&](int64_t f0, int64_t f1) {
    for (int64_t f = f0; f < f1; ++f)
      for (int64_t j = 0; j < count; ++j) {
        const T *src = first + (j * m + f) * outSize;
        std::copy(src, src + outSize, staging + (f * count + j) * outSize);
      }
  });
  return staging;
}
} // namespace detail

/// Scratch: `columns` ((c / group) · kernel x images · out; null for a
/// direct window and one image) and `staging` (m / group x images · out,
/// the product before it is scattered to the images; null for one image).
template <typename T>
void conv(const T *x, const T *weight, const T *bias, T *y, int64_t n,
          int64_t c, int64_t m, int64_t group, const Window &w,
          int64_t images, T *columns, T *staging) {
  const int64_t outSize = w.outSize(), kernelSize = w.kernelSize();
  const int64_t cg = c / group, mg = m / group, depth = cg * kernelSize;
  const bool direct = detail::isDirectWindow(w);
  for (int64_t b = 0; b < n; b += images) {
    const int64_t count = std::min(images, n - b), width = count * outSize;
    for (int64_t g = 0; g < group; ++g) {
      const T *cols =
          detail::im2colImages(x, b, count, g, c, cg, w, direct, columns);
      T *out = count == 1 ? y + (b * m + g * mg) * outSize : staging;
      // The bias first and the product added to it (beta 1), as for one
      // image.
      if (bias)
        parallelFor(0, mg, grainFor(width), [&](int64_t f0, int64_t f1) {
          for (int64_t f = f0; f < f1; ++f)
            std::fill(out + f * width, out + (f + 1) * width,
                      bias[g * mg + f]);
        });
      gemm<T>(false, false, mg, width, depth, T(1), weight + g * mg * depth,
              cols, bias ? T(1) : T(0), out);
      if (count == 1)
        continue;
      parallelFor(0, mg, grainFor(width), [&](int64_t f0, int64_t f1) {
        for (int64_t f = f0; f < f1; ++f)
          for (int64_t j = 0; j < count; ++j) {
            const T *src = staging + (f * count + j) * outSize;
            std::copy(src, src + outSize,
                      y + ((b + j) * m + g * mg + f) * outSize);
          }
      });
    }
  }
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

enum LossReduction { LossNone = 0, LossSum = 1, LossMean = 2 };

/// NegativeLogLikelihoodLoss on (n, c, d) log-probabilities in `C` and (n, d)
/// labels: -logp[label] * weight[label] per element, 0 where the label is
/// `ignoreIndex` (when `hasIgnore`); `loss` receives n * d values
/// (reduction none), their sum, or their sum divided by the sum of the
/// weights that were used (mean). Returns false on a label outside [0, c).
/// Scratch: `values` and `used`, n * d each.
template <typename C, typename I>
bool nllLoss(const C *logp, const I *labels, const C *weights, int64_t n,
             int64_t c, int64_t d, bool hasIgnore, int64_t ignoreIndex,
             LossReduction reduction, C *loss, C *values, C *used) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t i = b * d + j;
      const int64_t label = static_cast<int64_t>(labels[i]);
      values[i] = used[i] = 0;
      if (hasIgnore && label == ignoreIndex)
        continue;
      if (label < 0 || label >= c)
        return false;
      used[i] = weights ? weights[label] : C(1);
      values[i] = -logp[(b * c + label) * d + j] * used[i];
    }
  const int64_t count = n * d;
  if (reduction == LossNone) {
    std::copy(values, values + count, loss);
    return true;
  }
  const C total = pairwiseSum<C>(0, count, [&](int64_t i) { return values[i]; });
  loss[0] = reduction == LossMean
                ? total / pairwiseSum<C>(0, count, [&](int64_t i) { return used[i]; })
                : total;
  return true;
}

/// Fills `count` elements of `width` bytes at `out` with `word` (its low
/// `width` bytes): a splat constant the library keeps in its state, filled
/// by init instead of stored in the blob.
inline void fillWords(unsigned char *out, uint64_t word, int64_t width,
                      int64_t count) {
  switch (width) {
  case 1:
    std::fill_n(out, count, static_cast<uint8_t>(word));
    break;
  case 2:
    std::fill_n(reinterpret_cast<uint16_t *>(out), count,
                static_cast<uint16_t>(word));
    break;
  case 4:
    std::fill_n(reinterpret_cast<uint32_t *>(out), count,
                static_cast<uint32_t>(word));
    break;
  default:
    std::fill_n(reinterpret_cast<uint64_t *>(out), count, word);
    break;
  }
}

//===----------------------------------------------------------------------===//
// Attention (issue 38; docs/design.md, "Fused attention")
//===----------------------------------------------------------------------===//

namespace detail {
/// Scratch of `count` values of C for a chunk of a kernel whose planned
/// scratch (`planned`) holds one chunk's: the planned buffer when the
/// chunk is the whole range (`whole`, the serial path), else a buffer of
/// the calling thread's, grown once and kept for later steps.
template <typename C> C *chunkScratch(C *planned, int64_t count, bool whole) {
  if (whole)
    return planned;
  thread_local std::vector<C> mine;
  if (static_cast<int64_t>(mine.size()) < count)
    mine.resize(static_cast<size_t>(count));
  return mine.data();
}
} // namespace detail

/// The sizes of an ampc.attention and the logical (b, h, s, d) strides, in
/// elements, of each tensor: q, k, v, o (also dO) and the bias (0 along a
/// broadcast dimension; unused without a bias).
struct AttentionShape {
  int64_t batch, heads, sq, sk, d, dv;
  int64_t q[4], k[4], v[4], o[4], bias[4];
};

/// The score of query row `qi` against key row `kj`: `scale` times their
/// dot product, in `C`.
template <typename C, typename T>
C attentionScore(const typename T::Storage *qi, const typename T::Storage *kj,
                 const AttentionShape &s, C scale) {
  C dot = 0;
  for (int64_t c = 0; c < s.d; ++c)
    dot += static_cast<C>(T::load(qi[c * s.q[3]])) *
           static_cast<C>(T::load(kj[c * s.k[3]]));
  return scale * dot;
}

/// `v` rounded to the data type, as the fused kernels round P and dS
/// before a matrix product (the identity for FP32 and FP64 data).
template <typename C, typename T> C roundTo(C v) {
  return static_cast<C>(T::load(T::template store<C>(v)));
}

/// Keys per step of the CUDA target's forward kernel (CudaAttention.cuh,
/// AttentionTiles::forward). The reference takes the same steps, so that
/// it rounds the probabilities to the data type where that kernel does:
/// exp(s - running max) of each step, before the step's product with V.
inline int64_t attentionKeyStep(int64_t d) { return d <= 128 ? 32 : 16; }

/// The sum of 32 values as a warp's xor butterfly adds them (CUDA's
/// warpSum: every lane gets the same bits).
template <typename C> C butterflySum(C (&lanes)[32]) {
  for (int offset = 16; offset > 0; offset /= 2) {
    C next[32];
    for (int i = 0; i < 32; ++i)
      next[i] = lanes[i] + lanes[i ^ offset];
    std::copy(next, next + 32, lanes);
  }
  return lanes[0];
}

/// ampc.attention, the reference: one query row at a time, in `C`;
/// `scores` (sk values) and `acc` (dv values) are the op's scratch, so no
/// sq x sk matrix is ever held. T codes Q, K, V and O, B the bias, L the
/// log-sum-exp. The keys are taken in the CUDA kernel's steps
/// (attentionKeyStep) with its online softmax: the running max m, the sum
/// l of exp(s - m) (each step's added as a warp adds it), the accumulator
/// rescaled by exp(m_old - m_new), exp(s - m) rounded to T before it
/// multiplies V; O = acc / l rounded to T, LSE = m + log(l). A row whose
/// every key is masked gets O = NaN (0 / 0) and LSE = -inf, as the kernel.
/// With dropout a dropped key's rounded exp(s - m) adds nothing to acc
/// (it still counts in l) and O = (acc / l) · keptScale: the mask applied
/// to the normalised probabilities, before their product with V.
template <typename C, typename T, typename B, typename L>
void attention(const typename T::Storage *q, const typename T::Storage *k,
               const typename T::Storage *v, const typename B::Storage *bias,
               typename T::Storage *o, typename L::Storage *lse,
               const AttentionShape &s, C scale, bool causal,
               const math::AttentionDropout &dropout, C *scoresScratch,
               C *accScratch) {
  const C inf = std::numeric_limits<C>::infinity();
  const int64_t step = attentionKeyStep(s.d);
  const C kept = dropout.keptScale<C>();
  // (batch, head) pairs in parallel, each chunk with its own rows of
  // scratch (detail::chunkScratch).
  parallelFor(0, s.batch * s.heads, grainFor(s.sq * s.sk * (s.d + s.dv)),
              [&](int64_t bh0, int64_t bh1) {
  C *scores = detail::chunkScratch(scoresScratch, s.sk + s.dv,
                                   bh0 == 0 && bh1 == s.batch * s.heads);
  C *acc = scores == scoresScratch ? accScratch : scores + s.sk;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    int64_t row = bh * s.sq;
      for (int64_t i = 0; i < s.sq; ++i, ++row) {
        const auto *qi = q + b * s.q[0] + h * s.q[1] + i * s.q[2];
        // Keys past a causal row's own add nothing (e = 0, alpha = 1).
        const int64_t visible = causal ? std::min(i + 1, s.sk) : s.sk;
        for (int64_t j = 0; j < visible; ++j) {
          C x = attentionScore<C, T>(
              qi, k + b * s.k[0] + h * s.k[1] + j * s.k[2], s, scale);
          if (bias)
            x += static_cast<C>(B::load(bias[b * s.bias[0] + h * s.bias[1] +
                                             i * s.bias[2] + j * s.bias[3]]));
          scores[j] = x;
        }
        C m = -inf, l = 0;
        std::fill(acc, acc + s.dv, C(0));
        for (int64_t j0 = 0; j0 < visible; j0 += step) {
          const int64_t j1 = std::min(j0 + step, visible);
          C mNew = m;
          for (int64_t j = j0; j < j1; ++j)
            mNew = std::max(mNew, scores[j]);
          const C alpha = m == -inf ? C(0) : std::exp(m - mNew);
          C lanes[32] = {};
          for (int64_t j = j0; j < j1; ++j)
            lanes[j - j0] = scores[j] == -inf ? C(0) : std::exp(scores[j] - mNew);
          for (int64_t c = 0; c < s.dv; ++c)
            acc[c] *= alpha;
          for (int64_t j = j0; j < j1; ++j) {
            if (!dropout.keeps(bh, i, j, s.sq, s.sk))
              continue;
            const C p = roundTo<C, T>(lanes[j - j0]);
            const auto *vj = v + b * s.v[0] + h * s.v[1] + j * s.v[2];
            for (int64_t c = 0; c < s.dv; ++c)
              acc[c] += p * static_cast<C>(T::load(vj[c * s.v[3]]));
          }
          l = alpha * l + butterflySum(lanes);
          m = mNew;
        }
        lse[row] = L::store(m + std::log(l));
        auto *oi = o + b * s.o[0] + h * s.o[1] + i * s.o[2];
        for (int64_t c = 0; c < s.dv; ++c)
          oi[c * s.o[3]] = T::store(acc[c] / l * kept);
      }
  }
  });
}

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUKERNELS_H
