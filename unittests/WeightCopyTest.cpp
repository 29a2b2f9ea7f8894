//===- WeightCopyTest.cpp - low-precision weight copies, channels-last ---===//
//
// A convolution weight's FP16/BF16 copy kept channels-last (issue 39 item
// 3): the master (M, C, k...) and the copy (M, k..., C). The runtime's
// refreshCopies (after set_parameter or a checkpoint load) and the CUDA
// target's fused optimizer place each element with math::weightCopyIndex.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cpu/CpuTrainKernels.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace {

TEST(WeightCopyIndex, PlainCopyIsTheIdentity) {
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(ampc::math::weightCopyIndex(i, 0, 0), i);
}

// Master (M 2, C 3, S 4), element (m, c, s) at (m·3 + c)·4 + s; in the
// copy (M, S, C) at (m·4 + s)·3 + c.
TEST(WeightCopyIndex, ChannelsLastHandComputed) {
  EXPECT_EQ(ampc::math::weightCopyIndex(0, 3, 4), 0);
  EXPECT_EQ(ampc::math::weightCopyIndex(1, 3, 4), 3);   // (0, 0, 1)
  EXPECT_EQ(ampc::math::weightCopyIndex(4, 3, 4), 1);   // (0, 1, 0)
  EXPECT_EQ(ampc::math::weightCopyIndex(11, 3, 4), 11); // (0, 2, 3)
  EXPECT_EQ(ampc::math::weightCopyIndex(13, 3, 4), 15); // (1, 0, 1)
  EXPECT_EQ(ampc::math::weightCopyIndex(22, 3, 4), 20); // (1, 2, 2)
}

// Every element lands once: the map is a permutation.
TEST(WeightCopyIndex, ChannelsLastIsAPermutation) {
  const int64_t m = 3, c = 5, s = 7;
  std::vector<int> hits(m * c * s, 0);
  for (int64_t i = 0; i < m * c * s; ++i)
    ++hits[ampc::math::weightCopyIndex(i, c, s)];
  for (int h : hits)
    EXPECT_EQ(h, 1);
}

// refreshCopies writes the FP16 bits of master element (m, c, s) at
// (m, s, c) of a channels-last copy, and in place for a plain one.
TEST(RefreshCopies, ChannelsLastCopyIsTheTransposedCast) {
  const int64_t m = 2, c = 3, s = 4, n = m * c * s;
  std::vector<unsigned char> state(n * 4 + 2 * n * 2);
  std::vector<float> master(n);
  for (int64_t i = 0; i < n; ++i)
    master[i] = 0.25f * static_cast<float>(i) - 1.5f;
  std::memcpy(state.data(), master.data(), n * 4);
  const ampc::WeightCopy copies[] = {
      {0, 0, static_cast<uint64_t>(n * 4), n, false, c, s},
      {0, 0, static_cast<uint64_t>(n * 6), n, true, 0, 0}};
  ampc::cpu::refreshCopies(state.data(), copies, 2, -1);
  const auto *last = reinterpret_cast<const uint16_t *>(state.data() + n * 4);
  const auto *plain = reinterpret_cast<const uint16_t *>(state.data() + n * 6);
  for (int64_t mi = 0; mi < m; ++mi)
    for (int64_t ci = 0; ci < c; ++ci)
      for (int64_t si = 0; si < s; ++si) {
        const float v = master[(mi * c + ci) * s + si];
        EXPECT_EQ(last[(mi * s + si) * c + ci], ampc::numeric::f32ToF16Bits(v));
        EXPECT_EQ(plain[(mi * c + ci) * s + si],
                  ampc::numeric::f32ToBf16Bits(v));
      }
}

} // namespace
