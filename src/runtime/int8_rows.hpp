// Symmetric int8 quantisation of one row: a token's key or value in one kv head, as a KvCache
// of dtype kI8 stores it (docs/architecture.md, "int8 KV"). Scalar: a row is quantised once, on
// append, and read many times by the decode kernel, which multiplies by the scale.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace seqattn::detail {

// The row's scale: max|x| / 127, so that the largest element maps to ±127 (0 for a zero row).
// Not finite when an element is not (or the maximum overflows): the caller refuses the row.
inline float int8_row_scale(const float* x, std::int64_t n) {
  float amax = 0.0f;
  bool finite = true;
  for (std::int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  return finite ? amax / 127.0f : std::numeric_limits<float>::quiet_NaN();
}

// dst[i·stride] = x[i] / scale rounded to nearest (ties to even), clamped to [-127, 127]
// (-128 is never used, so the grid is symmetric); all zeros for scale 0.
inline void quantize_int8_row(const float* x, std::int64_t n, float scale, std::int8_t* dst,
                              std::int64_t stride) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float q = scale > 0.0f ? std::nearbyint(x[i] / scale) : 0.0f;
    dst[i * stride] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
  }
}

// A key row into slot `slot` of an int8 key block stored in quads ([ceil(n/4)][64][4],
// src/kernel/decode/packed_kv.hpp): element d at (d/4)·4·block + 4·slot + d%4, the padding
// elements of the last quad written as 0 (a reused block holds an earlier token's bytes).
inline void quantize_int8_key(const float* x, std::int64_t n, float scale, std::int8_t* block,
                              std::int64_t slot, std::int64_t block_tokens) {
  constexpr std::int64_t kQuad = 4;
  const std::int64_t padded = (n + kQuad - 1) / kQuad * kQuad;
  for (std::int64_t d = 0; d < padded; ++d) {
    std::int8_t* dst = block + d / kQuad * kQuad * block_tokens + kQuad * slot + d % kQuad;
    if (d < n) {
      quantize_int8_row(x + d, 1, scale, dst, 1);
    } else {
      *dst = 0;
    }
  }
}

// A value row into slot `slot` of an int8 value block stored in pairs of tokens
// ([block/2][dv_pad][2], src/kernel/decode/packed_kv.hpp): element d at
// (slot/2)·2·dv_pad + 2d + slot%2; columns n..dv_pad written as 0.
inline void quantize_int8_value(const float* x, std::int64_t n, float scale, std::int8_t* block,
                                std::int64_t slot, std::int64_t dv_pad) {
  std::int8_t* pair = block + slot / 2 * 2 * dv_pad + slot % 2;
  quantize_int8_row(x, n, scale, pair, 2);
  for (std::int64_t d = n; d < dv_pad; ++d) pair[2 * d] = 0;
}

}  // namespace seqattn::detail
