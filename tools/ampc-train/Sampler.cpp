//===- Sampler.cpp - the samples each step of ampc-train takes ------------===//

#include "Sampler.h"

#include <cstddef>
#include <utility>

using namespace ampc::train;

std::vector<int64_t> ampc::train::sampleOrder(int64_t samples, bool shuffle,
                                              uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(samples));
  for (int64_t i = 0; i < samples; ++i)
    order[size_t(i)] = i;
  if (!shuffle)
    return order;
  uint64_t state = seed * 0x9e3779b97f4a7c15ull + uint64_t(epoch) + 1;
  auto next = [&]() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  };
  for (int64_t i = samples - 1; i > 0; --i) {
    uint64_t bound = uint64_t(i) + 1, limit = UINT64_MAX - UINT64_MAX % bound;
    uint64_t r;
    do
      r = next();
    while (r >= limit);
    std::swap(order[size_t(i)], order[size_t(r % bound)]);
  }
  return order;
}

int64_t ampc::train::shardSize(int64_t n, int32_t ranks, bool dropLast) {
  return dropLast ? n / ranks : (n + ranks - 1) / ranks;
}

std::vector<int64_t> ampc::train::shardOrder(const std::vector<int64_t> &order,
                                             int32_t rank, int32_t ranks,
                                             bool dropLast) {
  int64_t n = int64_t(order.size()), per = shardSize(n, ranks, dropLast);
  std::vector<int64_t> shard(static_cast<size_t>(per));
  // The padded order repeats `order` from its start: position p is p % n.
  for (int64_t i = 0; i < per; ++i)
    shard[size_t(i)] = order[size_t((i * ranks + rank) % n)];
  return shard;
}
