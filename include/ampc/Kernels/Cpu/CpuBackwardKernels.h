//===- CpuBackwardKernels.h - CPU kernels of the backward ops -*- C++ -*-===//
//
// The kernels of the ampc dialect's gradient ops (AMPCGradOps.td) that the
// CPU target's generated code calls; included after CpuKernels.h, whose
// conventions they keep: storage types as there, 16-bit floats loaded to a
// compute type `C` (float, or double for f64 data) with `Load` and rounded
// once when stored with `Store`, sums in `C` (pairwise where a kernel
// reduces a row), convolutions as GEMMs (in float on FP32 copies of 16-bit
// operands, or double). Every kernel writes its whole output: scatters
// (transposed convolution, pooling adjoints, Gather/Slice adjoints) start
// from zeros. A kernel that can meet bad data at run time (a Gather index,
// a loss label) returns false, and the generated `infer` reports the node
// through `fail`. relu_grad and gelu_grad are elementwise and generated
// inline; they have no kernel here.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CPUBACKWARDKERNELS_H
#define AMPC_RUNTIME_CPUBACKWARDKERNELS_H

#include "ampc/Kernels/Cpu/CpuKernels.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

namespace ampc::cpu {

//===----------------------------------------------------------------------===//
// Convolution
//===----------------------------------------------------------------------===//

/// conv_backward_data (the transposed convolution) in T (float on FP32
/// copies of 16-bit operands, or double): grad (n, m, out...) is the
/// adjoint of a Conv's Y, weight (m, c / group, kernel...) its W, and dx
/// (n, c, in...) receives the adjoint of its X:
///
///     dx[b, g·Cg + ci, i] = Σ grad[b, g·Mg + f, o] · weight[g·Mg + f, ci, k]
///       over f < Mg, o, k with i = o·stride − padBegin + k·dilation
///
/// (Cg = c / group, Mg = m / group); input positions no window reads get 0.
/// `w` is the forward Conv's window (w.in: X's spatial dims, w.out: Y's).
/// Per group and chunk of `images` images (conv's), one GEMM (Wᵀ · the
/// chunk's grad side by side, into a (Cg·kernel) x (images · out) column
/// buffer), then col2im adds each column back at the input position it was
/// read from, image by image. Scratch as conv's (`staging`: the chunk's
/// grad).
template <typename T>
void convBackwardData(const T *grad, const T *weight, T *dx, int64_t n,
                      int64_t c, int64_t m, int64_t group, const Window &w,
                      int64_t images, T *columns, T *staging) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  const int64_t cg = c / group, mg = m / group, depth = cg * kernelSize;
  const bool direct = detail::isDirectWindow(w);
  if (!direct)
    parallelFor(0, n * c * inSize, grainFor(1), [&](int64_t b, int64_t e) {
      std::fill(dx + b, dx + e, T(0));
    });
  for (int64_t b = 0; b < n; b += images) {
    const int64_t count = std::min(images, n - b), width = count * outSize;
    for (int64_t g = 0; g < group; ++g) {
      const T *dy =
          detail::gatherImages(grad, b, count, g, m, mg, outSize, staging);
      T *first = dx + (b * c + g * cg) * inSize;
      // (Cg·kernel x Mg) weightᵀ times (Mg x images·out) grad.
      const bool inPlace = direct && count == 1;
      gemm<T>(true, false, depth, width, mg, T(1), weight + g * mg * depth,
              dy, T(0), inPlace ? first : columns);
      if (inPlace)
        continue;
      // One channel of one image per iteration: its own plane of dx.
      parallelFor(0, count * cg, grainFor(kernelSize * outSize),
                  [&](int64_t p0, int64_t p1) {
        for (int64_t p = p0; p < p1; ++p) {
          const int64_t j = p / cg, ci = p % cg;
          const T *cols = columns + j * outSize + ci * kernelSize * width;
          T *plane = first + j * c * inSize + ci * inSize;
          if (direct)
            std::copy(cols, cols + outSize, plane);
          else
            detail::col2im(cols, width, 1, w, plane);
        }
      });
    }
  }
}

/// conv_backward_weight in T (float on FP32 copies of 16-bit operands, or
/// double): x (n, c, in...) is a Conv's X, grad (n, m, out...) the adjoint
/// of its Y, and dw (m, c / group, kernel...) receives the adjoint of its W:
///
///     dw[g·Mg + f, ci, k] = Σ_{b, o} grad[b, g·Mg + f, o] · x[b, g·Cg + ci, i]
///       with i = o·stride − padBegin + k·dilation (0 in the padding)
///
/// `w` is the forward Conv's window. Per image and group: im2col of x, then
/// one GEMM grad_g (Mg x out) · colsᵀ accumulated over the images (beta 1
/// after the first). No images give zeros. Scratch: `columns` as conv's
/// for one image. (One GEMM over a chunk of images, the sum over images
/// inside its reduction, measured no faster: docs/design.md, "CPU
/// convolutions".)
template <typename T>
void convBackwardWeight(const T *x, const T *grad, T *dw, int64_t n,
                        int64_t c, int64_t m, int64_t group, const Window &w,
                        T *columns) {
  const int64_t outSize = w.outSize(), kernelSize = w.kernelSize();
  const int64_t cg = c / group, mg = m / group, depth = cg * kernelSize;
  if (n == 0)
    std::fill(dw, dw + m * depth, T(0));
  const bool direct = detail::isDirectWindow(w);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < group; ++g) {
      const T *cols =
          detail::im2colImages(x, b, 1, g, c, cg, w, direct, columns);
      // (Mg x out) grad times (out x Cg·kernel) colsᵀ.
      gemm<T>(false, true, mg, depth, outSize, T(1),
              grad + (b * m + g * mg) * outSize, cols, b == 0 ? T(0) : T(1),
              dw + g * mg * depth);
    }
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// max_pool_grad over `planes` (batch x channel) planes: dx (planes x
/// w.inSize()) is zero except that each gradient grad[p] (planes x
/// w.outSize() of them) is added, in `C`, at the flat input index
/// indices[p] (MaxPool's Indices: plane · inSize + the spatial offset,
/// row-major or, with `columnMajor` (storage_order 1), column-major with the
/// first spatial dimension fastest). Negative indices (windows wholly in
/// the padding) add nothing; indices past the input, which MaxPool never
/// writes, are skipped. `w` is the forward MaxPool's window. Scratch:
/// `acc`, planes · inSize sums.
template <typename C, typename Load, typename Store, typename G>
void maxPoolGrad(const G *grad, const int64_t *indices, G *dx, int64_t planes,
                 const Window &w, bool columnMajor,
                 C *acc) {
  const int64_t inSize = w.inSize(), outSize = w.outSize();
  const int64_t total = planes * inSize;
  // MaxPool's indices point into their own plane, so that planes can be
  // summed apart; any other indices are summed serially.
  bool ownPlanes = true;
  for (int64_t p = 0; p < planes * outSize && ownPlanes; ++p)
    ownPlanes = indices[p] < 0 || indices[p] / inSize == p / outSize;
  parallelFor(0, ownPlanes ? planes : 1,
              ownPlanes ? grainFor(inSize + outSize) : 1,
              [&](int64_t q0, int64_t q1) {
  if (!ownPlanes)
    q0 = 0, q1 = planes;
  std::fill(acc + q0 * inSize, acc + q1 * inSize, C(0));
  for (int64_t p = q0 * outSize; p < q1 * outSize; ++p) {
    int64_t index = indices[p];
    if (index < 0 || index >= total)
      continue;
    if (columnMajor) {
      // Spatial coordinates, first dimension fastest, re-linearised
      // row-major.
      int64_t rest = index % inSize, offset = 0, coord[8] = {0};
      for (int d = 0; d < w.rank; ++d) {
        coord[d] = rest % w.in[d];
        rest /= w.in[d];
      }
      for (int d = 0; d < w.rank; ++d)
        offset = offset * w.in[d] + coord[d];
      index = index - index % inSize + offset;
    }
    acc[index] += static_cast<C>(Load::load(grad[p]));
  }
  for (int64_t i = q0 * inSize; i < q1 * inSize; ++i)
    dx[i] = Store::store(acc[i]);
  });
}

/// average_pool_grad over `planes` planes: each gradient grad[q, o] is
/// divided by the divisor the forward averagePool used for window o (its
/// positions inside the input, or with `countIncludePad` inside the padded
/// input, never those ceil_mode adds beyond the end padding) and added, in
/// `C`, at every input position of the window; dx (planes x w.inSize()) is
/// 0 where no window reads. `w` is the forward AveragePool's window.
/// Scratch: `offsets` (windowOffsets), `counts` (outSize divisors) and
/// `acc` (planes · inSize sums).
template <typename C, typename Load, typename Store, typename G>
void averagePoolGrad(const G *grad, G *dx, int64_t planes, const Window &w,
                     bool countIncludePad,
                     int64_t *offsets, int64_t *counts, C *acc) {
  const int64_t inSize = w.inSize(), outSize = w.outSize(),
                kernelSize = w.kernelSize();
  windowOffsets(w, false, offsets);
  // The forward's divisor of each window, the same for every plane.
  std::fill(counts, counts + outSize, int64_t(0));
  for (int64_t k = 0; k < kernelSize; ++k)
    for (int64_t p = 0; p < outSize; ++p) {
      const int64_t offset = offsets[k * outSize + p];
      counts[p] += offset >= 0 || (countIncludePad && offset == -1);
    }
  parallelFor(0, planes, grainFor(inSize + outSize * kernelSize),
              [&](int64_t q0, int64_t q1) {
  std::fill(acc + q0 * inSize, acc + q1 * inSize, C(0));
  for (int64_t q = q0; q < q1; ++q) {
    C *plane = acc + q * inSize;
    for (int64_t p = 0; p < outSize; ++p) {
      if (counts[p] == 0)
        continue;
      const C share = static_cast<C>(Load::load(grad[q * outSize + p])) /
                      static_cast<C>(counts[p]);
      for (int64_t k = 0; k < kernelSize; ++k) {
        const int64_t offset = offsets[k * outSize + p];
        if (offset >= 0)
          plane[offset] += share;
      }
    }
  }
  for (int64_t i = q0 * inSize; i < q1 * inSize; ++i)
    dx[i] = Store::store(acc[i]);
  });
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

/// batch_norm_grad's two sums over channel `ch` of (n, channels, inner)
/// data, in `C`, with μ = mean, r = invStdDev, x̂ = (x − μ)·r: Σ grad and
/// Σ grad · x̂, both in one walk of pairwiseSum's tree over the channel's
/// elements in index order (pairwiseSum's arithmetic, leaf by leaf and
/// node by node), a leaf walking the planes without a division per term.
template <typename C, typename Load, typename In>
std::pair<C, C> batchNormGradSums(const In *grad, const In *x, int64_t n,
                                  int64_t channels, int64_t inner, int64_t ch,
                                  C mu, C r) {
  struct Sums {
    C grad, gradHat;
  };
  auto leaf = [&](int64_t b, int64_t e) {
    Sums sums = {0, 0};
    int64_t plane = b / inner, i = b % inner;
    for (int64_t j = b; j < e;) {
      const int64_t base = (plane * channels + ch) * inner,
                    end = std::min(inner, i + (e - j));
      for (; i < end; ++i, ++j) {
        const C g = static_cast<C>(Load::load(grad[base + i]));
        sums.grad += g;
        sums.gradHat +=
            g * ((static_cast<C>(Load::load(x[base + i])) - mu) * r);
      }
      i = 0, ++plane;
    }
    return sums;
  };
  const Sums sums = math::pairwiseTree<Sums>(
      0, n * inner, leaf, [](const Sums &l, const Sums &r) {
        return Sums{l.grad + r.grad, l.gradHat + r.gradHat};
      });
  return {sums.grad, sums.gradHat};
}

/// batch_norm_grad's input adjoint over channel `ch` of (n, channels,
/// inner) data, in `C`, from the sums over the `count` elements the
/// statistics were taken over (the channel's n · inner, or every rank's
/// with --sync-batchnorm):
///
///     dx = scale·r·(grad − sumGrad/count − x̂·sumGradHat/count)   training
///     dx = scale·r·grad                                          inference
template <typename C, typename Load, typename Store, typename In>
void batchNormGradInput(const In *grad, const In *x, In *dx, int64_t n,
                        int64_t channels, int64_t inner, int64_t ch, C scale,
                        C mu, C r, bool training, C sumGrad, C sumGradHat,
                        int64_t count) {
  const C factor = scale * r;
  const C meanGrad = sumGrad / static_cast<C>(count);
  const C meanGradHat = sumGradHat / static_cast<C>(count);
  for (int64_t b = 0; b < n; ++b) {
    const int64_t base = (b * channels + ch) * inner;
    if (!training) {
      for (int64_t i = base; i < base + inner; ++i)
        dx[i] = Store::store(factor * static_cast<C>(Load::load(grad[i])));
      continue;
    }
    for (int64_t i = base; i < base + inner; ++i) {
      const C g = static_cast<C>(Load::load(grad[i]));
      const C hat = (static_cast<C>(Load::load(x[i])) - mu) * r;
      dx[i] = Store::store(factor * (g - meanGrad - hat * meanGradHat));
    }
  }
}

/// batch_norm_grad per channel of (n, channels, inner) data, in `C`, over
/// the m = n · inner elements of a channel, with the statistics the forward
/// saved: μ = mean[c], r = invStdDev[c], x̂ = (x − μ)·r:
///
///     gradBias[c]  = Σ grad                  (pairwise)
///     gradScale[c] = Σ grad · x̂              (pairwise)
///     dx = scale[c]·r·(grad − gradBias[c]/m − x̂·gradScale[c]/m)   training
///     dx = scale[c]·r·grad                                         inference
///
/// `gradScale` and `gradBias` (channels values each, in `C`) may be null
/// when not wanted.
template <typename C, typename Load, typename Store, typename In>
void batchNormGrad(const In *grad, const In *x, In *dx, int64_t n,
                   int64_t channels, int64_t inner, const C *scale,
                   const C *mean, const C *invStdDev, bool training,
                   C *gradScale, C *gradBias) {
  const int64_t count = n * inner;
  parallelFor(0, channels, grainFor(2 * count), [&](int64_t c0, int64_t c1) {
  for (int64_t ch = c0; ch < c1; ++ch) {
    const auto [sumGrad, sumGradHat] = batchNormGradSums<C, Load>(
        grad, x, n, channels, inner, ch, mean[ch], invStdDev[ch]);
    if (gradBias)
      gradBias[ch] = sumGrad;
    if (gradScale)
      gradScale[ch] = sumGradHat;
    batchNormGradInput<C, Load, Store>(grad, x, dx, n, channels, inner, ch,
                                       scale[ch], mean[ch], invStdDev[ch],
                                       training, sumGrad, sumGradHat, count);
  }
  });
}

/// layer_norm_grad over the last `inner` elements of each of `outer` rows,
/// in `C`: with μ = mean[i] and r = invStdDev[i] (the forward's stash,
/// loaded with `loadStash`), x̂ = (x − μ)·r and g = grad · scale[j] (`scale`
/// broadcast to the normalised shape, `inner` values in `C`):
///
///     dx[i, j] = r · (g − Σ_j g / inner − x̂ · Σ_j g·x̂ / inner)
///
/// (sums pairwise). `grad` is loaded with `LoadGrad` (X's codec unless a
/// cast to X's type was folded in: 16-bit dY, widened exactly).
template <typename C, typename Load, typename LoadStash, typename Store,
          typename LoadGrad = Load, typename In, typename Stash>
void layerNormGrad(const typename LoadGrad::Storage *grad, const In *x,
                   const C *scale, const Stash *mean, const Stash *invStdDev,
                   In *dx, int64_t outer, int64_t inner) {
  parallelFor(0, outer, grainFor(2 * inner), [&](int64_t o0, int64_t o1) {
  for (int64_t o = o0; o < o1; ++o) {
    const typename LoadGrad::Storage *dy = grad + o * inner;
    const In *row = x + o * inner;
    const C mu = static_cast<C>(LoadStash::load(mean[o]));
    const C r = static_cast<C>(LoadStash::load(invStdDev[o]));
    auto g = [&](int64_t j) {
      return static_cast<C>(LoadGrad::load(dy[j])) * scale[j];
    };
    auto hat = [&](int64_t j) {
      return (static_cast<C>(Load::load(row[j])) - mu) * r;
    };
    const C meanG = pairwiseSum<C>(0, inner, g) / static_cast<C>(inner);
    const C meanGHat =
        pairwiseSum<C>(0, inner, [&](int64_t j) { return g(j) * hat(j); }) /
        static_cast<C>(inner);
    for (int64_t j = 0; j < inner; ++j)
      dx[o * inner + j] = Store::store(r * (g(j) - meanG - hat(j) * meanGHat));
  }
  });
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

/// nll_loss_grad in `C`: `out` (n, classes, d) is zero except, for each
/// sample s = (b, j) with label t = target[s] that is not `ignoreIndex`
/// (when `hasIgnore`), out[b, t, j] = −f_s where w_s = weight[t] (1 with
/// `weights` null) and
///
///     f_s = w_s · grad[s]       (LossNone: grad holds n · d values)
///           w_s · grad[0]       (LossSum)
///           w_s · grad[0] / W   (LossMean, W = Σ w_s pairwise over the
///                                samples not ignored; all zero if W == 0)
///
/// Returns false, writing nothing, on a label outside [0, classes) that is
/// not ignored.
template <typename C, typename I>
bool nllLossGrad(const C *grad, const I *target, const C *weights, int64_t n,
                 int64_t classes, int64_t d, bool hasIgnore,
                 int64_t ignoreIndex, LossReduction reduction, C *out) {
  const int64_t count = n * d;
  auto ignored = [&](int64_t s) {
    return hasIgnore && static_cast<int64_t>(target[s]) == ignoreIndex;
  };
  for (int64_t s = 0; s < count; ++s) {
    const int64_t label = static_cast<int64_t>(target[s]);
    if (!ignored(s) && (label < 0 || label >= classes))
      return false;
  }
  std::fill(out, out + n * classes * d, C(0));
  auto weightOf = [&](int64_t s) {
    return ignored(s) ? C(0)
                      : weights ? weights[static_cast<int64_t>(target[s])]
                                : C(1);
  };
  C total = 1;
  if (reduction == LossMean) {
    total = pairwiseSum<C>(0, count, weightOf);
    if (total == C(0))
      return true;
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t s = b * d + j;
      if (ignored(s))
        continue;
      const int64_t label = static_cast<int64_t>(target[s]);
      C f = weightOf(s) * grad[reduction == LossNone ? s : 0];
      if (reduction == LossMean)
        f = f / total;
      out[(b * classes + label) * d + j] = -f;
    }
  return true;
}

/// nll_loss_grad with log_prob: `out` (nllLossGrad's result) becomes
/// SoftmaxCrossEntropyLoss's adjoint with respect to the scores, per
/// element math::softmaxLossGrad of the row's gradient at its label
/// (`logp`, n x classes x d, in C).
template <typename C, typename I>
void softmaxLossGrad(C *out, const C *logp, const I *target, int64_t n,
                     int64_t classes, int64_t d, bool hasIgnore,
                     int64_t ignoreIndex) {
  for (int64_t b = 0; b < n; ++b)
    for (int64_t j = 0; j < d; ++j) {
      const int64_t label = static_cast<int64_t>(target[b * d + j]);
      const C atLabel = hasIgnore && label == ignoreIndex
                            ? C(0)
                            : out[(b * classes + label) * d + j];
      for (int64_t c = 0; c < classes; ++c) {
        const int64_t x = (b * classes + c) * d + j;
        out[x] = math::softmaxLossGrad<C>(out[x], atLabel, logp[x]);
      }
    }
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

/// gather_grad, the scatter-add adjoint of gather, in `C`: `out` (outer x
/// axisSize x inner) is zero, then out[a, k, b] += grad[a, j, b] for each of
/// the `count` indices j, k = indices[j] (+ axisSize when negative);
/// repeated indices add up. Returns false, writing nothing, when an index is
/// outside [−axisSize, axisSize).
template <typename C, typename I>
bool gatherGrad(const C *grad, const I *indices, C *out, int64_t outer,
                int64_t axisSize, int64_t count, int64_t inner) {
  for (int64_t i = 0; i < count; ++i) {
    const int64_t k = static_cast<int64_t>(indices[i]);
    if (k < -axisSize || k >= axisSize)
      return false;
  }
  std::fill(out, out + outer * axisSize * inner, C(0));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < count; ++i) {
      int64_t k = static_cast<int64_t>(indices[i]);
      if (k < 0)
        k += axisSize;
      const C *src = grad + (o * count + i) * inner;
      C *dst = out + (o * axisSize + k) * inner;
      for (int64_t b = 0; b < inner; ++b)
        dst[b] += src[b];
    }
  return true;
}

/// slice_grad, for any storage type T (the values are only copied): `out`
/// (`outCount` elements, the Slice's input) is zero except the elements the
/// Slice read, which receive grad (`rank` dimensions `gradDims`, the
/// Slice's result) in order: the element at multi-index idx goes to
/// out[base + Σ_d idx[d]·strides[d]], where `base` and the (possibly
/// negative) `strides` describe the Slice's strided view of its input as
/// the forward Slice is emitted (the first selected element's offset; the
/// input's row-major stride times the step).
template <typename T>
void sliceGrad(const T *grad, T *out, int64_t outCount, int rank,
               const int64_t *gradDims, const int64_t *strides, int64_t base) {
  std::fill(out, out + outCount, T(0));
  const int64_t *views[] = {strides};
  forEach<1>(rank, gradDims, views,
             [&](int64_t g, int64_t at) { out[base + at] = grad[g]; });
}

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// ampc.attention_grad: per (b, h), query rows in order, P recomputed from
/// the log-sum-exp; dK and dV of the head accumulate in the scratch `dkAcc`
/// (sk x d) and `dvAcc` (sk x dv), dQ of a row in `dqAcc` (d), all in `C`
/// and rounded once when stored. No sq x sk matrix is held. With dropout
/// (FlashAttention-2's backward) the forward's mask is drawn again, Z =
/// its factor (keptScale or 0): dV takes round(P·Z), dS = P·(dP·Z - D).
template <typename C, typename T, typename B, typename L>
void attentionGrad(const typename T::Storage *dO, const typename T::Storage *q,
                   const typename T::Storage *k, const typename T::Storage *v,
                   const typename T::Storage *o,
                   const typename L::Storage *lse,
                   const typename B::Storage *bias, typename T::Storage *dq,
                   typename T::Storage *dk, typename T::Storage *dv,
                   const AttentionShape &s, C scale, bool causal,
                   const math::AttentionDropout &dropout, C *dqScratch,
                   C *dkScratch, C *dvScratch) {
  // (batch, head) pairs in parallel, each chunk with its own scratch
  // (detail::chunkScratch): dK and dV sum over one head's query rows only
  // (all pairs in one chunk if K or V were shared between them).
  const bool shared = !s.k[0] || !s.k[1] || !s.v[0] || !s.v[1];
  parallelFor(0, s.batch * s.heads,
              shared ? s.batch * s.heads
                     : grainFor(s.sq * s.sk * (s.d + s.dv)),
              [&](int64_t bh0, int64_t bh1) {
  const bool whole = bh0 == 0 && bh1 == s.batch * s.heads;
  C *dqAcc = detail::chunkScratch(dqScratch, s.d + s.sk * (s.d + s.dv), whole);
  C *dkAcc = whole ? dkScratch : dqAcc + s.d;
  C *dvAcc = whole ? dvScratch : dkAcc + s.sk * s.d;
  for (int64_t bh = bh0; bh < bh1; ++bh) {
    const int64_t b = bh / s.heads, h = bh % s.heads;
    int64_t row = bh * s.sq;
    {
      std::fill(dkAcc, dkAcc + s.sk * s.d, C(0));
      std::fill(dvAcc, dvAcc + s.sk * s.dv, C(0));
      for (int64_t i = 0; i < s.sq; ++i, ++row) {
        const auto *qi = q + b * s.q[0] + h * s.q[1] + i * s.q[2];
        const auto *oi = o + b * s.o[0] + h * s.o[1] + i * s.o[2];
        const auto *gi = dO + b * s.o[0] + h * s.o[1] + i * s.o[2];
        C rowDot = 0;
        for (int64_t c = 0; c < s.dv; ++c)
          rowDot += static_cast<C>(T::load(gi[c * s.o[3]])) *
                    static_cast<C>(T::load(oi[c * s.o[3]]));
        const C logSum = static_cast<C>(L::load(lse[row]));
        std::fill(dqAcc, dqAcc + s.d, C(0));
        const int64_t visible = causal ? std::min(i + 1, s.sk) : s.sk;
        for (int64_t j = 0; j < visible; ++j) {
          const auto *kj = k + b * s.k[0] + h * s.k[1] + j * s.k[2];
          const auto *vj = v + b * s.v[0] + h * s.v[1] + j * s.v[2];
          C x = attentionScore<C, T>(qi, kj, s, scale);
          if (bias)
            x += static_cast<C>(B::load(bias[b * s.bias[0] + h * s.bias[1] +
                                             i * s.bias[2] + j * s.bias[3]]));
          const C p = std::exp(x - logSum);
          C dp = 0;
          for (int64_t c = 0; c < s.dv; ++c)
            dp += static_cast<C>(T::load(gi[c * s.o[3]])) *
                  static_cast<C>(T::load(vj[c * s.v[3]]));
          const C z = dropout.factor<C>(bh, i, j, s.sq, s.sk);
          const C pT = roundTo<C, T>(p * z);
          const C dsT = roundTo<C, T>(p * (dp * z - rowDot));
          for (int64_t c = 0; c < s.dv; ++c)
            dvAcc[j * s.dv + c] += pT * static_cast<C>(T::load(gi[c * s.o[3]]));
          for (int64_t c = 0; c < s.d; ++c) {
            dkAcc[j * s.d + c] += dsT * static_cast<C>(T::load(qi[c * s.q[3]]));
            dqAcc[c] += dsT * static_cast<C>(T::load(kj[c * s.k[3]]));
          }
        }
        auto *dqi = dq + b * s.q[0] + h * s.q[1] + i * s.q[2];
        for (int64_t c = 0; c < s.d; ++c)
          dqi[c * s.q[3]] = T::store(scale * dqAcc[c]);
      }
      for (int64_t j = 0; j < s.sk; ++j) {
        auto *dkj = dk + b * s.k[0] + h * s.k[1] + j * s.k[2];
        auto *dvj = dv + b * s.v[0] + h * s.v[1] + j * s.v[2];
        for (int64_t c = 0; c < s.d; ++c)
          dkj[c * s.k[3]] = T::store(scale * dkAcc[j * s.d + c]);
        for (int64_t c = 0; c < s.dv; ++c)
          dvj[c * s.v[3]] = T::store(dvAcc[j * s.dv + c]);
      }
    }
  }
  });
}

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUBACKWARDKERNELS_H
