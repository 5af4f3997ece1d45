// 16-bit storage types and the element types of the public API. Standard C++ only: the
// conversions are bit manipulation with round-to-nearest-even, identical on every CPU (the
// kernels widen with F16C or integer shifts and give the same floats).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace seqattn {

// bfloat16: the top 16 bits of an IEEE float (8 exponent bits, 7 mantissa bits).
struct bfloat16 {
  std::uint16_t bits = 0;

  constexpr bfloat16() = default;
  // Round to nearest, ties to even; NaN stays NaN (quieted, sign kept); overflow gives ±Inf.
  constexpr explicit bfloat16(float f) : bits(from_float(f)) {}
  static constexpr bfloat16 from_bits(std::uint16_t b) {
    bfloat16 h;
    h.bits = b;
    return h;
  }
  // Exact.
  constexpr operator float() const {
    return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
  }

  static constexpr std::uint16_t from_float(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x0040u);
    const std::uint32_t rounded = u + 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(rounded >> 16);
  }
};

// float16: IEEE binary16 (5 exponent bits, 10 mantissa bits, subnormals, max 65504).
struct float16 {
  std::uint16_t bits = 0;

  constexpr float16() = default;
  // Round to nearest, ties to even (subnormals included); |f| >= 65520 gives ±Inf; NaN stays
  // NaN (quieted, sign and the top payload bits kept).
  constexpr explicit float16(float f) : bits(from_float(f)) {}
  static constexpr float16 from_bits(std::uint16_t b) {
    float16 h;
    h.bits = b;
    return h;
  }
  // Exact.
  constexpr operator float() const { return to_float(bits); }

  static constexpr std::uint16_t from_float(float f) {
    const std::uint32_t u = std::bit_cast<std::uint32_t>(f);
    const std::uint32_t sign = (u >> 16) & 0x8000u;
    std::uint32_t x = u & 0x7fffffffu;
    if (x > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u | ((x >> 13) & 0x3ffu));
    if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // >= 65520: Inf
    if (x < 0x38800000u) {
      // Below 2^-14 (fp16 subnormal or zero): adding 0.5 puts the fp16 subnormal unit 2^-24 in
      // the last mantissa place of the sum, so the float addition does the rounding (ties to
      // even) and the low mantissa bits are the result (1024 = the smallest normal).
      const float sum = std::bit_cast<float>(x) + 0.5f;
      return static_cast<std::uint16_t>(sign | (std::bit_cast<std::uint32_t>(sum) - 0x3f000000u));
    }
    const std::uint32_t odd = (x >> 13) & 1u;
    x += 0xc8000fffu + odd;  // exponent rebias by -112 (mod 2^32), round to nearest even
    return static_cast<std::uint16_t>(sign | (x >> 13));
  }

  static constexpr float to_float(std::uint16_t h) {
    const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
    const std::uint32_t exponent = (h >> 10) & 0x1fu, mantissa = h & 0x3ffu;
    if (exponent == 0x1f) return std::bit_cast<float>(sign | 0x7f800000u | (mantissa << 13));
    if (exponent == 0) {
      const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;  // exact (< 2^10 units)
      return std::bit_cast<float>(sign | std::bit_cast<std::uint32_t>(magnitude));
    }
    return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
  }
};

static_assert(sizeof(bfloat16) == 2 && sizeof(float16) == 2);

// The element type of a tensor (kF32, kBF16, kF16), or of a KvCache's storage, which may also
// be kI8: int8 with one fp32 scale per token and kv head (KvCacheShape::dtype). A tensor view
// of dtype kI8 is refused with an Error naming its dtype.
enum class DType { kF32, kBF16, kF16, kI8 };

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::kF32;
}
template <>
constexpr DType dtype_of<bfloat16>() {
  return DType::kBF16;
}
template <>
constexpr DType dtype_of<float16>() {
  return DType::kF16;
}

template <class T>
concept Element =
    std::is_same_v<T, float> || std::is_same_v<T, bfloat16> || std::is_same_v<T, float16>;

// Bytes of one element (kI8: without its share of the scales).
constexpr std::size_t dtype_size(DType t) { return t == DType::kF32 ? 4 : t == DType::kI8 ? 1 : 2; }

// "f32", "bf16", "f16", "i8" (the CLI's --dtype / --kv-dtype spellings).
constexpr std::string_view to_string(DType t) {
  return t == DType::kF32 ? "f32" : t == DType::kBF16 ? "bf16" : t == DType::kI8 ? "i8" : "f16";
}

}  // namespace seqattn
