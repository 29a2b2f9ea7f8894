//===- Wmma.h - CUDA's warp matrix operations (nvcuda::wmma) on the CPU -*- C++ -*-===//
//
// Included by CudaSim.h: what <mma.h> gives device code, for the shapes the
// project's kernels use (16x16x16; matrix_a / matrix_b of __half or
// __nv_bfloat16, row- or column-major; a float accumulator).
//
// Semantics (issue 38):
//  - load_matrix_sync, store_matrix_sync and mma_sync are warp-wide: every
//    lane of the warp calls them from the same call site (CUDA requires it;
//    a divergent call fails the kernel with the two sites), through
//    ampc::sim::warpGather, which orders the warp's memory accesses for the
//    race check as a warp operation does. fill_fragment is per lane.
//  - The element-to-lane mapping, unspecified in CUDA, is: lane l holds the
//    8 elements l*8 .. l*8+7 of the 16x16 matrix in row-major order (of
//    A[m][k], B[k][n] or C[m][n]), so x[i] is element (l/2, (l%2)*8 + i). A
//    kernel may use frag.x[i] elementwise only (a scale, a conversion), as
//    on a GPU.
//  - Loads and stores are each lane's own reads and writes of its 8
//    elements, in the kernel's code: the race check sees them like any
//    other access.
//  - mma_sync: D[m][n] = C[m][n] + sum over k = 0..15 of A[m][k] * B[k][n],
//    products exact in float (FP16 x FP16 and BF16 x BF16 are), summed in
//    float in k order onto C. A GPU's Tensor Cores add in an unspecified
//    order: results agree to float rounding, not bit for bit.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDASIM_WMMA_H
#define AMPC_RUNTIME_CUDASIM_WMMA_H

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

namespace detail {
template <typename T> inline float toFloat(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return static_cast<float>(v);
}
template <typename T> inline T fromFloat(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return static_cast<T>(v);
}
constexpr int kPerLane = 8; // 256 elements over 32 lanes
/// The row and column of element i of this lane's share.
inline int rowOf(int i) { return (::ampc::sim::current->lane * kPerLane + i) / 16; }
inline int colOf(int i) { return (::ampc::sim::current->lane * kPerLane + i) % 16; }
/// Waits for the whole warp at one wmma call (nothing is exchanged).
inline void converge(const char *op, ::ampc::sim::CallSite site) {
  char none = 0, all[32];
  ::ampc::sim::warpGather(&none, 1, all, op, site);
}
} // namespace detail

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16,
                "cuda-sim: wmma supports the 16x16x16 shape only");
  static_assert(!std::is_same_v<Use, accumulator> || std::is_same_v<T, float>,
                "cuda-sim: wmma accumulators are float");
  static_assert(std::is_same_v<Use, accumulator> ||
                    std::is_same_v<T, __half> ||
                    std::is_same_v<T, __nv_bfloat16>,
                "cuda-sim: wmma matrix_a/matrix_b are __half or __nv_bfloat16");

public:
  static constexpr int num_elements = detail::kPerLane;
  T x[num_elements];
};

template <typename Use, int M, int N, int K, typename T, typename L>
inline void fill_fragment(fragment<Use, M, N, K, T, L> &f, const T &value) {
  for (int i = 0; i < f.num_elements; ++i)
    f.x[i] = value;
}

/// matrix_a (A[m][k]) or matrix_b (B[k][n]) from memory: row_major reads
/// element (r, c) at p[r * ldm + c], col_major at p[c * ldm + r].
template <typename Use, typename T, typename L>
inline void load_matrix_sync(fragment<Use, 16, 16, 16, T, L> &f, const T *p,
                             unsigned ldm, AMPC_SIM_CALL_SITE) {
  static_assert(std::is_same_v<L, row_major> || std::is_same_v<L, col_major>,
                "cuda-sim: a matrix fragment has a row_major or col_major layout");
  detail::converge("wmma::load_matrix_sync", AMPC_SIM_CALLER);
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = detail::rowOf(i), c = detail::colOf(i);
    f.x[i] = std::is_same_v<L, row_major> ? p[r * ldm + c] : p[c * ldm + r];
  }
}

/// An accumulator from memory, in the layout given.
inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ldm, layout_t layout,
                             AMPC_SIM_CALL_SITE) {
  detail::converge("wmma::load_matrix_sync", AMPC_SIM_CALLER);
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = detail::rowOf(i), c = detail::colOf(i);
    f.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout,
                              AMPC_SIM_CALL_SITE) {
  detail::converge("wmma::store_matrix_sync", AMPC_SIM_CALLER);
  for (int i = 0; i < f.num_elements; ++i) {
    const int r = detail::rowOf(i), c = detail::colOf(i);
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[i];
  }
}

/// d = a * b + c (d may be c).
template <typename T, typename LA, typename LB>
inline void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
                     const fragment<matrix_a, 16, 16, 16, T, LA> &a,
                     const fragment<matrix_b, 16, 16, 16, T, LB> &b,
                     const fragment<accumulator, 16, 16, 16, float> &c,
                     AMPC_SIM_CALL_SITE) {
  struct Share {
    T a[detail::kPerLane], b[detail::kPerLane];
  } mine, all[32];
  for (int i = 0; i < detail::kPerLane; ++i) {
    mine.a[i] = a.x[i];
    mine.b[i] = b.x[i];
  }
  ::ampc::sim::warpGather(&mine, sizeof mine, all, "wmma::mma_sync",
                          AMPC_SIM_CALLER);
  // Element e of a matrix is x[e % 8] of lane e / 8.
  auto elementA = [&](int m, int k) {
    const int e = m * 16 + k;
    return detail::toFloat(all[e / detail::kPerLane].a[e % detail::kPerLane]);
  };
  auto elementB = [&](int k, int n) {
    const int e = k * 16 + n;
    return detail::toFloat(all[e / detail::kPerLane].b[e % detail::kPerLane]);
  };
  float out[detail::kPerLane];
  for (int i = 0; i < detail::kPerLane; ++i) {
    const int m = detail::rowOf(i), n = detail::colOf(i);
    float sum = c.x[i];
    for (int k = 0; k < 16; ++k)
      sum += elementA(m, k) * elementB(k, n);
    out[i] = sum;
  }
  for (int i = 0; i < detail::kPerLane; ++i)
    d.x[i] = out[i];
}

} // namespace nvcuda::wmma

#endif // AMPC_RUNTIME_CUDASIM_WMMA_H
