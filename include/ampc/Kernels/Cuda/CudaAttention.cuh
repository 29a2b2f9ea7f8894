//===- CudaAttention.cuh - fused attention's CUDA kernels (issue 38) -*- C++ -*-===//
//
// Included by CudaKernels.cuh. FlashAttention-2's algorithm on Tensor Cores
// through WMMA (nvcuda::wmma, 16x16x16, FP16/BF16 operands, FP32
// accumulators); under --target=cuda-sim the CUDA execution implements the
// same calls (ampc/CudaSim/Wmma.h). The contract, shared with the
// CPU kernel (the reference), is docs/design.md's "Fused attention (issue
// 38)" and ATTN-SPEC: logical Q [B,H,Sq,D], K [B,H,Sk,D], V [B,H,Sk,D],
// O [B,H,Sq,D], LSE [B,H,Sq] fp32 contiguous; every operand addressed by
// its four logical strides (any permutation), an optional fp32 additive
// bias by its four (0 where it broadcasts); causal: key j is visible to
// query i iff j <= i.
//
// Three kernels per step:
//  - attentionForward: a block per (tile of kRows queries, batch x head);
//    the Q tile stays in shared memory; for each tile of kKeys keys (the
//    tiles a causal row cannot see are skipped) S = Q Kᵀ on WMMA into
//    shared fp32, the online softmax per row (a warp per row: running max
//    and sum in fp32, the output accumulator rescaled), P rounded to T
//    (0 where dropout drops it), O += P V on WMMA (the accumulator in
//    shared fp32); writes O (T, times 1/(1-p) with dropout) and LSE (fp32)
//    only.
//  - attentionPrepass: D = rowsum(dO ∘ O) in fp32, a warp per row.
//  - attentionBackward: ONE launch, deterministic (no atomics): blocks
//    [0, nQ) own a tile of queries and compute dQ over the key tiles;
//    blocks [nQ, nQ + nK) own a tile of keys and compute dK, dV over the
//    query tiles; both recompute P = exp(s - LSE), and dropout's mask
//    from its counter (FlashAttention-2's backward with dropout).
// Head dimension D (= Dv) a multiple of 16: 16..256 forward, 16..128
// backward (cudaAttentionSupported, KernelGeometry.h). T is __half or
// __nv_bfloat16 (sm_80+ for bf16 WMMA); f32 is not supported here.
// Shared memory is static (AMPC_SHARED), at most 48 KiB per block: the
// tiles per head dimension are AttentionTiles below (and
// cudaAttentionGeometry in KernelGeometry.h, which must agree; a unit test
// checks it).
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CUDAATTENTION_CUH
#define AMPC_RUNTIME_CUDAATTENTION_CUH

#if !defined(AMPC_CUDA_SIM)
#include <mma.h>
#endif
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "ampc/Kernels/Common/TrainMath.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace ampc::cuda::attention {

namespace wmma = ::nvcuda::wmma;

/// The four logical strides (in elements) of a [B, H, S, D] operand, or of
/// the bias [B, H, Sq, Sk] (0 where it broadcasts).
struct Strides {
  int64_t b = 0, h = 0, s = 0, d = 0;
};
/// Row-major strides of a contiguous [B, H, S, D] tensor.
inline Strides contiguous(int64_t h, int64_t s, int64_t d) {
  return Strides{h * s * d, s * d, d, 1};
}

/// What every attention kernel takes besides its buffers. Dropout on P
/// (`dropout` > 0): the masks of ampc::math::AttentionDropout with `seed`
/// and the training step at `step` (device memory; null: step 0), drawn
/// again per tile where the kernels need them: no mask is stored.
struct Shape {
  int batch = 0, heads = 0, queries = 0, keys = 0;
  float scale = 1.0f;
  bool causal = false;
  double dropout = 0.0;
  uint64_t seed = 0;
  const int64_t *step = nullptr;
};

/// The shape's dropout, its step read.
__device__ inline math::AttentionDropout dropoutOf(const Shape &p) {
  return {p.dropout, p.seed,
          p.dropout > 0 && p.step ? static_cast<uint64_t>(*p.step) : 0};
}

/// Warps per block (every kernel) and the tiles per head dimension.
constexpr int kWarps = 4;
constexpr int kAttentionThreads = kWarps * 32;
struct AttentionTiles {
  /// Forward: queries per block and keys per step.
  static constexpr int forward(int d) { return d <= 128 ? 32 : 16; }
  /// Backward: queries per dQ block step and keys per dK/dV block step.
  static constexpr int backward(int d) { return d <= 64 ? 32 : 16; }
};

__device__ inline float toFloat(__half v) { return __half2float(v); }
__device__ inline float toFloat(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ inline T fromFloat(float v);
template <> __device__ inline __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}
template <> __device__ inline __nv_bfloat16 fromFloat<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

__device__ inline float warpMax(float v) {
  for (int o = 16; o > 0; o /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
  return v;
}
__device__ inline float warpSum(float v) {
  for (int o = 16; o > 0; o /= 2)
    v += __shfl_xor_sync(0xFFFFFFFFu, v, o);
  return v;
}

/// C[M][N] (fp32, row-major, ldc) = (Accumulate ? C : 0) + A[M][K] B[K][N]
/// over the block's warps, a 16x16 output tile per warp at a time. A is
/// row-major (A[m][k] at a[m * lda + k]) or col_major (at a[k * lda + m]),
/// B row-major (B[k][n] at b[k * ldb + n]) or col_major (at b[n * ldb + k]).
/// M, N, K multiples of 16. Every warp calls it (the callers' barriers
/// order its shared reads and writes).
template <bool Accumulate, typename LA, typename LB, typename T>
__device__ inline void blockMma(float *c, int ldc, const T *a, int lda,
                                const T *b, int ldb, int m, int n, int k) {
  const int warp = threadIdx.x / 32, tilesN = n / 16;
  for (int tile = warp; tile < (m / 16) * tilesN; tile += kWarps) {
    const int tm = tile / tilesN, tn = tile % tilesN;
    float *out = c + tm * 16 * ldc + tn * 16;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
    if (Accumulate)
      wmma::load_matrix_sync(acc, out, ldc, wmma::mem_row_major);
    else
      wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < k; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
      wmma::load_matrix_sync(fa,
                             std::is_same<LA, wmma::row_major>::value
                                 ? a + tm * 16 * lda + kk
                                 : a + kk * lda + tm * 16,
                             lda);
      wmma::load_matrix_sync(fb,
                             std::is_same<LB, wmma::row_major>::value
                                 ? b + kk * ldb + tn * 16
                                 : b + tn * 16 * ldb + kk,
                             ldb);
      wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(out, acc, ldc, wmma::mem_row_major);
  }
}

/// Copies rows [first, first + rows) of one (batch, head) of a [.., S, D]
/// operand into a [rows][D] shared tile, zeros past `count`.
template <int D, typename T>
__device__ inline void loadTile(T *tile, const T *base, const Strides &st,
                                int first, int rows, int count) {
  for (int e = threadIdx.x; e < rows * D; e += blockDim.x) {
    const int r = e / D, c = e % D, s = first + r;
    tile[e] = s < count ? base[s * st.s + c * st.d] : fromFloat<T>(0.0f);
  }
}

/// The score s_ij of one (query i, key j) from the raw q.k (fp32): scaled,
/// biased, -inf where the key is not visible (past Sk or the causal limit)
/// or the query row is padding.
__device__ inline float score(float qk, int i, int j, const Shape &p,
                              const float *bias, const Strides &bs) {
  if (j >= p.keys || i >= p.queries || (p.causal && j > i))
    return -INFINITY;
  float s = p.scale * qk;
  if (bias)
    s += bias[i * bs.s + j * bs.d];
  return s;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <typename T, int D> struct ForwardShared {
  static constexpr int kRows = AttentionTiles::forward(D);
  static constexpr int kKeys = kRows;
  alignas(128) T q[kRows * D];
  alignas(128) T k[kKeys * D];
  alignas(128) T v[kKeys * D];
  alignas(128) float s[kRows * kKeys];
  alignas(128) T p[kRows * kKeys];
  alignas(128) float o[kRows * D];
  float m[kRows], l[kRows];
};

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionForward(const T *q, const T *k, const T *v, const float *bias,
                     T *o, float *lse, Shape p, Strides qs, Strides ks,
                     Strides vs, Strides bs, Strides os) {
  using Sh = ForwardShared<T, D>;
  constexpr int R = Sh::kRows, C = Sh::kKeys;
  AMPC_SHARED(Sh, sm);
  const int q0 = blockIdx.x * R, b = blockIdx.y / p.heads,
            h = blockIdx.y % p.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const math::AttentionDropout dropout = dropoutOf(p);
  q += b * qs.b + h * qs.h;
  k += b * ks.b + h * ks.h;
  v += b * vs.b + h * vs.h;
  o += b * os.b + h * os.h;
  if (bias)
    bias += b * bs.b + h * bs.h;
  loadTile<D>(sm.q, q, qs, q0, R, p.queries);
  for (int e = threadIdx.x; e < R * D; e += blockDim.x)
    sm.o[e] = 0.0f;
  for (int r = threadIdx.x; r < R; r += blockDim.x) {
    sm.m[r] = -INFINITY;
    sm.l[r] = 0.0f;
  }
  // A causal block sees keys below its last query only.
  const int keyEnd = p.causal && q0 + R < p.keys ? q0 + R : p.keys;
  for (int k0 = 0; k0 < keyEnd; k0 += C) {
    __syncthreads(); // the last step's readers of k, v, p are done
    loadTile<D>(sm.k, k, ks, k0, C, p.keys);
    loadTile<D>(sm.v, v, vs, k0, C, p.keys);
    __syncthreads();
    blockMma<false, wmma::row_major, wmma::col_major>(sm.s, C, sm.q, D, sm.k,
                                                      D, R, C, D);
    __syncthreads();
    // The online softmax: a warp per row, a lane per key.
    for (int r = warp; r < R; r += kWarps) {
      const int i = q0 + r;
      float s = -INFINITY;
      if (lane < C)
        s = score(sm.s[r * C + lane], i, k0 + lane, p, bias, bs);
      const float mOld = sm.m[r];
      const float mNew = fmaxf(mOld, warpMax(s));
      // mOld = -inf: nothing summed yet (and mNew - mOld would be NaN).
      const float alpha = mOld == -INFINITY ? 0.0f : expf(mOld - mNew);
      const float e = s == -INFINITY ? 0.0f : expf(s - mNew);
      const float lNew = alpha * sm.l[r] + warpSum(e);
      // A dropped key still counts in l (the mask is on the normalised P).
      if (lane < C)
        sm.p[r * C + lane] = fromFloat<T>(
            dropout.keeps(blockIdx.y, i, k0 + lane, p.queries, p.keys) ? e
                                                                      : 0.0f);
      for (int c = lane; c < D; c += 32)
        sm.o[r * D + c] *= alpha;
      __syncwarp();
      if (lane == 0) {
        sm.m[r] = mNew;
        sm.l[r] = lNew;
      }
    }
    __syncthreads();
    blockMma<true, wmma::row_major, wmma::row_major>(sm.o, D, sm.p, C, sm.v, D,
                                                     R, D, C);
  }
  __syncthreads();
  const float kept = dropout.keptScale<float>();
  for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
    const int r = e / D, c = e % D, i = q0 + r;
    if (i < p.queries)
      o[i * os.s + c * os.d] = fromFloat<T>(sm.o[e] / sm.l[r] * kept);
  }
  for (int r = threadIdx.x; r < R; r += blockDim.x) {
    const int i = q0 + r;
    if (i < p.queries)
      lse[(static_cast<int64_t>(blockIdx.y) * p.queries) + i] =
          sm.m[r] + logf(sm.l[r]);
  }
}

//===----------------------------------------------------------------------===//
// Backward
//===----------------------------------------------------------------------===//

/// D_i = sum_c dO_ic O_ic (fp32) for every row of [B, H, Sq]: a warp per row.
template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads)
    attentionPrepass(const T *dO, const T *o, float *delta, Shape p,
                     Strides dos, Strides os) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.queries;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) // the whole warp
    return;
  const int64_t i = row % p.queries, bh = row / p.queries;
  const int64_t b = bh / p.heads, h = bh % p.heads;
  const T *g = dO + b * dos.b + h * dos.h + i * dos.s;
  const T *x = o + b * os.b + h * os.h + i * os.s;
  float sum = 0.0f;
  for (int c = lane; c < D; c += 32)
    sum += toFloat(g[c * dos.d]) * toFloat(x[c * os.d]);
  sum = warpSum(sum);
  if (lane == 0)
    delta[row] = sum;
}

template <typename T, int D> struct BackwardShared {
  static constexpr int kRows = AttentionTiles::backward(D);
  static constexpr int kKeys = kRows;
  /// A dQ block: its queries, and one key tile at a time.
  struct Queries {
    alignas(128) T q[kRows * D];
    alignas(128) T dO[kRows * D];
    alignas(128) T k[kKeys * D];
    alignas(128) T v[kKeys * D];
    alignas(128) float s[kRows * kKeys];
    alignas(128) float dp[kRows * kKeys];
    alignas(128) T ds[kRows * kKeys];
    alignas(128) float dq[kRows * D];
    float lse[kRows], delta[kRows];
  };
  /// A dK/dV block: its keys, and one query tile at a time.
  struct Keys {
    alignas(128) T k[kKeys * D];
    alignas(128) T v[kKeys * D];
    alignas(128) T q[kRows * D];
    alignas(128) T dO[kRows * D];
    alignas(128) float s[kRows * kKeys];
    alignas(128) float dp[kRows * kKeys];
    alignas(128) T pt[kRows * kKeys];
    alignas(128) T ds[kRows * kKeys];
    alignas(128) float dk[kKeys * D];
    alignas(128) float dv[kKeys * D];
    float lse[kRows], delta[kRows];
  };
  union Both {
    Queries queries;
    Keys keys;
  };
};

/// S = Q Kᵀ and dP = dO Vᵀ for one (query tile, key tile) of head `bh`,
/// then in place: P = exp(s - LSE) (0 where invisible), with Z the
/// dropout's factor (1 without), dS = P (dP Z - D) into ds and
/// round_T(P Z) into pt if given (both rounded to T).
template <typename T, int D, int R, int C>
__device__ inline void recompute(const T *q, const T *dO, const T *k,
                                 const T *v, float *s, float *dp, T *ds, T *pt,
                                 const float *lse, const float *delta, int q0,
                                 int k0, const Shape &p, const float *bias,
                                 const Strides &bs,
                                 const math::AttentionDropout &dropout,
                                 int64_t bh) {
  blockMma<false, wmma::row_major, wmma::col_major>(s, C, q, D, k, D, R, C, D);
  blockMma<false, wmma::row_major, wmma::col_major>(dp, C, dO, D, v, D, R, C,
                                                    D);
  __syncthreads();
  for (int e = threadIdx.x; e < R * C; e += blockDim.x) {
    const int r = e / C, c = e % C;
    const float sv = score(s[e], q0 + r, k0 + c, p, bias, bs);
    const float prob = sv == -INFINITY ? 0.0f : expf(sv - lse[r]);
    const float z =
        dropout.factor<float>(bh, q0 + r, k0 + c, p.queries, p.keys);
    ds[e] = fromFloat<T>(prob * (dp[e] * z - delta[r]));
    if (pt)
      pt[e] = fromFloat<T>(prob * z);
  }
  __syncthreads();
}

/// Loads LSE and D for query rows [q0, q0 + R) of one (batch, head) (LSE
/// +inf and D 0 for padding rows: their P is 0).
template <int R>
__device__ inline void loadRowStats(float *lseTile, float *deltaTile,
                                    const float *lse, const float *delta,
                                    int q0, int queries) {
  for (int r = threadIdx.x; r < R; r += blockDim.x) {
    const int i = q0 + r;
    lseTile[r] = i < queries ? lse[i] : INFINITY;
    deltaTile[r] = i < queries ? delta[i] : 0.0f;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kAttentionThreads) attentionBackward(
    const T *dO, const T *q, const T *k, const T *v, const float *bias,
    const float *lse, const float *delta, T *dq, T *dk, T *dv, Shape p,
    Strides dos, Strides qs, Strides ks, Strides vs, Strides bs, Strides dqs,
    Strides dks, Strides dvs) {
  using Sh = BackwardShared<T, D>;
  constexpr int R = Sh::kRows, C = Sh::kKeys;
  AMPC_SHARED(typename Sh::Both, both);
  const int b = blockIdx.y / p.heads, h = blockIdx.y % p.heads;
  const int nQ = (p.queries + R - 1) / R;
  const math::AttentionDropout dropout = dropoutOf(p);
  dO += b * dos.b + h * dos.h;
  q += b * qs.b + h * qs.h;
  k += b * ks.b + h * ks.h;
  v += b * vs.b + h * vs.h;
  if (bias)
    bias += b * bs.b + h * bs.h;
  lse += static_cast<int64_t>(blockIdx.y) * p.queries;
  delta += static_cast<int64_t>(blockIdx.y) * p.queries;
  if (static_cast<int>(blockIdx.x) < nQ) {
    // dQ_i = scale * sum_j round_T(dS_ij) k_j over the visible key tiles.
    typename Sh::Queries &sm = both.queries;
    const int q0 = blockIdx.x * R;
    loadTile<D>(sm.q, q, qs, q0, R, p.queries);
    loadTile<D>(sm.dO, dO, dos, q0, R, p.queries);
    loadRowStats<R>(sm.lse, sm.delta, lse, delta, q0, p.queries);
    for (int e = threadIdx.x; e < R * D; e += blockDim.x)
      sm.dq[e] = 0.0f;
    const int keyEnd = p.causal && q0 + R < p.keys ? q0 + R : p.keys;
    for (int k0 = 0; k0 < keyEnd; k0 += C) {
      __syncthreads();
      loadTile<D>(sm.k, k, ks, k0, C, p.keys);
      loadTile<D>(sm.v, v, vs, k0, C, p.keys);
      __syncthreads();
      recompute<T, D, R, C>(sm.q, sm.dO, sm.k, sm.v, sm.s, sm.dp, sm.ds,
                            static_cast<T *>(nullptr), sm.lse, sm.delta, q0,
                            k0, p, bias, bs, dropout, blockIdx.y);
      blockMma<true, wmma::row_major, wmma::row_major>(sm.dq, D, sm.ds, C,
                                                       sm.k, D, R, D, C);
    }
    __syncthreads();
    dq += b * dqs.b + h * dqs.h;
    for (int e = threadIdx.x; e < R * D; e += blockDim.x) {
      const int r = e / D, c = e % D, i = q0 + r;
      if (i < p.queries)
        dq[i * dqs.s + c * dqs.d] = fromFloat<T>(p.scale * sm.dq[e]);
    }
    return;
  }
  // dV_j = sum_i round_T(P_ij Z_ij) dO_i (Z: dropout's factor),
  // dK_j = scale * sum_i round_T(dS_ij) q_i
  // over the query tiles that see key tile j.
  typename Sh::Keys &sm = both.keys;
  const int k0 = (blockIdx.x - nQ) * C;
  loadTile<D>(sm.k, k, ks, k0, C, p.keys);
  loadTile<D>(sm.v, v, vs, k0, C, p.keys);
  for (int e = threadIdx.x; e < C * D; e += blockDim.x)
    sm.dk[e] = sm.dv[e] = 0.0f;
  const int queryBegin = p.causal ? k0 / R * R : 0;
  for (int q0 = queryBegin; q0 < p.queries; q0 += R) {
    __syncthreads();
    loadTile<D>(sm.q, q, qs, q0, R, p.queries);
    loadTile<D>(sm.dO, dO, dos, q0, R, p.queries);
    loadRowStats<R>(sm.lse, sm.delta, lse, delta, q0, p.queries);
    __syncthreads();
    recompute<T, D, R, C>(sm.q, sm.dO, sm.k, sm.v, sm.s, sm.dp, sm.ds, sm.pt,
                          sm.lse, sm.delta, q0, k0, p, bias, bs, dropout,
                          blockIdx.y);
    // Pᵀ and dSᵀ: the [R][C] tiles read column-major as [C][R].
    blockMma<true, wmma::col_major, wmma::row_major>(sm.dv, D, sm.pt, C,
                                                     sm.dO, D, C, D, R);
    blockMma<true, wmma::col_major, wmma::row_major>(sm.dk, D, sm.ds, C, sm.q,
                                                     D, C, D, R);
  }
  __syncthreads();
  dk += b * dks.b + h * dks.h;
  dv += b * dvs.b + h * dvs.h;
  for (int e = threadIdx.x; e < C * D; e += blockDim.x) {
    const int r = e / D, c = e % D, j = k0 + r;
    if (j < p.keys) {
      dk[j * dks.s + c * dks.d] = fromFloat<T>(p.scale * sm.dk[e]);
      dv[j * dvs.s + c * dvs.d] = fromFloat<T>(sm.dv[e]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Host side: one call per kernel
//===----------------------------------------------------------------------===//

inline unsigned tilesOf(int n, int tile) {
  return static_cast<unsigned>(n < 1 ? 1 : (n + tile - 1) / tile);
}

/// O and LSE ([B, H, Sq] fp32, contiguous) from Q, K, V (and the bias, or
/// null). Returns the launch's error (cudaGetLastError).
template <typename T, int D>
inline cudaError_t forward(const T *q, Strides qs, const T *k, Strides ks,
                           const T *v, Strides vs, const float *bias,
                           Strides bs, T *o, Strides os, float *lse,
                           const Shape &p, cudaStream_t stream) {
  static_assert(D % 16 == 0 && D >= 16 && D <= 256,
                "attention: head dimension a multiple of 16 in 16..256");
  const dim3 grid(tilesOf(p.queries, ForwardShared<T, D>::kRows),
                  static_cast<unsigned>(p.batch * p.heads));
  launch("attentionForward", attentionForward<T, D>, grid, kAttentionThreads,
         0, stream, q, k, v, bias, o, lse, p, qs, ks, vs, bs, os);
  return cudaGetLastError();
}

/// delta[B, H, Sq] (fp32 scratch) = rowsum(dO ∘ O).
template <typename T, int D>
inline cudaError_t prepass(const T *dO, Strides dos, const T *o, Strides os,
                           float *delta, const Shape &p, cudaStream_t stream) {
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads * p.queries;
  launch("attentionPrepass", attentionPrepass<T, D>,
         static_cast<unsigned>((rows + kWarps - 1) / kWarps),
         kAttentionThreads, 0, stream, dO, o, delta, p, dos, os);
  return cudaGetLastError();
}

/// dQ, dK, dV (T, each with its own strides) in one launch, from dO, Q, K,
/// V, the bias (or null), LSE and delta (prepass).
template <typename T, int D>
inline cudaError_t backward(const T *dO, Strides dos, const T *q, Strides qs,
                            const T *k, Strides ks, const T *v, Strides vs,
                            const float *bias, Strides bs, const float *lse,
                            const float *delta, T *dq, Strides dqs, T *dk,
                            Strides dks, T *dv, Strides dvs, const Shape &p,
                            cudaStream_t stream) {
  static_assert(D % 16 == 0 && D >= 16 && D <= 128,
                "attention backward: head dimension a multiple of 16 in 16..128");
  using Sh = BackwardShared<T, D>;
  const dim3 grid(tilesOf(p.queries, Sh::kRows) + tilesOf(p.keys, Sh::kKeys),
                  static_cast<unsigned>(p.batch * p.heads));
  launch("attentionBackward", attentionBackward<T, D>, grid,
         kAttentionThreads, 0, stream, dO, q, k, v, bias, lse, delta, dq, dk,
         dv, p, dos, qs, ks, vs, bs, dqs, dks, dvs);
  return cudaGetLastError();
}

} // namespace ampc::cuda::attention

#endif // AMPC_RUNTIME_CUDAATTENTION_CUH
