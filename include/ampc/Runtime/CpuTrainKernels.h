//===- CpuTrainKernels.h - CPU kernels of the training ops -----*- C++ -*-===//
//
// The loss scaler, gradient clipping and optimizer updates of
// AMPCTrainOps.td for the CPU target's generated code: torch.amp.GradScaler
// and torch.optim (single-tensor, foreach=False) step for step, in FP32
// (double for f64 models), on FP32 master weights.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_CPUTRAINKERNELS_H
#define AMPC_RUNTIME_CPUTRAINKERNELS_H

#include <cmath>
#include <cstdint>
#include <cstring>

namespace ampc::cpu {

/// GradScaler's inverse scale: the reciprocal computed in double and
/// rounded to float, as `_unscale_grads_` does.
inline float inverseScale(float scale) {
  return static_cast<float>(1.0 / static_cast<double>(scale));
}

/// Unscales `count` gradient elements into `out` and reports whether any
/// was not finite (`_amp_foreach_non_finite_check_and_unscale_`: the check
/// reads the scaled value; multiplying by 1 is skipped).
template <typename T>
bool unscale(const T *grad, T *out, int64_t count, float inv) {
  bool found = false;
  for (int64_t i = 0; i < count; ++i) {
    const T g = grad[i];
    found |= !std::isfinite(g);
    out[i] = inv == 1.0f ? g : static_cast<T>(g * static_cast<T>(inv));
  }
  return found;
}

/// Sum of squares of `count` elements, in T.
template <typename T> T sumOfSquares(const T *data, int64_t count) {
  T sum = 0;
  for (int64_t i = 0; i < count; ++i)
    sum += data[i] * data[i];
  return sum;
}

/// torch.optim.SGD's step for one parameter (`buffer` null without
/// momentum); `step` counts the steps taken before this one.
template <typename T>
void sgdStep(const T *param, const T *grad, const T *buffer, T *newParam,
             T *newBuffer, int64_t count, T lr, int64_t step, T momentum,
             T dampening, bool nesterov, T weightDecay) {
  for (int64_t i = 0; i < count; ++i) {
    T g = grad[i];
    if (weightDecay != 0)
      g = g + weightDecay * param[i];
    if (buffer) {
      const T b = step == 0 ? g : momentum * buffer[i] + (1 - dampening) * g;
      newBuffer[i] = b;
      g = nesterov ? g + momentum * b : b;
    }
    newParam[i] = param[i] - lr * g;
  }
}

/// torch.optim.Adam / AdamW's step for one parameter (amsgrad off,
/// maximize off): the bias corrections of step t = step + 1, and
/// param -= lr / bc1 · m / (√v / √bc2 + eps).
template <typename T>
void adamStep(const T *param, const T *grad, const T *expAvg,
              const T *expAvgSq, T *newParam, T *newExpAvg, T *newExpAvgSq,
              int64_t count, T lr, int64_t step, T beta1, T beta2, T eps,
              T weightDecay, bool decoupled) {
  const double t = static_cast<double>(step + 1);
  const T bc1 = static_cast<T>(1 - std::pow(static_cast<double>(beta1), t));
  const T bc2 = static_cast<T>(1 - std::pow(static_cast<double>(beta2), t));
  const T stepSize = lr / bc1;
  const T bc2Sqrt = std::sqrt(bc2);
  for (int64_t i = 0; i < count; ++i) {
    T p = param[i], g = grad[i];
    if (decoupled)
      p = p * (1 - lr * weightDecay);
    else if (weightDecay != 0)
      g = g + weightDecay * p;
    // torch's lerp for the first moment: m + (1 - β1)(g - m).
    const T m = expAvg[i] + (1 - beta1) * (g - expAvg[i]);
    const T v = expAvgSq[i] * beta2 + (1 - beta2) * g * g;
    newExpAvg[i] = m;
    newExpAvgSq[i] = v;
    const T denom = std::sqrt(v) / bc2Sqrt + eps;
    newParam[i] = p - stepSize * (m / denom);
  }
}

/// Whether Dropout keeps element `index`: a counter-based draw (splitmix64
/// of the op's seed, the training step and the index), uniform in [0, 1),
/// compared with `ratio`. The same (seed, step, index) always gives the same
/// answer, so a step's forward, its backward and a gradient check agree.
inline bool dropoutKeeps(uint64_t seed, uint64_t step, uint64_t index,
                         double ratio) {
  uint64_t z = seed ^ (step * 0x9E3779B97F4A7C15ULL) ^
               (index * 0xD1B54A32D192ED03ULL);
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1.0p-53 >= ratio;
}

/// `_amp_update_scale_` with optional bounds (0: none).
inline void updateScale(float scale, int32_t tracker, bool foundInf,
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
  if (t == growthInterval) {
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

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUTRAINKERNELS_H
