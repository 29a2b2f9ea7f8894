//===- Sampler.h - the samples each step of ampc-train takes ----*- C++ -*-===//
//
// The per-epoch order of the samples and, under a data-parallel job, each
// rank's share of it as torch.utils.data.DistributedSampler gives it.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_TRAIN_SAMPLER_H
#define AMPC_TRAIN_SAMPLER_H

#include <cstdint>
#include <vector>

namespace ampc::train {

/// The per-epoch sample order: the identity, or a Fisher-Yates shuffle over
/// splitmix64 of `seed` and `epoch` (the same order with any standard
/// library, and on every rank).
std::vector<int64_t> sampleOrder(int64_t samples, bool shuffle, uint64_t seed,
                                 int64_t epoch);

/// The samples each of `ranks` ranks takes from an epoch of `n`: n/ranks
/// rounded up (the order padded), or down with `dropLast`.
int64_t shardSize(int64_t n, int32_t ranks, bool dropLast);

/// The share of `order` rank `rank` of `ranks` trains on, as
/// DistributedSampler's: the order padded by repeating it from its start to
/// a multiple of `ranks` (or, `dropLast`, cut to one), then every
/// `ranks`-th position from `rank` on.
std::vector<int64_t> shardOrder(const std::vector<int64_t> &order,
                                int32_t rank, int32_t ranks, bool dropLast);

} // namespace ampc::train

#endif // AMPC_TRAIN_SAMPLER_H
