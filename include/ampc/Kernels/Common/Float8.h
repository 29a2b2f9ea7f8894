//===- Float8.h - exact FP8 conversions and delayed scaling -----*- C++ -*-===//
//
// The two FP8 formats of FP8 training (docs/precision.md, "FP8"), written
// with integer operations only, as Float16.h is, so that the compiler, the
// CPU target's generated code, the CUDA kernels (every function here is
// __host__ __device__ under nvcc) and the runtime give the same bits:
//
//   E4M3 ("E4M3FN"): bias 7, 3 mantissa bits, no infinities; S.1111.111 is
//                    NaN, the largest finite value 448 (S.1111.110).
//   E5M2:            bias 15, 2 mantissa bits, IEEE-like: S.11111.00 is
//                    infinity, S.11111.xx (xx != 0) NaN, the largest finite
//                    value 57344.
//
// Encoding rounds to nearest even as if the exponent range were unbounded
// above, then treats a result past the largest finite value as overflow:
// saturating (PTX's cvt .satfinite, what the FP8 recipes quantize with)
// gives +-max for it and for an infinity; non-saturating (ml_dtypes' and
// PyTorch's casts) gives NaN in E4M3 and infinity in E5M2. So 464 (the
// midpoint of 448 and 480, a tie towards the even 448) encodes as 448 in
// E4M3 and anything above as overflow; in E5M2 the first value to overflow
// is 61440. NaN encodes as the quiet NaN of the format with its sign;
// values that round to zero keep their sign; subnormals are exact.
//
// The delayed-scaling recipe (Transformer Engine's) is the function
// updateDelayedScaling below; docs/precision.md writes down its order of
// operations.
//
//===----------------------------------------------------------------------===//

#ifndef AMPC_RUNTIME_FLOAT8_H
#define AMPC_RUNTIME_FLOAT8_H

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define AMPC_FP8_HD __host__ __device__
#else
#define AMPC_FP8_HD
#endif

namespace ampc::fp8 {

/// The facts of one FP8 format.
struct Format {
  int mantissaBits;
  int bias;
  uint8_t maxCode;      // the largest finite magnitude's code (sign clear)
  uint8_t nanCode;      // the quiet NaN written for a NaN input
  uint8_t overflowCode; // non-saturating result of an overflow
  float maxValue;
};

// Functions rather than constants: device code cannot read a host constant
// of class type.
AMPC_FP8_HD constexpr Format e4m3() { return {3, 7, 0x7E, 0x7F, 0x7F, 448.0f}; }
AMPC_FP8_HD constexpr Format e5m2() { return {2, 15, 0x7B, 0x7E, 0x7C, 57344.0f}; }

AMPC_FP8_HD inline uint32_t bitsOf(float value) {
  uint32_t bits;
  memcpy(&bits, &value, sizeof(bits));
  return bits;
}

AMPC_FP8_HD inline float fromBits(uint32_t bits) {
  float value;
  memcpy(&value, &bits, sizeof(value));
  return value;
}

/// FP8 code to FP32 (exact).
AMPC_FP8_HD inline float decode(uint8_t code, const Format &f) {
  const uint32_t sign = static_cast<uint32_t>(code & 0x80u) << 24;
  const uint32_t magnitude = code & 0x7Fu;
  const uint32_t mantissa = magnitude & ((1u << f.mantissaBits) - 1u);
  const uint32_t exponent = magnitude >> f.mantissaBits;
  if (magnitude > f.maxCode) {
    if (magnitude == f.overflowCode && f.overflowCode != f.nanCode)
      return fromBits(sign | 0x7F800000u); // E5M2's infinity
    return fromBits(sign | 0x7FC00000u | (mantissa << (23 - f.mantissaBits)));
  }
  if (exponent != 0)
    return fromBits(sign | ((exponent + 127 - f.bias) << 23) |
                    (mantissa << (23 - f.mantissaBits)));
  // Subnormal: mantissa units of 2^(1 - bias - mantissaBits), a product of a
  // small integer and a power of two, so exact in FP32.
  const float unit = fromBits(
      static_cast<uint32_t>(127 + 1 - f.bias - f.mantissaBits) << 23);
  const float magnitudeValue = static_cast<float>(mantissa) * unit;
  return fromBits(sign | bitsOf(magnitudeValue));
}

/// FP32 to an FP8 code, round to nearest even; `saturate` chooses what an
/// overflow (and an infinity) gives: +-max, or the format's overflow code.
AMPC_FP8_HD inline uint8_t encode(float value, const Format &f,
                                  bool saturate) {
  const uint32_t x = bitsOf(value);
  const uint8_t sign = static_cast<uint8_t>((x >> 24) & 0x80u);
  const uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u)
    return sign | f.nanCode;
  const uint8_t overflow = saturate ? f.maxCode : f.overflowCode;
  if (abs == 0x7F800000u)
    return sign | overflow;
  const uint32_t exponent = abs >> 23;
  const int dropped = 23 - f.mantissaBits;
  uint32_t result;
  if (static_cast<int>(exponent) >= 128 - f.bias) { // FP8 normal range
    // Drop the low mantissa bits rounding to nearest even, then rebias the
    // exponent; a carry out of the mantissa is correct, and so is one past
    // the largest code (caught as overflow below).
    const uint32_t rounded =
        abs + ((1u << (dropped - 1)) - 1u) + ((abs >> dropped) & 1u);
    result = (rounded - (static_cast<uint32_t>(127 - f.bias) << 23)) >> dropped;
  } else {
    // Subnormal (units of 2^(1 - bias - mantissaBits)) or zero.
    const int shift = 151 - f.bias - f.mantissaBits - static_cast<int>(exponent);
    if (shift > 24 || exponent == 0)
      return sign; // below half the smallest subnormal (FP32 subnormals too)
    const uint32_t mantissa = (abs & 0x7FFFFFu) | 0x800000u;
    result = mantissa >> shift;
    const uint32_t rest = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    if (rest > halfway || (rest == halfway && (result & 1u)))
      ++result; // may become the smallest normal's code: still right
  }
  if (result > f.maxCode)
    return sign | overflow;
  return static_cast<uint8_t>(sign | result);
}

AMPC_FP8_HD inline float decodeE4M3(uint8_t code) { return decode(code, e4m3()); }
AMPC_FP8_HD inline float decodeE5M2(uint8_t code) { return decode(code, e5m2()); }
AMPC_FP8_HD inline uint8_t encodeE4M3(float value, bool saturate = true) {
  return encode(value, e4m3(), saturate);
}
AMPC_FP8_HD inline uint8_t encodeE5M2(float value, bool saturate = true) {
  return encode(value, e5m2(), saturate);
}

/// How the amax that sets a scale is taken from the history.
enum class AmaxAlgo { Max, MostRecent };

/// One tensor's delayed-scaling state: `history` holds `length` amaxes.
struct ScalingState {
  float *history;
  int64_t length;
  float scale;
  float scaleInv;
};

/// One step of Transformer Engine's delayed scaling for one FP8 tensor,
/// after the step's amax (`newest`) is known. In this order:
///   1. the history rotates by -1 (slot i takes slot i+1, the last slot
///      takes slot 0), and slot 0 takes `newest`;
///   2. amax = the largest history entry (Max; NaN entries ignored, an
///      infinity kept) or `newest` (MostRecent);
///   3. if amax is finite and > 0: scale = (fpMax / amax) / 2^margin, each
///      division in FP32 rounded to nearest even, and an infinite result
///      (amax tiny) becomes the largest finite FP32; otherwise the scale
///      is kept;
///   4. scaleInv = 1 / scale in FP32.
/// `margin` is in [0, 127].
AMPC_FP8_HD inline void updateDelayedScaling(ScalingState &state,
                                             float newest, float fp8Max,
                                             int margin, AmaxAlgo algo) {
  if (state.length > 0) {
    const float previous = state.history[0];
    for (int64_t i = 0; i + 1 < state.length; ++i)
      state.history[i] = state.history[i + 1];
    state.history[state.length - 1] = previous;
    state.history[0] = newest;
  }
  float amax = newest;
  if (algo == AmaxAlgo::Max) {
    amax = 0.0f;
    for (int64_t i = 0; i < state.length; ++i) {
      const float a = state.history[i];
      if (a > amax) // false for NaN
        amax = a;
    }
  }
  const uint32_t amaxBits = bitsOf(amax);
  const bool finitePositive =
      !(amaxBits & 0x80000000u) && amaxBits != 0 && amaxBits < 0x7F800000u;
  if (finitePositive) {
    float scale = fp8Max / amax;
    scale = scale / fromBits(static_cast<uint32_t>(127 + margin) << 23);
    if (bitsOf(scale) == 0x7F800000u)
      scale = fromBits(0x7F7FFFFFu);
    state.scale = scale;
  }
  state.scaleInv = 1.0f / state.scale;
}

} // namespace ampc::fp8

#endif // AMPC_RUNTIME_FLOAT8_H
