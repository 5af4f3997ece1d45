// What the kernels need of AttentionOptions::rope and ::alibi, validated and precomputed once
// per plan: RoPE's cos/sin per query and key row, ALiBi's slopes per query head. The rotation
// itself (rotate_row) is inline so that each kernel applies it while it packs q and k, in the
// kernel's own target code.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/options.hpp"

namespace seqattn::detail {

struct Problem;

enum class RopeSide { kQuery, kKey };

// cos/sin of the rows of a (q, k, v) call. Explicit positions: one row of pairs per q or k
// row, pair p of row r at [r·half + p]. Default positions (consecutive: query row i at
// offset + S_k - S_q + i, key row j at offset + j) in two levels, so that the tables stay in
// L2 at any S: a position base + h·kFine + l has angle (base + h·kFine)·ω + l·ω, and
// cos/sin of the sum are combined from `coarse` [h] and `fine` [l] while a row is rotated
// (4 operations a pair). Full [S, half] tables were as large as q itself, and at S = 65536
// building them on every one-shot call and streaming them from memory cost linear attention
// more than the rotation (fill_rows 6% and the tables' page faults 10% of a profile).
struct RopeRows {
  static constexpr std::int64_t kFine = 64;
  std::vector<float> q_cos, q_sin;            // [S_q, half] with explicit q_positions, else empty
  std::vector<float> k_cos, k_sin;            // [S_k, half] with explicit k_positions, else empty
  std::int64_t q_first = 0, k_first = 0;      // row 0's index into the two-level tables
  std::vector<float> coarse_cos, coarse_sin;  // [ceil(positions / kFine), half]
  std::vector<float> fine_cos, fine_sin;      // [kFine, half]
};

struct RopeTables {
  std::int64_t dims = 0, half = 0;
  RopeLayout layout = RopeLayout::kHalves;
  std::vector<double> frequencies;  // [half]: theta^(-2p/dims) / linear_scaling
  RotaryEmbedding options;          // positions and offset, validated
  std::int64_t seq_q = 0, seq_k = 0;
  // Built on the first (q, k, v) run of the plan (by AttentionPlan::run, on the calling
  // thread, before the kernels start) and kept: a plan that only ever runs over a KvCache
  // (whose S_k is the capacity) never pays for S_k rows it does not use.
  const RopeRows& rows() const;

 private:
  mutable std::once_flag rows_once_;
  mutable RopeRows rows_;
};

struct PositionalTables {
  std::shared_ptr<const RopeTables> rope;
  // The keys reach the kernel already rotated (Linformer's projected keys, each a mix of keys
  // rotated at their own positions): the kernel rotates only the queries.
  bool keys_rotated = false;
  std::vector<float> alibi_slopes;  // per query head (natural units); empty = no ALiBi
  bool alibi_symmetric = false;
  bool has_rope() const { return rope != nullptr; }
  bool has_alibi() const { return !alibi_slopes.empty(); }
};

inline const RopeTables* rope_of(const PositionalTables* t) {
  return t != nullptr ? t->rope.get() : nullptr;
}
// The rotation the kernel applies to the keys it packs: none when they arrive rotated.
inline const RopeTables* key_rope_of(const PositionalTables* t) {
  return t != nullptr && !t->keys_rotated ? t->rope.get() : nullptr;
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

// For the variants that have no score matrix to bias: Error(kUnsupported) naming
// options.alibi when the problem carries it.
void refuse_alibi(const Problem& p, std::string_view variant, std::string_view why);

// The tables of a problem whose keys the caller has already rotated (Linformer projects the
// rotated keys): the same rotation for the queries, none for the keys, no ALiBi.
std::shared_ptr<const PositionalTables> queries_only(const PositionalTables& t);

// The problem with q and k replaced by RoPE-rotated contiguous copies written to q_store and
// k_store (the caller's, one float per element of q and of k; the keys are not copied when
// they are rotated already) and no positional tables (a caller that needs ALiBi keeps the
// original's): for the paths that read q and k many times per row (the weights pass), where
// rotating in place would repeat work. Allocates nothing.
Problem with_rotated_inputs(const Problem& p, std::span<float> q_store, std::span<float> k_store);

// A KvCache's rope (KvCacheShape::rope): validated (Error naming `shape.rope.*`; explicit
// positions refused), frequencies only.
void init_cache_rope(RopeTables& t, const RotaryEmbedding& r, std::int64_t dim);
// Whether two rope options rotate the same way (theta, dims, layout, offset, scaling).
bool same_rotation(const RotaryEmbedding& a, const RotaryEmbedding& b, std::int64_t dim);

// cos/sin of every pair at `position`: angle = position · frequencies[p], computed in double
// and rounded once.
void rope_angles(const RopeTables& t, std::int64_t position, float* cos, float* sin);

// cos/sin of pair p's angle: c[p], s[p], or with kSum the angle's two parts combined,
// cos(a + b) = ca·cb - sa·sb and sin(a + b) = sa·cb + ca·sb.
template <bool kSum>
[[gnu::always_inline]] inline void pair_angle(const float* __restrict c, const float* __restrict s,
                                              const float* __restrict fine_c,
                                              const float* __restrict fine_s, std::int64_t p,
                                              float& cos, float& sin) {
  if constexpr (kSum) {
    cos = c[p] * fine_c[p] - s[p] * fine_s[p];
    sin = s[p] * fine_c[p] + c[p] * fine_s[p];
  } else {
    cos = c[p];
    sin = s[p];
  }
}

// Pairs (x[p], y[p]): the halves layout, x and y the two halves of a row (disjoint, so the
// loop vectorises without an overlap check).
template <bool kSum>
[[gnu::always_inline]] inline void rotate_halves(float* __restrict x, float* __restrict y,
                                                 std::int64_t half, const float* c, const float* s,
                                                 const float* fine_c, const float* fine_s) {
  for (std::int64_t p = 0; p < half; ++p) {
    float cos, sin;
    pair_angle<kSum>(c, s, fine_c, fine_s, p, cos, sin);
    const float a = x[p], b = y[p];
    x[p] = a * cos - b * sin;
    y[p] = a * sin + b * cos;
  }
}

// Pairs (x[2p], x[2p + 1]): the interleaved layout.
template <bool kSum>
[[gnu::always_inline]] inline void rotate_interleaved(float* __restrict x, std::int64_t half,
                                                      const float* c, const float* s,
                                                      const float* fine_c, const float* fine_s) {
  for (std::int64_t p = 0; p < half; ++p) {
    float cos, sin;
    pair_angle<kSum>(c, s, fine_c, fine_s, p, cos, sin);
    const float a = x[2 * p], b = x[2 * p + 1];
    x[2 * p] = a * cos - b * sin;
    x[2 * p + 1] = a * sin + b * cos;
  }
}

// The rotation of the first 2·half dimensions of dst in `layout`, by cos/sin c, s (or, with
// kSum, by the sums of the angles of c, s and fine_c, fine_s).
template <bool kSum>
[[gnu::always_inline]] inline void rotate_pairs(float* dst, std::int64_t half, RopeLayout layout,
                                                const float* c, const float* s, const float* fine_c,
                                                const float* fine_s) {
  if (layout == RopeLayout::kHalves) {
    rotate_halves<kSum>(dst, dst + half, half, c, s, fine_c, fine_s);
  } else {
    rotate_interleaved<kSum>(dst, half, c, s, fine_c, fine_s);
  }
}

// dst[0, dim) = mul · src[d·step].
[[gnu::always_inline]] inline void scaled_copy(const float* __restrict src, std::int64_t step,
                                               std::int64_t dim, float mul, float* __restrict dst) {
  if (step == 1) {  // contiguous rows vectorise
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = src[d] * mul;
  } else {
    for (std::int64_t d = 0; d < dim; ++d) dst[d] = src[d * step] * mul;
  }
}

// dst[0, dim) = mul · src[d·step] rotated by the pairs (cos, sin) of one row: the first
// t.dims dimensions in t.layout, the rest copied. dst must not alias src. Always inlined, so
// that inside a kernel's target region the loops are vectorised for that target (called, it
// ran as baseline SSE2 code, once per query row of every work item and per key).
[[gnu::always_inline]] inline void rotate_row(const float* src, std::int64_t step, std::int64_t dim,
                                              float mul, const RopeTables& t, const float* cos,
                                              const float* sin, float* dst) {
  scaled_copy(src, step, dim, mul, dst);
  rotate_pairs<false>(dst, t.half, t.layout, cos, sin, nullptr, nullptr);
}

// rotate_row for row r of q or k of a (q, k, v) call, at its position in `rows`.
[[gnu::always_inline]] inline void rotate_row_at(const float* src, std::int64_t step,
                                                 std::int64_t dim, float mul, const RopeTables& t,
                                                 const RopeRows& rows, RopeSide side,
                                                 std::int64_t r, float* dst) {
  scaled_copy(src, step, dim, mul, dst);
  const bool query = side == RopeSide::kQuery;
  const std::vector<float>& given_cos = query ? rows.q_cos : rows.k_cos;
  if (!given_cos.empty()) {
    const std::vector<float>& given_sin = query ? rows.q_sin : rows.k_sin;
    rotate_pairs<false>(dst, t.half, t.layout, given_cos.data() + r * t.half,
                        given_sin.data() + r * t.half, nullptr, nullptr);
    return;
  }
  const std::int64_t index = (query ? rows.q_first : rows.k_first) + r;
  const std::int64_t coarse = index / RopeRows::kFine * t.half;
  const std::int64_t fine = index % RopeRows::kFine * t.half;
  rotate_pairs<true>(dst, t.half, t.layout, rows.coarse_cos.data() + coarse,
                     rows.coarse_sin.data() + coarse, rows.fine_cos.data() + fine,
                     rows.fine_sin.data() + fine);
}

}  // namespace seqattn::detail
