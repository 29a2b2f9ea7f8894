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

#include "ampc/Kernels/Common/Float16.h"
#include "ampc/Kernels/Common/TrainMath.h"
#include "ampc/Kernels/Cpu/ThreadPool.h"
#include "ampc/Runtime/ModelAbi.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace ampc::cpu {

using math::dropoutKeeps;
using math::inverseScale;
using math::updateScale;

/// Unscales `count` gradient elements into `out` and reports whether any
/// was not finite (`_amp_foreach_non_finite_check_and_unscale_`: the check
/// reads the scaled value). The gradient is read through codec `In`: its
/// own type T, or f16/bf16 widened exactly to T (a folded cast); with
/// `channels` > 0 it is stored channels-last under the result's layout
/// (math::weightCopyIndex: ampc.unscale's `channels_last`).
template <typename In, typename T>
bool unscale(const typename In::Storage *grad, T *out, int64_t count,
             float inv, int64_t channels = 0, int64_t spatial = 0) {
  std::atomic<bool> found{false};
  parallelFor(0, count, grainFor(2), [&](int64_t b, int64_t e) {
    bool any = false;
    for (int64_t i = b; i < e; ++i) {
      const T g = static_cast<T>(
          In::load(grad[math::weightCopyIndex(i, channels, spatial)]));
      any |= !std::isfinite(g);
      out[i] = math::unscale(g, inv);
    }
    if (any)
      found.store(true, std::memory_order_relaxed);
  });
  return found.load();
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
  parallelFor(0, count, grainFor(4), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      math::sgdElement(param[i], grad[i], buffer ? buffer + i : nullptr,
                       newParam + i, newBuffer ? newBuffer + i : nullptr, lr,
                       step, momentum, dampening, nesterov, weightDecay);
  });
}

/// torch.optim.Adam / AdamW's step for one parameter.
template <typename T>
void adamStep(const T *param, const T *grad, const T *expAvg,
              const T *expAvgSq, T *newParam, T *newExpAvg, T *newExpAvgSq,
              int64_t count, T lr, int64_t step, T beta1, T beta2, T eps,
              T weightDecay, bool decoupled) {
  const math::AdamStep<T> s = math::adamStep(lr, step, beta1, beta2);
  parallelFor(0, count, grainFor(8), [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i)
      math::adamElement(param[i], grad[i], expAvg[i], expAvgSq[i],
                        newParam + i, newExpAvg + i, newExpAvgSq + i, s, lr,
                        beta1, beta2, eps, weightDecay, decoupled);
  });
}

/// Recomputes the low-precision weight copies of `parameter` (all when
/// negative) from the FP32 master weights.
inline void refreshCopies(unsigned char *state, const WeightCopy *copies,
                          int32_t count, int32_t parameter) {
  for (int32_t c = 0; c < count; ++c) {
    const WeightCopy &w = copies[c];
    if (parameter >= 0 && parameter != w.parameter)
      continue;
    const float *src = reinterpret_cast<const float *>(state + w.source);
    uint16_t *dst = reinterpret_cast<uint16_t *>(state + w.copy);
    parallelFor(0, w.count, grainFor(2), [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        dst[math::weightCopyIndex(i, w.channels, w.spatial)] =
            w.bf16 ? numeric::f32ToBf16Bits(src[i])
                   : numeric::f32ToF16Bits(src[i]);
    });
  }
}

/// Data parallel (ampc.all_reduce_start/wait): stores the communicator of
/// `config` (NULL for a host that predates it) at `slot` of the state.
inline void setCommunicator(unsigned char *slot,
                            const ampc_abi_config *config) {
  const ampc_abi_comm *comm = nullptr;
  if (config->struct_size >=
      offsetof(ampc_abi_config, comm) + sizeof(config->comm))
    comm = config->comm;
  std::memcpy(slot, &comm, sizeof(comm));
}

/// The communicator at `slot` when the step runs on several ranks; null
/// when it runs alone.
inline const ampc_abi_comm *ranks(const unsigned char *slot) {
  const ampc_abi_comm *comm;
  std::memcpy(&comm, slot, sizeof(comm));
  return comm && comm->size > 1 ? comm : nullptr;
}

/// `count` gradient elements divided by the world size (times `inv`, in
/// T) into `packed`, rounded to its codec `Out`.
template <typename In, typename Out, typename T>
void packGradient(const typename In::Storage *grad,
                  typename Out::Storage *packed, int64_t count, T inv) {
  for (int64_t i = 0; i < count; ++i)
    packed[i] = Out::store(static_cast<T>(In::load(grad[i])) * inv);
}

/// `count` summed elements of `packed` into a gradient's type.
template <typename In, typename Out>
void unpackGradient(const typename In::Storage *packed,
                    typename Out::Storage *mean, int64_t count) {
  for (int64_t i = 0; i < count; ++i)
    mean[i] = Out::store(In::load(packed[i]));
}

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUTRAINKERNELS_H
