//===- Float16Test.cpp - FP16/BF16 conversions against references --------===//

#include "ampc/Kernels/Common/Float16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

using namespace ampc::numeric;

namespace {
uint16_t gccHalfBits(float value) {
  _Float16 h = static_cast<_Float16>(value); // GCC rounds to nearest even
  uint16_t bits;
  std::memcpy(&bits, &h, sizeof(bits));
  return bits;
}

bool isNanF16(uint16_t h) { return (h & 0x7C00u) == 0x7C00u && (h & 0x3FFu); }

/// BF16 by exact arithmetic: of the two neighbours, the nearer; ties to the
/// one with an even last bit.
uint16_t referenceBf16(float value) {
  uint32_t bits = floatBits(value);
  uint16_t low = static_cast<uint16_t>(bits >> 16);
  uint16_t high = static_cast<uint16_t>(low + 1);
  double v = value, lo = bf16BitsToF32(low);
  double hi = (high & 0x7F80u) == 0x7F80u && (high & 0x7Fu) == 0
                  ? std::copysign(INFINITY, value)
                  : static_cast<double>(bf16BitsToF32(high));
  // Past the largest finite BF16 the upper neighbour is infinity, which
  // rounding reaches at the midpoint to the next (unrepresentable) binade.
  if (std::isinf(hi))
    hi = std::copysign(std::ldexp(1.0, 128), value);
  double dLo = std::fabs(v - lo), dHi = std::fabs(hi - v);
  if (dLo < dHi || (dLo == dHi && !(low & 1u)))
    return low;
  return high;
}
} // namespace

TEST(Float16Test, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 0x10000u; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    float f = f16BitsToF32(bits);
    _Float16 reference;
    std::memcpy(&reference, &bits, sizeof(bits));
    if (isNanF16(bits)) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(isNanF16(f32ToF16Bits(f))) << h;
      continue;
    }
    EXPECT_EQ(floatBits(f), floatBits(static_cast<float>(reference))) << h;
    EXPECT_EQ(f32ToF16Bits(f), bits) << h;
  }
}

TEST(Float16Test, FloatToHalfMatchesGccOnASweepOfBitPatterns) {
  // Every 127th FP32 bit pattern (34 million values, all exponents, signs
  // and rounding cases), plus the boundaries named below.
  unsigned mismatches = 0;
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 127) {
    float f = floatFromBits(static_cast<uint32_t>(x));
    uint16_t ours = f32ToF16Bits(f), gcc = gccHalfBits(f);
    if (std::isnan(f) ? !isNanF16(ours) : ours != gcc)
      ++mismatches;
  }
  EXPECT_EQ(mismatches, 0u);
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e9f, 6.1035156e-05f,
                  5.9604645e-08f, 2.9802322e-08f, 2.9802326e-08f, 1e-40f,
                  -0.0f, 0.0f, INFINITY, -INFINITY})
    EXPECT_EQ(f32ToF16Bits(f), gccHalfBits(f)) << f;
  EXPECT_EQ(f32ToF16Bits(65520.0f), 0x7C00u);          // rounds to infinity
  EXPECT_EQ(f32ToF16Bits(2.9802322e-08f), 0x0000u);    // 2^-25: tie to even 0
}

TEST(Float16Test, FloatToBFloat16MatchesExactRounding) {
  unsigned mismatches = 0;
  for (uint64_t x = 0; x <= 0xFFFFFFFFull; x += 251) {
    float f = floatFromBits(static_cast<uint32_t>(x));
    uint16_t ours = f32ToBf16Bits(f);
    if (std::isnan(f)) {
      mismatches += !((ours & 0x7F80u) == 0x7F80u && (ours & 0x7Fu));
      continue;
    }
    mismatches += ours != referenceBf16(f);
  }
  EXPECT_EQ(mismatches, 0u);
  EXPECT_EQ(f32ToBf16Bits(1.0f + 1.0f / 256), 0x3F80u); // tie, to even
  EXPECT_EQ(f32ToBf16Bits(3.4e38f), 0x7F80u);           // overflow: infinity
  EXPECT_EQ(f32ToBf16Bits(floatFromBits(0x7F800001u)) & 0x40u, 0x40u); // quiet
}

TEST(Float16Test, RoundHelpers) {
  EXPECT_EQ(roundToF16(0.1f), 0.0999755859375f);
  EXPECT_EQ(roundToBf16(0.1f), 0.10009765625f);
  EXPECT_TRUE(std::isinf(roundToF16(70000.0f)));
}
