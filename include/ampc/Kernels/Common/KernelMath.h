//===- KernelMath.h - numerics the CPU and CUDA kernels share ---*- C++ -*-===//
//
// Summation and statistics written once for the CPU kernels (CpuKernels.h,
// CpuBackwardKernels.h) and the CUDA kernels (CudaKernels.cuh), so the two
// targets add the same terms in the same order. Under nvcc every function
// here is __host__ __device__.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_KERNELMATH_H
#define AMPC_RUNTIME_KERNELMATH_H

#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define AMPC_HD __host__ __device__
#else
#define AMPC_HD
#endif

namespace ampc::math {

/// The sum of term(i) for i in [begin, end) in C, pairwise: a range of more
/// than 64 terms is split at its middle and the halves' sums added, left +
/// right (the error grows with log n, as in a GPU tree reduction, not with
/// n). Written without recursion: device recursion needs a stack that ptxas
/// cannot size and that the 1 KiB default per-thread stack does not hold.
/// The walk keeps, per level, the finished left half's sum and whether it
/// is in the right half; the bounds of a level are recomputed from the root
/// (ranges of 64·2^58 terms would be needed to go deeper than
/// kPairwiseMaxDepth).
constexpr int kPairwiseMaxDepth = 58;
template <typename C, typename Term>
AMPC_HD C pairwiseSum(int64_t begin, int64_t end, const Term &term) {
  auto leaf = [&](int64_t b, int64_t e) {
    C sum = 0;
    for (int64_t i = b; i < e; ++i)
      sum += term(i);
    return sum;
  };
  if (end - begin <= 64)
    return leaf(begin, end);
  C left[kPairwiseMaxDepth];
  uint64_t right = 0; // bit d: the walk is in the right half at depth d
  int depth = 0;
  int64_t b = begin, e = end;
  while (true) {
    while (e - b > 64) { // down the left halves
      right &= ~(uint64_t(1) << depth);
      e = b + (e - b) / 2;
      ++depth;
    }
    C sum = leaf(b, e);
    while (depth > 0 && (right >> (depth - 1) & 1)) { // up from right halves
      --depth;
      sum = left[depth] + sum;
    }
    if (depth == 0)
      return sum;
    // A finished left half: keep its sum, go to its right sibling.
    left[depth - 1] = sum;
    right |= uint64_t(1) << (depth - 1);
    b = begin, e = end;
    for (int d = 0; d < depth; ++d) {
      const int64_t middle = b + (e - b) / 2;
      if (right >> d & 1)
        b = middle;
      else
        e = middle;
    }
  }
}

/// pairwiseSum's tree over [begin, end) with its leaves and its node
/// operation given: leaf(b, e) is the value of the leaf [b, e) (a range of
/// at most 64 terms), called for the leaves from left to right, and each
/// node is combine(left, right) of its halves, as pairwiseSum adds them.
/// `MaxDepth` bounds the tree (ranges of 64·2^MaxDepth terms).
template <typename T, int MaxDepth = kPairwiseMaxDepth, typename Leaf,
          typename Combine>
AMPC_HD T pairwiseTree(int64_t begin, int64_t end, const Leaf &leaf,
                       const Combine &combine) {
  if (end - begin <= 64)
    return leaf(begin, end);
  T left[MaxDepth];
  uint64_t right = 0;
  int depth = 0;
  int64_t b = begin, e = end;
  while (true) {
    while (e - b > 64) {
      right &= ~(uint64_t(1) << depth);
      e = b + (e - b) / 2;
      ++depth;
    }
    T value = leaf(b, e);
    while (depth > 0 && (right >> (depth - 1) & 1)) {
      --depth;
      value = combine(left[depth], value);
    }
    if (depth == 0)
      return value;
    left[depth - 1] = value;
    right |= uint64_t(1) << (depth - 1);
    b = begin, e = end;
    for (int d = 0; d < depth; ++d) {
      const int64_t middle = b + (e - b) / 2;
      if (right >> d & 1)
        b = middle;
      else
        e = middle;
    }
  }
}

/// pairwiseSum's tree with its leaves given: leaf(b, e) is the sum of the
/// leaf [b, e) (a range of at most 64 terms summed in order from 0), called
/// for the leaves from left to right, and the leaves' sums are added as
/// pairwiseSum adds them. With leaf(b, e) = that sequential sum it is
/// pairwiseSum bit for bit; the CUDA target's LayerNorm backward sums each
/// leaf's rows in one row group and the leaves here (issue 37, item 4).
template <typename C, typename Leaf>
AMPC_HD C pairwiseSumOfLeaves(int64_t begin, int64_t end, const Leaf &leaf) {
  return pairwiseTree<C>(begin, end, leaf,
                         [](C left, C right) { return left + right; });
}

/// The number of pairwiseSum's leaves over `count` terms.
AMPC_HD inline int64_t pairwiseLeafCount(int64_t count) {
  int64_t leaves = 0;
  pairwiseSumOfLeaves<int64_t>(0, count, [&](int64_t, int64_t) {
    ++leaves;
    return int64_t(0);
  });
  return leaves;
}

/// The range [b, e) of pairwiseSum's leaf `k` over `count` terms.
AMPC_HD inline void pairwiseLeaf(int64_t count, int64_t k, int64_t &b,
                                 int64_t &e) {
  int64_t index = 0;
  b = e = 0;
  pairwiseSumOfLeaves<int64_t>(0, count, [&](int64_t lb, int64_t le) {
    if (index++ == k)
      b = lb, e = le;
    return int64_t(0);
  });
}

/// The mean and population variance of value(j) for j in [0, count), in C:
/// two pairwise passes (BatchNormalization's batch statistics and
/// LayerNormalization's row statistics).
template <typename C, typename Value>
AMPC_HD void meanAndVariance(int64_t count, const Value &value, C &mean,
                             C &variance) {
  const C n = static_cast<C>(count);
  const C m = pairwiseSum<C>(0, count, value) / n;
  mean = m;
  variance = pairwiseSum<C>(0, count, [&](int64_t j) {
               const C d = value(j) - m;
               return d * d;
             }) /
             n;
}

/// The count, mean and sum of squared deviations from the mean (M2) of a
/// range of terms: BatchNormalization's batch statistics in one pass.
template <typename C> struct Moments {
  int64_t count;
  C mean, m2;
};

/// Chan's parallel formula: the moments of two adjacent ranges together,
/// δ = mean_b − mean_a, mean = mean_a + δ·n_b/n, M2 = M2_a + M2_b +
/// δ²·n_a·n_b/n, each operation rounded as written (both targets use
/// this one function).
template <typename C>
AMPC_HD Moments<C> combineMoments(const Moments<C> &a, const Moments<C> &b) {
  const int64_t count = a.count + b.count;
  const C delta = b.mean - a.mean;
  const C share = static_cast<C>(b.count) / static_cast<C>(count);
  const C spread = delta * delta;
  const C weight = static_cast<C>(a.count) * share;
  const C shift = delta * share;
  return {count, a.mean + shift, (a.m2 + b.m2) + spread * weight};
}

/// The moments of value(j) for j in [b, e), a range of at most 64 terms:
/// the mean from the sum in order, then M2 in order (two passes over
/// terms that stay in registers or cache).
template <typename C, typename Value>
AMPC_HD Moments<C> leafMoments(int64_t b, int64_t e, const Value &value) {
  C sum = 0;
  for (int64_t j = b; j < e; ++j)
    sum += value(j);
  const C mean = sum / static_cast<C>(e - b);
  C m2 = 0;
  for (int64_t j = b; j < e; ++j) {
    const C d = value(j) - mean;
    m2 += d * d;
  }
  return {e - b, mean, m2};
}

/// The moments of value(j) for j in [begin, end) over pairwiseSum's tree:
/// leaves of at most 64 terms (leafMoments), nodes combined left with
/// right (combineMoments). The CUDA kernels compute the tree's nodes in
/// separate threads and blocks and combine them in this order, so the
/// targets agree bit for bit. At most 64·2^32 terms (the walk's stack of
/// left halves stays within the CUDA threads' default 1 KiB for f64).
constexpr int kMomentsMaxDepth = 32;
template <typename C, typename Value>
AMPC_HD Moments<C> pairwiseMoments(int64_t begin, int64_t end,
                                   const Value &value) {
  return pairwiseTree<Moments<C>, kMomentsMaxDepth>(
      begin, end,
      [&](int64_t b, int64_t e) { return leafMoments<C>(b, e, value); },
      [](const Moments<C> &a, const Moments<C> &b) {
        return combineMoments(a, b);
      });
}

/// How ampc.scatter combines an update with the value at its position
/// (its `reduction`): none replaces it; max and min let a NaN win, as
/// numpy's maximum and minimum (ONNX's reference) do.
enum ScatterReduction {
  ScatterNone = 0,
  ScatterAdd = 1,
  ScatterMul = 2,
  ScatterMax = 3,
  ScatterMin = 4
};
template <typename C>
AMPC_HD C scatterCombine(C old, C update, ScatterReduction reduction) {
  switch (reduction) {
  case ScatterAdd:
    return old + update;
  case ScatterMul:
    return old * update;
  case ScatterMax:
  case ScatterMin:
    if (update != update)
      return update;
    if (old != old)
      return old;
    return (reduction == ScatterMax ? update > old : update < old) ? update
                                                                  : old;
  case ScatterNone:
    break;
  }
  return update;
}

/// TopK's order (ampc.top_k): whether element x at position i comes
/// before y at position j. Larger first (smaller with !largest), NaN
/// larger than every number (torch.topk), equal elements by position: a
/// strict total order, so every element has one rank.
template <typename C>
AMPC_HD bool topKBefore(C x, int64_t i, C y, int64_t j, bool largest) {
  const bool xNan = x != x, yNan = y != y;
  if (xNan || yNan)
    return xNan && yNan ? i < j : (largest ? xNan : yNan);
  if (x != y)
    return largest ? x > y : x < y;
  return i < j;
}

/// BatchNormalization's epilogue (ampc-fuse-batch-norm-epilogue), as the
/// ops it replaces compute it: the normalised `value` stored in S's type;
/// plus residual[e] (codec Q) in E, the elementwise compute type, rounded
/// to S's type as ampc.add rounds; then ReLU as ampc.relu (NaN stays NaN,
/// -0 becomes +0). Without residual and ReLU: the value stored.
template <typename E, typename S, typename Q, typename C>
AMPC_HD typename S::Storage
batchNormEpilogue(C value, const typename Q::Storage *residual, int64_t e,
                  bool relu) {
  if (!residual && !relu)
    return S::store(value);
  E v = static_cast<E>(S::load(S::store(value)));
  if (residual)
    v = static_cast<E>(
        S::load(S::store(v + static_cast<E>(Q::load(residual[e])))));
  if (relu && v <= E(0))
    v = E(0);
  return S::store(v);
}

/// SoftmaxCrossEntropyLoss's adjoint with respect to one score
/// (ampc.nll_loss_grad with log_prob): LogSoftmax's adjoint g − exp(logp)·S
/// of the NLL gradient g, where S, the row's sum of g, is the gradient at
/// the row's label `atLabel` (0 when the row is ignored) plus 0: the row's
/// other terms are zeros, so every summation order gives these bits. The
/// operations are the ones the unfused adjoint's fused kernel ran.
template <typename C>
AMPC_HD C softmaxLossGrad(C g, C atLabel, C logp) {
  const C sum = atLabel + C(0);
  const C e = std::exp(logp);
  const C scaled = e * sum;
  return g - scaled;
}

} // namespace ampc::math

#endif // AMPC_RUNTIME_KERNELMATH_H
