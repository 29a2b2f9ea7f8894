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
#include "ampc/Kernels/Cpu/CpuBackwardKernels.h"
#include "ampc/Kernels/Common/TrainMath.h"
#include "ampc/Kernels/Cpu/CpuKernels.h"
#include "ampc/Kernels/Cpu/ThreadPool.h"
#include "ampc/Runtime/ModelAbi.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

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

//===----------------------------------------------------------------------===//
// Synchronised BatchNorm (--sync-batchnorm, ampc.sync_request)
//===----------------------------------------------------------------------===//

/// Every rank's `count` values of T (f32 or f64) into `all`, rank r's at
/// r · count: each rank writes its own in its slot of a zeroed buffer and
/// the buffer is summed over the ranks as request `request`. Every
/// element has one non-zero term and x + 0 is x, so every rank gets every
/// rank's values exactly, whatever order the communicator adds in. False
/// when the communicator fails (its last_error says why).
template <typename T>
bool gatherOverRanks(const ampc_abi_comm *comm, int32_t request,
                     const T *values, int64_t count, std::vector<T> &all) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  all.assign(static_cast<size_t>(comm->size) * count, T(0));
  std::memcpy(all.data() + static_cast<size_t>(comm->rank) * count, values,
              count * sizeof(T));
  const int32_t dtype =
      std::is_same_v<T, double> ? AMPC_DTYPE_F64 : AMPC_DTYPE_F32;
  return comm->start(comm->handle, request, all.data(), all.size(), dtype) ==
             0 &&
         comm->wait(comm->handle, request) == 0;
}

/// The values of ranks [b, e) (leaf(r) each) combined over the tree that
/// halves a range at its middle, left with right: pairwiseSum's tree with
/// one rank per leaf. For 2^k ranks of equal rows it is the top of the
/// tree one process computes over all the rows (a node over more than 64
/// elements splits at its middle), so 2 ranks x B combine as 1 x 2B does.
template <typename T, typename Leaf, typename Combine>
T rankTree(int64_t b, int64_t e, const Leaf &leaf, const Combine &combine) {
  if (e - b == 1)
    return leaf(b);
  const int64_t middle = b + (e - b) / 2;
  return combine(rankTree<T>(b, middle, leaf, combine),
                 rankTree<T>(middle, e, leaf, combine));
}

/// channelStatistics over every rank's rows (each rank n · inner elements
/// a channel): each rank's (mean, M2) per channel gathered
/// (gatherOverRanks, in C) and combined with Chan's formula over
/// rankTree, so every rank normalises with the same bits. False when the
/// communicator fails.
template <typename C, typename Load, typename In>
bool syncChannelStatistics(const ampc_abi_comm *comm, int32_t request,
                           const In *x, int64_t n, int64_t c, int64_t inner,
                           C *mean, C *variance) {
  std::vector<C> mine(2 * c), all;
  channelMoments<C, Load>(x, n, c, inner,
                          [&](int64_t ch, const math::Moments<C> &m) {
                            mine[2 * ch] = m.mean;
                            mine[2 * ch + 1] = m.m2;
                          });
  if (!gatherOverRanks(comm, request, mine.data(), 2 * c, all))
    return false;
  for (int64_t ch = 0; ch < c; ++ch) {
    const math::Moments<C> m = rankTree<math::Moments<C>>(
        0, comm->size,
        [&](int64_t r) {
          const C *p = all.data() + (r * c + ch) * 2;
          return math::Moments<C>{n * inner, p[0], p[1]};
        },
        [](const math::Moments<C> &l, const math::Moments<C> &r) {
          return math::combineMoments(l, r);
        });
    mean[ch] = m.mean;
    variance[ch] = m.m2 / static_cast<C>(m.count);
  }
  return true;
}

/// The running variance's unbiased factor over `count` elements a
/// channel, count / (count - 1) in double rounded to C (1 for one
/// element): BatchNormalizationOp::runningVarianceFactor at run time, for
/// the count of every rank's rows.
template <typename C> C unbiasedFactor(int64_t count) {
  return count > 1 ? static_cast<C>(static_cast<double>(count) /
                                    static_cast<double>(count - 1))
                   : C(1);
}

/// batchNormGrad in training mode over every rank's rows: `gradScale`
/// and `gradBias` are this rank's sums (the parameters' gradients, which
/// the buckets then average), the input adjoint reads the sums over all
/// ranks (gatherOverRanks, added over rankTree) and the count of all
/// ranks' elements, as torch.nn.SyncBatchNorm's backward. False when the
/// communicator fails.
template <typename C, typename Load, typename Store, typename In>
bool syncBatchNormGrad(const ampc_abi_comm *comm, int32_t request,
                       const In *grad, const In *x, In *dx, int64_t n,
                       int64_t channels, int64_t inner, const C *scale,
                       const C *mean, const C *invStdDev, C *gradScale,
                       C *gradBias) {
  std::vector<C> mine(2 * channels), all;
  const int64_t count = n * inner;
  parallelFor(0, channels, grainFor(2 * count), [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      const auto [sumGrad, sumGradHat] = batchNormGradSums<C, Load>(
          grad, x, n, channels, inner, ch, mean[ch], invStdDev[ch]);
      mine[2 * ch] = gradBias[ch] = sumGrad;
      mine[2 * ch + 1] = gradScale[ch] = sumGradHat;
    }
  });
  if (!gatherOverRanks(comm, request, mine.data(), 2 * channels, all))
    return false;
  parallelFor(0, channels, grainFor(count), [&](int64_t c0, int64_t c1) {
    for (int64_t ch = c0; ch < c1; ++ch) {
      auto sum = [&](int64_t which) {
        return rankTree<C>(
            0, comm->size,
            [&](int64_t r) { return all[(r * channels + ch) * 2 + which]; },
            [](C l, C r) { return l + r; });
      };
      batchNormGradInput<C, Load, Store>(grad, x, dx, n, channels, inner, ch,
                                         scale[ch], mean[ch], invStdDev[ch],
                                         /*training=*/true, sum(0), sum(1),
                                         count * comm->size);
    }
  });
  return true;
}

/// ZeRO-1 (--shard-optimizer; docs/design.md, "Sharded optimizer"): the
/// flat concatenation of the gradients (the bucket's order), `total`
/// elements, padded to `shard * ranks`; rank r owns elements [lo, hi) =
/// [r * shard, min((r + 1) * shard, total)) and keeps the optimizer moments
/// of those elements only, `kinds` arrays of `shard` elements of `width`
/// bytes (the step's compute type). `flat` is the communication buffer:
/// the packed gradients reduce-scattered, then the new parameters
/// all-gathered. Alone (no communicator, or one rank) the rank owns all.
struct Shards {
  const ampc_abi_comm *comm = nullptr;
  int64_t total = 0, shard = 0, lo = 0, hi = 0, kinds = 0, width = 0;
  std::vector<unsigned char> moments, flat;
};

/// The requests ZeRO-1 adds after the bucket's (request 0).
enum ShardRequest : int32_t {
  kFoundInfRequest = 1,
  kNormRequest = 2,
  kGatherRequest = 3,
  kStateRequest = 4,
};

inline Shards *shardsAt(const unsigned char *slot) {
  Shards *shards;
  std::memcpy(&shards, slot, sizeof(shards));
  return shards;
}

/// `init`'s part: the rank's shard of `total` elements at `slot`. A
/// communicator of several ranks must have reduce_scatter and all_gather.
inline int32_t createShards(unsigned char *slot, unsigned char *errorSlot,
                            const ampc_abi_config *config, int64_t total,
                            int64_t kinds, int64_t width) {
  const ampc_abi_comm *comm = nullptr;
  if (config->struct_size >=
      offsetof(ampc_abi_config, comm) + sizeof(config->comm))
    comm = config->comm;
  if (comm && comm->size <= 1)
    comm = nullptr;
  if (comm && (comm->struct_size < offsetof(ampc_abi_comm, all_gather) +
                                        sizeof(comm->all_gather) ||
               !comm->reduce_scatter || !comm->all_gather))
    return fail(errorSlot,
                "a library compiled with --shard-optimizer needs a "
                "communicator with reduce_scatter and all_gather (the "
                "runtime's MPI communicator; an application's ampc_comm or "
                "a torch process group has none)");
  auto *shards = new Shards();
  int64_t ranks = comm ? comm->size : 1, rank = comm ? comm->rank : 0;
  shards->comm = comm;
  shards->total = total;
  shards->shard = (total + ranks - 1) / ranks;
  shards->lo = std::min(total, rank * shards->shard);
  shards->hi = std::min(total, shards->lo + shards->shard);
  shards->kinds = kinds;
  shards->width = width;
  shards->moments.assign(static_cast<size_t>(kinds * shards->shard * width),
                         0);
  shards->flat.assign(static_cast<size_t>(shards->shard * ranks * width), 0);
  std::memcpy(slot, &shards, sizeof(shards));
  return 0;
}

inline void destroyShards(unsigned char *slot) {
  delete shardsAt(slot);
  std::memset(slot, 0, sizeof(Shards *));
}

/// Moment `kind` of the rank's shard: element f of the concatenation
/// (lo <= f < hi) at [f - lo].
template <typename T> T *shardMoments(const unsigned char *slot, int64_t kind) {
  Shards *s = shardsAt(slot);
  return reinterpret_cast<T *>(s->moments.data()) + kind * s->shard;
}

/// The elements [b, e) of a tensor at `offset` of the concatenation, `count`
/// long, that the rank owns (b == e: none).
inline void ownedRange(const Shards &s, int64_t offset, int64_t count,
                       int64_t &b, int64_t &e) {
  b = std::clamp<int64_t>(s.lo - offset, 0, count);
  e = std::clamp<int64_t>(s.hi - offset, b, count);
}

/// The gradient at `offset` of the concatenation as the reduce-scatter
/// left it: the rank's elements from `packed`, the rest 0 (so that the
/// unscale's check and the clipping's sum see only the rank's shard).
template <typename In, typename Out>
void unpackShard(const Shards &s, const typename In::Storage *packed,
                 int64_t offset, typename Out::Storage *mean, int64_t count) {
  int64_t b, e;
  ownedRange(s, offset, count, b, e);
  for (int64_t i = 0; i < count; ++i)
    mean[i] = Out::store(i >= b && i < e ? In::load(packed[offset + i]) : 0);
}

/// Waits for request `request` of `comm`; its message on failure.
inline int32_t waitFor(const ampc_abi_comm *comm, int32_t request,
                       unsigned char *errorSlot) {
  if (comm->wait(comm->handle, request) != 0)
    return fail(errorSlot, comm->last_error(comm->handle));
  return 0;
}

/// `value` summed over the ranks (a blocking all-reduce of request
/// `request`); unchanged alone.
template <typename T>
int32_t sumOverRanks(const Shards &s, int32_t request, T &value,
                     unsigned char *errorSlot) {
  if (!s.comm)
    return 0;
  const int32_t dtype = sizeof(T) == 8 ? AMPC_DTYPE_F64 : AMPC_DTYPE_F32;
  if (s.comm->start(s.comm->handle, request, &value, 1, dtype) != 0)
    return fail(errorSlot, s.comm->last_error(s.comm->handle));
  return waitFor(s.comm, request, errorSlot);
}

/// After the last update: every rank's elements of the new parameters to
/// every rank (`n` tensors at `offsets` of the concatenation, `counts`
/// long, of the compute type T), through `flat`.
template <typename T>
int32_t gatherParameters(Shards &s, T *const *params, const int64_t *offsets,
                         const int64_t *counts, int n,
                         unsigned char *errorSlot) {
  if (!s.comm)
    return 0;
  T *flat = reinterpret_cast<T *>(s.flat.data());
  for (int k = 0; k < n; ++k) {
    int64_t b, e;
    ownedRange(s, offsets[k], counts[k], b, e);
    std::memcpy(flat + offsets[k] + b, params[k] + b, (e - b) * sizeof(T));
  }
  const int32_t dtype = sizeof(T) == 8 ? AMPC_DTYPE_F64 : AMPC_DTYPE_F32;
  const uint64_t count = static_cast<uint64_t>(s.shard * s.comm->size);
  if (s.comm->all_gather(s.comm->handle, kGatherRequest, flat, count, dtype) !=
      0)
    return fail(errorSlot, s.comm->last_error(s.comm->handle));
  if (int32_t code = waitFor(s.comm, kGatherRequest, errorSlot))
    return code;
  for (int k = 0; k < n; ++k)
    std::memcpy(params[k], flat + offsets[k], counts[k] * sizeof(T));
  return 0;
}

/// A checkpoint's view of moment `kind` of the tensor at `offset`
/// (`count` elements): read_state gathers it from its owners (every rank
/// must call it: a collective), write_state keeps the rank's elements.
template <typename T>
int32_t readShardedState(Shards &s, int64_t kind, int64_t offset,
                         int64_t count, void *out, unsigned char *errorSlot) {
  const T *mine = reinterpret_cast<const T *>(s.moments.data()) + kind * s.shard;
  T *result = static_cast<T *>(out);
  if (!s.comm) {
    std::memcpy(result, mine + offset, count * sizeof(T));
    return 0;
  }
  T *flat = reinterpret_cast<T *>(s.flat.data());
  std::memcpy(flat + s.lo, mine, (s.hi - s.lo) * sizeof(T));
  const int32_t dtype = sizeof(T) == 8 ? AMPC_DTYPE_F64 : AMPC_DTYPE_F32;
  const uint64_t all = static_cast<uint64_t>(s.shard * s.comm->size);
  if (s.comm->all_gather(s.comm->handle, kStateRequest, flat, all, dtype) != 0)
    return fail(errorSlot, s.comm->last_error(s.comm->handle));
  if (int32_t code = waitFor(s.comm, kStateRequest, errorSlot))
    return code;
  std::memcpy(result, flat + offset, count * sizeof(T));
  return 0;
}

template <typename T>
int32_t writeShardedState(Shards &s, int64_t kind, int64_t offset,
                          int64_t count, const void *in) {
  T *mine = reinterpret_cast<T *>(s.moments.data()) + kind * s.shard;
  int64_t b, e;
  ownedRange(s, offset, count, b, e);
  std::memcpy(mine + (offset + b - s.lo), static_cast<const T *>(in) + b,
              (e - b) * sizeof(T));
  return 0;
}

} // namespace ampc::cpu

#endif // AMPC_RUNTIME_CPUTRAINKERNELS_H
