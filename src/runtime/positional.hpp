// What the kernels need of AttentionOptions::rope and ::alibi, validated and precomputed once
// per plan: RoPE's cos/sin per query and key row, ALiBi's slopes per query head. The rotation
// itself (rotate_row) is inline so that each kernel applies it while it packs q and k, in the
// kernel's own target code.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/options.hpp"

namespace seqattn::detail {

struct Problem;

// cos/sin of the rows of a (q, k, v) call: row r's pair p at [r·half + p].
struct RopeRows {
  std::vector<float> q_cos, q_sin;  // [S_q, half]
  std::vector<float> k_cos, k_sin;  // [S_k, half]
};

struct RopeTables {
  std::int64_t dims = 0, half = 0;
  RopeLayout layout = RopeLayout::kHalves;
  std::vector<double> frequencies;  // [half]: theta^(-2p/dims) / linear_scaling
  RotaryEmbedding options;          // positions and offset, validated
  std::int64_t seq_q = 0, seq_k = 0;
  // Built on the first (q, k, v) run of the plan and kept: a plan that only ever runs over a
  // KvCache (whose S_k is the capacity) never pays for S_k rows it does not use.
  const RopeRows& rows() const;

 private:
  mutable std::once_flag rows_once_;
  mutable RopeRows rows_;
};

struct PositionalTables {
  std::optional<RopeTables> rope;
  std::vector<float> alibi_slopes;  // per query head (natural units); empty = no ALiBi
  bool alibi_symmetric = false;
  bool has_rope() const { return rope.has_value(); }
  bool has_alibi() const { return !alibi_slopes.empty(); }
};

inline const RopeTables* rope_of(const PositionalTables* t) {
  return t != nullptr && t->rope ? &*t->rope : nullptr;
}

// ALiBi's bias (natural units) of query head h at key distance j - i.
inline double alibi_bias(const PositionalTables& t, std::int64_t h, std::int64_t distance) {
  const double slope = t.alibi_slopes[static_cast<std::size_t>(h)];
  const auto d = static_cast<double>(distance);
  return t.alibi_symmetric ? -slope * (d < 0 ? -d : d) : slope * d;
}

// Validates options.rope / options.alibi against the planned problem's shape (Error naming
// `options.rope.*` / `options.alibi.*`) and builds their tables; null when neither is set.
std::shared_ptr<const PositionalTables> make_positional(const AttentionOptions& options,
                                                        const Problem& shape);
// A run over a KvCache: positions are the cache's, so explicit ones are refused (Error).
void check_positional_over_cache(const PositionalTables* tables);

// For the variants that do not apply the encodings yet: Error(kNotImplemented) naming
// options.rope / options.alibi when the problem carries them.
void refuse_positional(const Problem& p, const std::string& variant);

// The problem with q and k replaced by RoPE-rotated contiguous copies (kept in q_store,
// k_store) and the rotation dropped from its tables (ALiBi kept): for the paths that read q
// and k many times per row (the weights pass), where rotating in place would repeat work.
Problem with_rotated_inputs(const Problem& p, std::vector<float>& q_store,
                            std::vector<float>& k_store);

// A KvCache's rope (KvCacheShape::rope): validated (Error naming `shape.rope.*`; explicit
// positions refused), frequencies only.
void init_cache_rope(RopeTables& t, const RotaryEmbedding& r, std::int64_t dim);
// Whether two rope options rotate the same way (theta, dims, layout, offset, scaling).
bool same_rotation(const RotaryEmbedding& a, const RotaryEmbedding& b, std::int64_t dim);

// cos/sin of every pair at `position`: angle = position · frequencies[p], computed in double
// and rounded once.
void rope_angles(const RopeTables& t, std::int64_t position, float* cos, float* sin);

// dst[0, dim) = mul · src[d·step] rotated by the pairs (cos, sin) of one row: the first
// t.dims dimensions in t.layout, the rest copied. dst must not alias src. Always inlined, so
// that inside a kernel's target region the loops are vectorised for that target (called, it
// ran as baseline SSE2 code, once per query row of every work item and per key).
[[gnu::always_inline]] inline void rotate_row(const float* src, std::int64_t step, std::int64_t dim,
                                              float mul, const RopeTables& t, const float* cos,
                                              const float* sin, float* dst) {
  if (step == 1) {  // contiguous rows vectorise
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = src[d] * mul;
  } else {
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = src[d * step] * mul;
  }
  const std::int64_t half = t.half;
  if (t.layout == RopeLayout::kHalves) {
    float* x = dst;
    float* y = dst + half;
    for (std::int64_t p = 0; p < half; ++p) {
      const float a = x[p], b = y[p];
      x[p] = a * cos[p] - b * sin[p];
      y[p] = a * sin[p] + b * cos[p];
    }
  } else {
    for (std::int64_t p = 0; p < half; ++p) {
      const float a = dst[2 * p], b = dst[2 * p + 1];
      dst[2 * p] = a * cos[p] - b * sin[p];
      dst[2 * p + 1] = a * sin[p] + b * cos[p];
    }
  }
}

}  // namespace seqattn::detail
