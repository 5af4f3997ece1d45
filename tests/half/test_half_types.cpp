// bfloat16 and float16: exact widening, round-to-nearest-even narrowing (ties, subnormals,
// overflow), NaN and ±Inf, checked over every 16-bit pattern and against a brute-force
// nearest-value search on random floats.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

#include "seqattn/half.hpp"

namespace seqattn {
namespace {

template <class T>
bool is_nan_bits(std::uint16_t bits) {
  return std::isnan(static_cast<float>(T::from_bits(bits)));
}

template <class T>
void check_every_pattern_round_trips() {
  for (std::uint32_t b = 0; b <= 0xffff; ++b) {
    const auto bits = static_cast<std::uint16_t>(b);
    const float f = static_cast<float>(T::from_bits(bits));
    const std::uint16_t back = T(f).bits;
    if (is_nan_bits<T>(bits)) {
      ASSERT_TRUE(is_nan_bits<T>(back)) << std::hex << b;
      ASSERT_EQ(back & 0x8000, bits & 0x8000) << "NaN keeps its sign " << std::hex << b;
    } else {
      ASSERT_EQ(back, bits) << std::hex << b;
    }
  }
}

TEST(HalfTypes, EveryBfloat16PatternRoundTrips) { check_every_pattern_round_trips<bfloat16>(); }
TEST(HalfTypes, EveryFloat16PatternRoundTrips) { check_every_pattern_round_trips<float16>(); }

// The rounding rule by search: the result is a nearest representable value, and on a tie the
// one with an even last bit. Neighbours are the adjacent bit patterns of the same sign.
template <class T>
void check_nearest_even(float x) {
  const T r(x);
  const double rx = static_cast<float>(r);
  if (std::isinf(rx)) {
    const float largest = static_cast<float>(T::from_bits(static_cast<std::uint16_t>(
        (r.bits & 0x8000) | (std::is_same_v<T, float16> ? 0x7bff : 0x7f7f))));
    const double next_up = std::is_same_v<T, float16> ? 65536.0 : std::ldexp(1.0, 128);
    // Overflow to Inf happens at and above the midpoint between the largest finite and 2^emax+1.
    EXPECT_GE(std::abs(static_cast<double>(x)), (std::abs(largest) + next_up) / 2) << x;
    return;
  }
  const double err = std::abs(rx - x);
  for (const int step : {-1, 1}) {
    const int bits = r.bits + step;
    if ((bits & 0x7fff) == 0x7fff || bits < 0 || ((bits ^ r.bits) & 0x8000) != 0) continue;
    const double n = static_cast<float>(T::from_bits(static_cast<std::uint16_t>(bits)));
    if (std::isinf(n) || std::isnan(n)) continue;
    const double other = std::abs(n - x);
    ASSERT_LE(err, other) << x << " rounded to " << rx << " but " << n << " is nearer";
    if (err == other) {
      ASSERT_EQ(r.bits & 1, 0) << x << ": a tie goes to the even pattern";
    }
  }
}

TEST(HalfTypes, RoundingIsNearestEvenOnRandomFloats) {
  std::mt19937 gen(11);
  std::uniform_int_distribution<std::uint32_t> bits;
  for (int i = 0; i < 400000; ++i) {
    float x = std::bit_cast<float>(bits(gen));
    if (std::isnan(x)) continue;
    check_nearest_even<bfloat16>(x);
    // Spread over fp16's range (normals, subnormals, overflow) rather than float's.
    x = std::ldexp(std::abs(x) > 0 ? x / std::ldexp(1.0f, std::ilogb(x)) : 0.0f,
                   static_cast<int>(gen() % 48) - 30);
    check_nearest_even<float16>(x);
  }
}

TEST(HalfTypes, TiesSubnormalsAndOverflow) {
  // Halfway between 1 and the next value: ties to the even neighbour (1), and from an odd
  // neighbour up to the even one.
  EXPECT_EQ(bfloat16(1.0f + 0x1p-8f).bits, bfloat16(1.0f).bits);
  EXPECT_EQ(static_cast<float>(bfloat16(1.0f + 3 * 0x1p-8f)), 1.0f + 0x1p-6f);
  EXPECT_EQ(float16(1.0f + 0x1p-11f).bits, 0x3c00);
  EXPECT_EQ(static_cast<float>(float16(1.0f + 3 * 0x1p-11f)), 1.0f + 0x1p-9f);
  // fp16 subnormals: 2^-24 is the smallest; 2^-25 is a tie with 0 (even); 3·2^-25 → 2·2^-24.
  EXPECT_EQ(float16(0x1p-24f).bits, 0x0001);
  EXPECT_EQ(float16(0x1p-25f).bits, 0x0000);
  EXPECT_EQ(float16(3 * 0x1p-25f).bits, 0x0002);
  EXPECT_EQ(float16(-0x1p-24f).bits, 0x8001);
  EXPECT_EQ(static_cast<float>(float16::from_bits(0x03ff)), 1023 * 0x1p-24f);
  EXPECT_EQ(float16(0x1p-14f).bits, 0x0400);  // the smallest normal
  // Overflow: 65504 is fp16's largest; 65519 rounds down, 65520 (the midpoint) to Inf.
  EXPECT_EQ(float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(float16(65519.0f).bits, 0x7bff);
  EXPECT_EQ(float16(65520.0f).bits, 0x7c00);
  EXPECT_EQ(float16(-1e30f).bits, 0xfc00);
  EXPECT_EQ(bfloat16(std::numeric_limits<float>::max()).bits, 0x7f80);
  // Infinities and NaN.
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(bfloat16(inf).bits, 0x7f80);
  EXPECT_EQ(bfloat16(-inf).bits, 0xff80);
  EXPECT_EQ(float16(inf).bits, 0x7c00);
  EXPECT_EQ(float16(-inf).bits, 0xfc00);
  EXPECT_TRUE(std::isinf(static_cast<float>(float16::from_bits(0xfc00))));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(nan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(float16(nan))));
  // A NaN whose payload lies only in the low bits must not become Inf.
  const float low_payload_nan = std::bit_cast<float>(0x7f800001u);
  EXPECT_TRUE(std::isnan(static_cast<float>(bfloat16(low_payload_nan))));
  EXPECT_TRUE(std::isnan(static_cast<float>(float16(low_payload_nan))));
  // Signed zeros.
  EXPECT_EQ(bfloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(float16(-0.0f).bits, 0x8000);
}

TEST(HalfTypes, ConversionsAreConstexpr) {
  static_assert(bfloat16(1.5f).bits == 0x3fc0);
  static_assert(float16(1.5f).bits == 0x3e00);
  static_assert(static_cast<float>(float16::from_bits(0x3e00)) == 1.5f);
  static_assert(dtype_size(DType::kBF16) == 2 && dtype_of<float16>() == DType::kF16);
  constexpr float16 tiny(0x1p-24f);
  EXPECT_EQ(tiny.bits, 0x0001);
}

}  // namespace
}  // namespace seqattn
