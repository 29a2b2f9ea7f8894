//===- CpuIndexingKernelsTest.cpp - scatter, topK, ReduceProd on the CPU --===//
//
// The CPU kernels of ampc.scatter, ampc.top_k and ReduceProd
// (include/ampc/Kernels/Cpu/CpuKernels.h) on hand-computed cases: each
// reduction of a scatter with repeated, negative and out-of-range
// indices, in place and in f16; TopK's order with ties and NaN, largest
// and smallest, along a middle axis.
//
//===----------------------------------------------------------------------===//

#include "ampc/Kernels/Cpu/CpuKernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace ampc::cpu;
using ampc::math::ScatterReduction;

namespace {

constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

/// data (2 x 4 x 1 rows of [outer, axis, inner]) with updates at indices
/// {3, -4, 3} (3 twice, -4 is 0) for each outer index.
std::vector<float> scatterRows(ScatterReduction reduction) {
  const std::vector<float> data = {1, 2, 3, 4, 5, 6, 7, 8};
  const std::vector<int64_t> indices = {3, -4, 3};
  const std::vector<float> updates = {10, 20, 30, -1, -2, -3};
  std::vector<float> out(8, -99);
  EXPECT_TRUE((scatter<float, As<float>>(data.data(), indices.data(),
                                         updates.data(), out.data(), 2, 4, 3,
                                         1, reduction)));
  return out;
}

TEST(ScatterTest, NoneLaterIndexWins) {
  EXPECT_EQ(scatterRows(ampc::math::ScatterNone),
            (std::vector<float>{20, 2, 3, 30, -2, 6, 7, -3}));
}

TEST(ScatterTest, AddMulMaxMin) {
  EXPECT_EQ(scatterRows(ampc::math::ScatterAdd),
            (std::vector<float>{21, 2, 3, 44, 3, 6, 7, 4}));
  EXPECT_EQ(scatterRows(ampc::math::ScatterMul),
            (std::vector<float>{20, 2, 3, 1200, -10, 6, 7, 24}));
  EXPECT_EQ(scatterRows(ampc::math::ScatterMax),
            (std::vector<float>{20, 2, 3, 30, 5, 6, 7, 8}));
  EXPECT_EQ(scatterRows(ampc::math::ScatterMin),
            (std::vector<float>{1, 2, 3, 4, -2, 6, 7, -3}));
}

TEST(ScatterTest, MaxAndMinLetNanWin) {
  const std::vector<float> data = {kNan, 1};
  const std::vector<int32_t> indices = {0, 1};
  const std::vector<float> updates = {5, kNan};
  for (ScatterReduction r : {ampc::math::ScatterMax, ampc::math::ScatterMin}) {
    std::vector<float> out(2);
    ASSERT_TRUE((scatter<float, As<float>>(data.data(), indices.data(),
                                           updates.data(), out.data(), 1, 2,
                                           2, 1, r)));
    EXPECT_TRUE(std::isnan(out[0]));
    EXPECT_TRUE(std::isnan(out[1]));
  }
}

TEST(ScatterTest, RowsInPlace) {
  // Rows of 2 (inner) along axis 0; out is data.
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  const std::vector<int64_t> indices = {-1, 0};
  const std::vector<float> updates = {10, 20, 30, 40};
  ASSERT_TRUE((scatter<float, As<float>>(data.data(), indices.data(),
                                         updates.data(), data.data(), 1, 3, 2,
                                         2, ampc::math::ScatterAdd)));
  EXPECT_EQ(data, (std::vector<float>{31, 42, 3, 4, 15, 26}));
}

TEST(ScatterTest, OutOfRangeIndexReturnsFalseWritingNothing) {
  const std::vector<float> data = {1, 2, 3};
  const std::vector<float> updates = {7, 8};
  for (int64_t bad : {3, -4}) {
    const std::vector<int64_t> indices = {0, bad};
    std::vector<float> out(3, -99);
    EXPECT_FALSE((scatter<float, As<float>>(data.data(), indices.data(),
                                            updates.data(), out.data(), 1, 3,
                                            2, 1, ampc::math::ScatterNone)));
    EXPECT_EQ(out, (std::vector<float>{-99, -99, -99}));
  }
}

TEST(ScatterTest, F16RoundsEachCombination) {
  // 2048 + 1 is not an f16 (spacing 2 there): each add rounds to even, so
  // two separate adds of 1 leave 2048 where one add of 2 would not.
  const std::vector<uint16_t> data = {storeF16(2048.0f)};
  const std::vector<int64_t> indices = {0, 0};
  const std::vector<uint16_t> updates = {storeF16(1.0f), storeF16(1.0f)};
  std::vector<uint16_t> out(1);
  ASSERT_TRUE((scatter<float, AsF16>(data.data(), indices.data(),
                                     updates.data(), out.data(), 1, 1, 2, 1,
                                     ampc::math::ScatterAdd)));
  EXPECT_EQ(loadF16(out[0]), 2048.0f);
}

TEST(TopKTest, LargestTiesByPositionNanFirst) {
  const std::vector<float> x = {3, 7, kNan, 7, -1, 3};
  std::vector<int64_t> out(4), order(6);
  topK<float, As<float>>(x.data(), out.data(), 1, 6, 1, 4, true, order.data());
  EXPECT_EQ(out, (std::vector<int64_t>{2, 1, 3, 0}));
}

TEST(TopKTest, SmallestNanLast) {
  const std::vector<float> x = {3, 7, kNan, 7, -1, 3};
  std::vector<int64_t> out(6), order(6);
  topK<float, As<float>>(x.data(), out.data(), 1, 6, 1, 6, false,
                         order.data());
  EXPECT_EQ(out, (std::vector<int64_t>{4, 0, 5, 1, 3, 2}));
}

TEST(TopKTest, MiddleAxis) {
  // Shape (2, 3, 2), k = 2 along axis 1.
  const std::vector<double> x = {1, 6, 5, 2, 3, 4,   // outer 0
                                 9, 0, 9, 0, 8, 1};  // outer 1
  std::vector<int64_t> out(8), order(3);
  topK<double, As<double>>(x.data(), out.data(), 2, 3, 2, 2, true,
                           order.data());
  EXPECT_EQ(out, (std::vector<int64_t>{1, 0, 2, 2, 0, 2, 1, 0}));
}

TEST(ReduceProdTest, KeptAndReduced) {
  // (2, 3) reduced over axis 1, then over axis 0.
  const std::vector<float> x = {2, -3, 0.5f, 4, 0, 1};
  std::vector<float> out(3);
  int64_t scratch[3];
  const int64_t keptDims[] = {2}, keptStrides[] = {3};
  const int64_t reducedDims[] = {3}, reducedStrides[] = {1};
  reduce<float, As<float>, As<float>>(x.data(), out.data(), 1, keptDims,
                                      keptStrides, 1, reducedDims,
                                      reducedStrides, ReduceProd, scratch);
  EXPECT_EQ(out[0], -3.0f);
  EXPECT_EQ(out[1], 0.0f);
  const int64_t keptDims2[] = {3}, keptStrides2[] = {1};
  const int64_t reducedDims2[] = {2}, reducedStrides2[] = {3};
  reduce<float, As<float>, As<float>>(x.data(), out.data(), 1, keptDims2,
                                      keptStrides2, 1, reducedDims2,
                                      reducedStrides2, ReduceProd, scratch);
  EXPECT_EQ(out, (std::vector<float>{8, 0, 0.5f}));
}

} // namespace
