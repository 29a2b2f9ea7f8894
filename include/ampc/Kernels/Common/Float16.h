//===- Float16.h - exact FP16 and BF16 conversions --------------*- C++ -*-===//
//
// Round-to-nearest-even conversions between FP32 and the two 16-bit float
// formats, written with integer operations only so that they give the same
// bits under any C++ compiler (the compiler, the CPU target's generated code
// and the runtime all include this header; none may depend on LLVM).
//
// FP16: overflow gives infinity (65520 and above), values below half the
// smallest subnormal give zero, NaNs stay quiet NaNs. BF16: the upper half of
// the FP32 bits, rounded; NaNs stay quiet.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_FLOAT16_H
#define AMPC_RUNTIME_FLOAT16_H

#include <cstdint>
#include <cstring>

namespace ampc::numeric {

inline uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

inline float floatFromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

/// FP32 to FP16 bits, round to nearest even.
inline uint16_t f32ToF16Bits(float value) {
  uint32_t x = floatBits(value);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) // NaN: quiet, keeping the payload's top bits
    return static_cast<uint16_t>(sign | 0x7E00u | ((abs >> 13) & 0x3FFu));
  if (abs >= 0x477FF000u) // 65520 and above (and infinity) round to infinity
    return static_cast<uint16_t>(sign | 0x7C00u);
  if (abs >= 0x38800000u) { // FP16 normal range, from 2^-14
    // Drop 13 mantissa bits rounding to nearest even, then rebias the
    // exponent from 127 to 15; a carry out of the mantissa is correct.
    uint32_t rounded = abs + 0xFFFu + ((abs >> 13) & 1u);
    return static_cast<uint16_t>(sign | ((rounded - 0x38000000u) >> 13));
  }
  // FP16 subnormal (units of 2^-24) or zero.
  uint32_t exponent = abs >> 23;
  uint32_t shift = 126 - exponent;
  if (shift > 24)
    return static_cast<uint16_t>(sign);
  uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
  uint32_t result = mantissa >> shift;
  uint32_t rest = mantissa & ((1u << shift) - 1u);
  uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (result & 1u)))
    ++result; // may become 0x400, the smallest normal: still the right bits
  return static_cast<uint16_t>(sign | result);
}

/// FP16 bits to FP32 (exact).
inline float f16BitsToF32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exponent = (h >> 10) & 0x1Fu;
  uint32_t mantissa = h & 0x3FFu;
  if (exponent == 0x1F)
    return floatFromBits(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0)
    return floatFromBits(sign | ((exponent + 112) << 23) | (mantissa << 13));
  if (mantissa == 0)
    return floatFromBits(sign);
  // Subnormal: normalise.
  uint32_t shift = 0;
  while (!(mantissa & 0x400u)) {
    mantissa <<= 1;
    ++shift;
  }
  return floatFromBits(sign | ((113 - shift) << 23) | ((mantissa & 0x3FFu) << 13));
}

/// FP32 to BF16 bits, round to nearest even.
inline uint16_t f32ToBf16Bits(float value) {
  uint32_t bits = floatBits(value);
  // NaN: truncate and set the quiet bit, so a payload living only in the
  // dropped half cannot turn it into an infinity.
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Add just under half an ulp plus the kept lowest bit; overflow carries
  // into infinity as it should.
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

/// BF16 bits to FP32 (exact).
inline float bf16BitsToF32(uint16_t h) {
  return floatFromBits(static_cast<uint32_t>(h) << 16);
}

/// `value` rounded to the nearest FP16 / BF16 value, as FP32: what the GPU
/// holds where it stores a 16-bit value.
inline float roundToF16(float value) { return f16BitsToF32(f32ToF16Bits(value)); }
inline float roundToBf16(float value) { return bf16BitsToF32(f32ToBf16Bits(value)); }

} // namespace ampc::numeric

#endif // AMPC_RUNTIME_FLOAT16_H
