#include "src/kernel/amx/vnni_packing.hpp"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "src/runtime/validate.hpp"

namespace seqattn::detail::amx {
namespace {

// bf16(scale · x) with one rounding. The product is exact in double (24 + 24 significant
// bits). Rounding it to fp32 to nearest and then to bf16 could round twice: a product just
// above a bf16 halfway point may land exactly on it in fp32 and then go to even. Rounding to
// fp32 *to odd* instead (an inexact result takes the neighbour with an odd last bit) keeps the
// sticky information, so the second rounding gives what rounding the exact product would.
bfloat16 scaled_bf16(float x, float scale) {
  const double exact = static_cast<double>(x) * static_cast<double>(scale);
  float f = static_cast<float>(exact);
  if (static_cast<double>(f) != exact && (std::bit_cast<std::uint32_t>(f) & 1u) == 0) {
    constexpr float kInf = std::numeric_limits<float>::infinity();
    f = std::nextafter(f, exact > static_cast<double>(f) ? kInf : -kInf);
  }
  return bfloat16(f);
}

void check_size(const char* name, std::size_t actual, std::size_t needed) {
  if (actual < needed) {
    fail(name, "at least " + std::to_string(needed) + " elements", std::to_string(actual));
  }
}

void check_pad(const char* name, std::size_t pad, std::size_t extent, std::size_t multiple) {
  if (pad < extent || pad % multiple != 0) {
    fail(name, "a multiple of " + std::to_string(multiple) + " >= " + std::to_string(extent),
         std::to_string(pad));
  }
}

}  // namespace

void pack_a_rows(const float* x, std::size_t row_stride, std::size_t rows, std::size_t depth,
                 float scale, std::span<bfloat16> out) {
  const std::size_t depth_pad = padded_depth(depth);
  check_size("out", out.size(), rows * depth_pad);
  for (std::size_t i = 0; i < rows; ++i) {
    const float* row = x + i * row_stride;
    bfloat16* dst = out.data() + i * depth_pad;
    if (scale == 1.0f) {
      for (std::size_t k = 0; k < depth; ++k) dst[k] = bfloat16(row[k]);
    } else {
      for (std::size_t k = 0; k < depth; ++k) dst[k] = scaled_bf16(row[k], scale);
    }
    for (std::size_t k = depth; k < depth_pad; ++k) dst[k] = bfloat16();
  }
}

void pack_b_vnni(const float* x, std::size_t row_stride, std::size_t n, std::size_t depth,
                 std::size_t n_pad, std::span<bfloat16> out) {
  check_pad("n_pad", n_pad, n, kColumnsPerTile);
  const std::size_t depth_pad = padded_depth(depth);
  check_size("out", out.size(), depth_pad * n_pad);
  // Written in buffer order; X is read down its columns, which for one block of keys (a few
  // KiB) stays in L1.
  bfloat16* dst = out.data();
  for (std::size_t k = 0; k < depth_pad; k += 2) {
    for (std::size_t j = 0; j < n_pad; ++j) {
      for (std::size_t h = 0; h < 2; ++h) {
        const bool inside = j < n && k + h < depth;
        *dst++ = inside ? bfloat16(x[j * row_stride + k + h]) : bfloat16();
      }
    }
  }
}

void pack_b_vnni_rows(const float* v, std::size_t row_stride, std::size_t keys, std::size_t cols,
                      std::size_t keys_pad, std::size_t cols_pad, std::span<bfloat16> out) {
  check_pad("keys_pad", keys_pad, keys, 2 * kColumnsPerTile);
  check_pad("cols_pad", cols_pad, cols, kColumnsPerTile);
  check_size("out", out.size(), keys_pad * cols_pad);
  bfloat16* dst = out.data();
  for (std::size_t t = 0; t < keys_pad; t += 2) {
    for (std::size_t c = 0; c < cols_pad; ++c) {
      for (std::size_t h = 0; h < 2; ++h) {
        const bool inside = c < cols && t + h < keys;
        *dst++ = inside ? bfloat16(v[(t + h) * row_stride + c]) : bfloat16();
      }
    }
  }
}

}  // namespace seqattn::detail::amx
