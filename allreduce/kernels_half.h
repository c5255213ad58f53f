// Internal to the reduction kernels: inline float16 / bfloat16 <-> float32
// conversions, written with integer bit manipulation only (no F16C or other
// ISA extensions, so the build stays portable) and branch-light so that the
// compiler can inline them into the kernel loops. The public entry points
// are kolo::HalfToFloat & co. in allreduce/kernels.h.
//
// Rounding: float -> float16 / bfloat16 rounds to nearest, ties to even.
// Overflow gives +-inf; float16 subnormals are produced and read exactly.
// NaN stays NaN of the same sign, quieted, keeping the top payload bits.
//
// Thread-safety: pure functions. Requires the default floating-point
// environment (round to nearest, no flush-to-zero), which kolo never
// changes.
#ifndef KOLO_ALLREDUCE_KERNELS_HALF_H_
#define KOLO_ALLREDUCE_KERNELS_HALF_H_

#include <bit>
#include <cstdint>

namespace kolo::kernels_internal {

// `condition ? a : b` with masks: an operand computed by floating-point
// arithmetic and chosen by a plain ?: may be sunk into a branch that the
// vectoriser then cannot flatten (it does not speculate FP operations).
inline uint32_t Select(bool condition, uint32_t a, uint32_t b) {
  const uint32_t mask = 0u - static_cast<uint32_t>(condition);
  return (a & mask) | (b & ~mask);
}

// IEEE binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits.
//
// Both directions compute every case and select at the end (no branches
// around floating-point operations, which the compiler may not speculate),
// so that loops over them vectorise.
inline float HalfBitsToFloat(uint16_t h) {
  constexpr uint32_t kShiftedExp = 0x7c00u << 13;  // half exponent in float
  const uint32_t magnitude = (static_cast<uint32_t>(h) & 0x7fffu) << 13;
  const uint32_t exp = magnitude & kShiftedExp;
  const uint32_t normal = magnitude + ((127u - 15u) << 23);  // rebias
  const uint32_t inf_nan = normal + ((128u - 16u) << 23);    // exponent all 1s
  // Zero or subnormal: value = mantissa * 2^-24, computed exactly as
  // (2^-14 + mantissa * 2^-24) - 2^-14 (2^-14 is the float exponent 113).
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(normal + (1u << 23)) -
                              std::bit_cast<float>(113u << 23));
  const uint32_t bits =
      Select(exp == kShiftedExp, inf_nan, Select(exp == 0, subnormal, normal));
  return std::bit_cast<float>(bits |
                              ((static_cast<uint32_t>(h) & 0x8000u) << 16));
}

inline uint16_t FloatToHalfBits(float f) {
  constexpr uint32_t kFloatInf = 255u << 23;
  constexpr uint32_t kHalfOverflow = (127u + 16u) << 23;  // 65536.0f
  constexpr uint32_t kHalfMinNormal = 113u << 23;         // 2^-14
  // 0.5f: adding it to a value < 2^-14 leaves the half subnormal's mantissa,
  // rounded to nearest even by the FPU, in the low bits.
  constexpr uint32_t kDenormMagic = ((127u - 15u) + (23u - 10u) + 1u) << 23;
  const uint32_t all = std::bit_cast<uint32_t>(f);
  const uint32_t sign = all & 0x80000000u;
  const uint32_t bits = all ^ sign;
  // Inf stays inf; NaN becomes a quiet NaN keeping the top payload bits.
  const uint32_t inf_nan =
      bits > kFloatInf ? (0x7e00u | ((bits >> 13) & 0x3ffu)) : 0x7c00u;
  const uint32_t subnormal =
      std::bit_cast<uint32_t>(std::bit_cast<float>(bits) +
                              std::bit_cast<float>(kDenormMagic)) -
      kDenormMagic;
  // Normal: rebias, then round the 13 dropped bits to nearest even. A carry
  // out of the mantissa bumps the exponent (up to inf): correct.
  const uint32_t normal =
      (bits + ((15u - 127u) << 23) + 0xfffu + ((bits >> 13) & 1u)) >> 13;
  const uint32_t out = Select(bits >= kHalfOverflow, inf_nan,
                              Select(bits < kHalfMinNormal, subnormal, normal));
  return static_cast<uint16_t>(out | (sign >> 16));
}

// bfloat16 is the top half of a float32.
inline float BFloat16BitsToFloat(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

inline uint16_t FloatToBFloat16Bits(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  if ((bits & 0x7fffffffu) > 0x7f800000u) {
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN
  }
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

}  // namespace kolo::kernels_internal

#endif  // KOLO_ALLREDUCE_KERNELS_HALF_H_
