//===- TrainMath.h - training arithmetic both targets share -----*- C++ -*-===//
//
// The per-element arithmetic of the training ops (AMPCTrainOps.td) and of
// Dropout's masks, written once for the CPU kernels (CpuTrainKernels.h) and
// the CUDA kernels (CudaKernels.cuh): torch.amp.GradScaler and torch.optim
// step for step. Under nvcc every function here is __host__ __device__.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_TRAINMATH_H
#define AMPC_RUNTIME_TRAINMATH_H

#include "ampc/Kernels/Common/KernelMath.h"

#include <cmath>
#include <cstdint>

namespace ampc {

/// One low-precision weight copy the step keeps: parameter index, byte
/// offsets in the state of the FP32 master weights and of the copy, element
/// count, whether the copy is bf16 (else f16), and for a channels-last copy
/// (a convolution weight (M, C, k...) kept as (M, k..., C)) C and the
/// product of k..., else 0 and 0.
struct WeightCopy {
  int32_t parameter;
  uint64_t source, copy;
  int64_t count;
  bool bf16;
  int64_t channels, spatial;
};

namespace math {

/// Where master element i lies in a weight copy: at i, or in a
/// channels-last copy (`channels` C > 0) of a master (M, C, S) at its place
/// in (M, S, C).
AMPC_HD inline int64_t weightCopyIndex(int64_t i, int64_t channels,
                                       int64_t spatial) {
  if (channels == 0)
    return i;
  const int64_t s = i % spatial, c = (i / spatial) % channels,
                m = i / (spatial * channels);
  return (m * spatial + s) * channels + c;
}

/// GradScaler's inverse scale: the reciprocal computed in double and
/// rounded to float, as `_unscale_grads_` does.
AMPC_HD inline float inverseScale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

/// One unscaled gradient element (multiplying by 1 is skipped).
template <typename T> AMPC_HD inline T unscale(T g, float inv) {
  return inv == 1.0f ? g : static_cast<T>(g * static_cast<T>(inv));
}

/// torch.optim.SGD's update of one element (`buffer` null without
/// momentum); `step` counts the steps taken before this one.
template <typename T>
AMPC_HD inline void sgdElement(T param, T grad, const T *buffer, T *newParam,
                               T *newBuffer, T lr, int64_t step, T momentum,
                               T dampening, bool nesterov, T weightDecay) {
  T g = grad;
  if (weightDecay != 0)
    g = g + weightDecay * param;
  if (buffer) {
    const T b = step == 0 ? g : momentum * *buffer + (1 - dampening) * g;
    *newBuffer = b;
    g = nesterov ? g + momentum * b : b;
  }
  *newParam = param - lr * g;
}

/// The per-step constants of Adam/AdamW: the bias corrections of step
/// t = step + 1.
template <typename T> struct AdamStep {
  T stepSize, bc2Sqrt;
};
template <typename T>
AMPC_HD inline AdamStep<T> adamStep(T lr, int64_t step, T beta1, T beta2) {
  const double t = static_cast<double>(step + 1);
  const T bc1 = static_cast<T>(1 - std::pow(static_cast<double>(beta1), t));
  const T bc2 = static_cast<T>(1 - std::pow(static_cast<double>(beta2), t));
  return {lr / bc1, std::sqrt(bc2)};
}

/// torch.optim.Adam / AdamW's update of one element (amsgrad off, maximize
/// off): param -= lr / bc1 · m / (√v / √bc2 + eps).
template <typename T>
AMPC_HD inline void adamElement(T p, T g, T expAvg, T expAvgSq, T *newParam,
                                T *newExpAvg, T *newExpAvgSq, AdamStep<T> s,
                                T lr, T beta1, T beta2, T eps, T weightDecay,
                                bool decoupled) {
  if (decoupled)
    p = p * (1 - lr * weightDecay);
  else if (weightDecay != 0)
    g = g + weightDecay * p;
  // torch's lerp for the first moment: m + (1 - β1)(g - m).
  const T m = expAvg + (1 - beta1) * (g - expAvg);
  const T v = expAvgSq * beta2 + (1 - beta2) * g * g;
  *newExpAvg = m;
  *newExpAvgSq = v;
  const T denom = std::sqrt(v) / s.bc2Sqrt + eps;
  *newParam = p - s.stepSize * (m / denom);
}

/// Whether Dropout keeps element `index`: a counter-based draw (splitmix64
/// of the op's seed, the training step and the index), uniform in [0, 1),
/// compared with `ratio`. The same (seed, step, index) always gives the same
/// answer, so a step's forward, its backward and a gradient check agree.
AMPC_HD inline bool dropoutKeeps(uint64_t seed, uint64_t step, uint64_t index,
                                 double ratio) {
  uint64_t z = seed ^ (step * 0x9E3779B97F4A7C15ULL) ^
               (index * 0xD1B54A32D192ED03ULL);
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 >= ratio;
}

/// Dropout on a fused attention's probabilities (ampc.attention, issue
/// 38): the mask of P[b, h, i, j] is the one an unfused Dropout with the
/// same seed draws on the [B, H, Sq, Sk] probabilities, at the element's
/// flat index ((b·H + h)·Sq + i)·Sk + j; kept values are scaled by
/// 1 / (1 - ratio). ratio 0: no dropout (every factor 1).
struct AttentionDropout {
  double ratio = 0;
  uint64_t seed = 0, step = 0;
  /// Whether P of row `i` and key `j` of head `bh` (= b·H + h), of `sq`
  /// queries and `sk` keys, is kept.
  AMPC_HD bool keeps(int64_t bh, int64_t i, int64_t j, int64_t sq,
                     int64_t sk) const {
    return ratio == 0 ||
           dropoutKeeps(seed, step,
                        static_cast<uint64_t>((bh * sq + i) * sk + j), ratio);
  }
  /// What a kept value is multiplied by, in `C` (the reciprocal computed
  /// in double, as Dropout's kernels compute it).
  template <typename C> AMPC_HD C keptScale() const {
    return ratio == 0 ? C(1) : static_cast<C>(1.0 / (1.0 - ratio));
  }
  /// The factor on that P: keptScale() where kept, else 0.
  template <typename C>
  AMPC_HD C factor(int64_t bh, int64_t i, int64_t j, int64_t sq,
                   int64_t sk) const {
    return keeps(bh, i, j, sq, sk) ? keptScale<C>() : C(0);
  }
};

/// `_amp_update_scale_` with optional bounds (0: none).
AMPC_HD inline void updateScale(float scale, int32_t tracker, bool foundInf,
                                float growthFactor, float backoffFactor,
                                int64_t growthInterval, float minScale,
                                float maxScale, float *newScale,
                                int32_t *newTracker) {
  if (foundInf) {
    float s = scale * backoffFactor;
    if (minScale > 0 && s < minScale)
      s = minScale;
    *newScale = s;
    *newTracker = 0;
    return;
  }
  const int32_t t = tracker + 1;
  // `>=`, not torch's `==`: a tracker past the interval (set by hand)
  // grows the scale once and resets, rather than counting on to overflow.
  if (t >= growthInterval) {
    const float grown = scale * growthFactor;
    float s = std::isfinite(grown) ? grown : scale;
    if (maxScale > 0 && s > maxScale)
      s = scale > maxScale ? scale : maxScale;
    *newScale = s;
    *newTracker = 0;
  } else {
    *newScale = scale;
    *newTracker = t;
  }
}

} // namespace math
} // namespace ampc

#endif // AMPC_RUNTIME_TRAINMATH_H
