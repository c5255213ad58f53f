// float16 / bfloat16 conversions of the reduction kernels, exhaustively
// where the space allows.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "allreduce/kernels.h"
#include "gtest/gtest.h"

namespace kolo {
namespace {

bool IsHalfNaN(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff); }

TEST(HalfConversion, ExhaustiveRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto h = static_cast<uint16_t>(i);
    const float f = HalfToFloat(h);
    if (IsHalfNaN(h)) {
      ASSERT_TRUE(std::isnan(f)) << std::hex << i;
      const uint16_t back = FloatToHalf(f);
      ASSERT_TRUE(IsHalfNaN(back)) << std::hex << i;
      ASSERT_EQ(back & 0x8000, h & 0x8000) << "NaN sign, " << std::hex << i;
      continue;
    }
    ASSERT_EQ(FloatToHalf(f), h) << std::hex << i << " -> " << f;
  }
}

TEST(HalfConversion, KnownValues) {
  EXPECT_EQ(HalfToFloat(0x3c00), 1.0f);
  EXPECT_EQ(HalfToFloat(0xc000), -2.0f);
  EXPECT_EQ(HalfToFloat(0x7bff), 65504.0f);
  EXPECT_EQ(HalfToFloat(0x0001), std::ldexp(1.0f, -24));  // min subnormal
  EXPECT_EQ(HalfToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(HalfToFloat(0x0400), std::ldexp(1.0f, -14));  // min normal
  EXPECT_EQ(HalfToFloat(0x7c00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(HalfToFloat(0xfc00), -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(HalfToFloat(0x8000)));
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(0.1f), 0x2e66);
  EXPECT_TRUE(IsHalfNaN(FloatToHalf(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(
      IsHalfNaN(FloatToHalf(std::numeric_limits<float>::signaling_NaN())));
}

TEST(HalfConversion, RoundsToNearestEven) {
  // Ties between two halves go to the even mantissa.
  EXPECT_EQ(FloatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);      // down
  EXPECT_EQ(FloatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // up
  EXPECT_EQ(FloatToHalf(2049.0f), 0x6800);  // 2048 | 2050: tie -> 2048
  EXPECT_EQ(FloatToHalf(2051.0f), 0x6802);  // 2050 | 2052: tie -> 2052
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);      // tie -> 0
  EXPECT_EQ(FloatToHalf(3 * std::ldexp(1.0f, -25)), 0x0002);  // tie -> 2
  EXPECT_EQ(FloatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -26)), 0x0000);  // underflow
  // Overflow: 65520 is the tie between 65504 and (virtual) 65536 -> inf.
  EXPECT_EQ(FloatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7c00);
  EXPECT_EQ(FloatToHalf(-1e9f), 0xfc00);
  EXPECT_EQ(FloatToHalf(std::numeric_limits<float>::infinity()), 0x7c00);
}

// Reference: the nearest half by search over all finite positive halves,
// ties to even; |f| >= 65520 rounds to inf.
uint16_t ReferenceFloatToHalf(float f) {
  static const std::vector<float> values = [] {
    std::vector<float> v;
    for (uint32_t h = 0; h <= 0x7bff; ++h) {
      v.push_back(HalfToFloat(static_cast<uint16_t>(h)));
    }
    return v;
  }();
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  const float a = std::fabs(f);
  if (a >= 65520.0f) return sign | 0x7c00;
  const auto it = std::lower_bound(values.begin(), values.end(), a);
  if (it == values.end()) return sign | 0x7bff;  // 65504 <= a < 65520
  auto hi = static_cast<uint16_t>(it - values.begin());
  if (values[hi] == a || hi == 0) return sign | hi;
  const auto lo = static_cast<uint16_t>(hi - 1);
  const double dlo = static_cast<double>(a) - values[lo];
  const double dhi = static_cast<double>(values[hi]) - a;
  if (dlo < dhi || (dlo == dhi && (lo & 1) == 0)) return sign | lo;
  return sign | hi;
}

TEST(HalfConversion, MatchesReferenceRoundingOnManyFloats) {
  // Every 97th float up to 2^17 in magnitude (about 11 million values),
  // both signs: normals, subnormals, ties and overflow.
  const uint32_t limit = std::bit_cast<uint32_t>(131072.0f);
  for (uint32_t bits = 0; bits < limit; bits += 97) {
    for (uint32_t sign : {0u, 0x80000000u}) {
      const float f = std::bit_cast<float>(bits | sign);
      ASSERT_EQ(FloatToHalf(f), ReferenceFloatToHalf(f))
          << std::hex << (bits | sign) << " = " << f;
    }
  }
}

TEST(BFloat16Conversion, ExhaustiveRoundTrip) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const auto b = static_cast<uint16_t>(i);
    const float f = BFloat16ToFloat(b);
    ASSERT_EQ(std::bit_cast<uint32_t>(f), i << 16);
    if (std::isnan(f)) {
      const uint16_t back = FloatToBFloat16(f);
      ASSERT_TRUE(std::isnan(BFloat16ToFloat(back))) << std::hex << i;
      ASSERT_EQ(back & 0x8000, b & 0x8000) << std::hex << i;
      continue;
    }
    ASSERT_EQ(FloatToBFloat16(f), b) << std::hex << i;
  }
}

TEST(BFloat16Conversion, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBFloat16(1.0f), 0x3f80);
  // 1 + 2^-8 is the tie between 1 and 1 + 2^-7 -> 1 (even).
  EXPECT_EQ(FloatToBFloat16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  // 1 + 3 * 2^-8: tie between 1 + 2^-7 (odd) and 1 + 2^-6 -> up.
  EXPECT_EQ(FloatToBFloat16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_EQ(FloatToBFloat16(std::nextafter(1.0f + std::ldexp(1.0f, -8), 2.0f)),
            0x3f81);
  EXPECT_EQ(FloatToBFloat16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(FloatToBFloat16(-0.0f), 0x8000);
  EXPECT_TRUE(std::isnan(BFloat16ToFloat(
      FloatToBFloat16(std::numeric_limits<float>::quiet_NaN()))));
  // A NaN whose payload lies only in the low 16 bits stays NaN.
  EXPECT_TRUE(std::isnan(
      BFloat16ToFloat(FloatToBFloat16(std::bit_cast<float>(0x7f800001u)))));
}

TEST(BFloat16Conversion, MatchesReferenceRoundingOnManyFloats) {
  for (uint64_t bits = 0; bits <= 0xffffffffu; bits += 9973) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(bits));
    if (std::isnan(f)) continue;
    const uint32_t lo = static_cast<uint32_t>(bits) & 0xffff0000u;
    const double dlo =
        std::fabs(static_cast<double>(f) - std::bit_cast<float>(lo));
    // One bfloat16 ulp at f's exponent (inf at the top: dlo is then 0).
    const bool is_subnormal_or_zero = (lo & 0x7f800000u) == 0;
    const double ulp =
        is_subnormal_or_zero
            ? std::ldexp(1.0, -133)
            : std::ldexp(1.0, std::ilogb(std::bit_cast<float>(lo)) - 7);
    uint32_t want = lo >> 16;
    if (dlo > ulp / 2 || (dlo == ulp / 2 && (want & 1))) ++want;
    ASSERT_EQ(FloatToBFloat16(f), want) << std::hex << bits << " = " << f;
  }
}

}  // namespace
}  // namespace kolo
