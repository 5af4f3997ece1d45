// Kernelised linear attention for one kv head: φ(K)ᵀV summaries and the query products through
// the tile kernel (linear_tiles), the element work (feature maps, stabilisers, the final
// division) through linear_simd.
#include "variants/linear/linear_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <string>

#include "seqattn/attention.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "variants/linear/linear_tiles.hpp"

namespace seqattn::detail {
namespace {

namespace simd = linear_simd;

// Upper bound on FAVOR+ features: keeps workspace sizes far from overflow; Performer uses
// m ~ D log D, i.e. a few hundred.
constexpr std::int64_t kMaxFeatures = 1 << 16;

// The products below are single-threaded (the caller already spreads heads and blocks over
// threads) and go through the broadcast tile kernel, whose operands stay in L1.
// c [n, cols] (+)= a [n, k] · b [k, cols].
void multiply(std::int64_t n, std::int64_t cols, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, bool accumulate, float* c, std::int64_t ldc,
              linear_tiles::Lines ahead = {}) {
  linear_tiles::multiply_broadcast(n, cols, k, a, lda, 1, b, ldb, c, ldc, accumulate, ahead);
}

// c [m, cols] += a [k, m]ᵀ · b [k, cols].
void accumulate_transposed(std::int64_t k, std::int64_t m, std::int64_t cols, const float* a,
                           std::int64_t lda, const float* b, std::int64_t ldb,
                           linear_tiles::Lines ahead, float* c, std::int64_t ldc) {
  linear_tiles::multiply_broadcast(m, cols, k, a, 1, lda, b, ldb, c, ldc, true, ahead);
}

// dst [cols, rows] (contiguous) = src [rows, cols]ᵀ, src rows ld apart: a chunk's key
// features once per chunk, so that the score products read them by contiguous rows, and the
// FAVOR+ matrix once per plan.
void transpose(const float* src, std::int64_t rows, std::int64_t cols, std::int64_t ld,
               float* dst) {
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) dst[c * rows + r] = src[r * ld + c];
  }
}

// map(rows [row0, row0 + n) of src · mul) as a contiguous [n, cols] matrix.
void gather_mapped(const ConstRows& src, std::int64_t row0, std::int64_t n, float mul,
                   simd::RowMap map, float* dst) {
  simd::scaled_map_rows(src.row(row0), n, src.cols, src.row_stride, src.col_stride, mul, map, dst);
}

// map(R·√scale·x) for rows [row0, row0 + n) of q or k, R the RoPE rotation at each row's
// position (none without RoPE), as a contiguous [n, D] matrix.
void gather_rotated(const LinearPlan& plan, RopeSide side, const ConstRows& src, std::int64_t row0,
                    std::int64_t n, simd::RowMap map, float* dst) {
  if (plan.rope == nullptr) {
    gather_mapped(src, row0, n, plan.root_scale, map, dst);
    return;
  }
  simd::rotated_map_rows(src.row(row0), n, src.cols, src.row_stride, src.col_stride,
                         plan.root_scale, map, *plan.rope, side, row0, dst);
}

// The element map of a feature map: elu1 and relu are elementwise, FAVOR+ needs x·√scale.
simd::RowMap row_map(FeatureMap map) {
  switch (map) {
    case FeatureMap::kElu1:
      return simd::RowMap::kElu1;
    case FeatureMap::kRelu:
      return simd::RowMap::kRelu;
    case FeatureMap::kFavor:
      break;
  }
  return simd::RowMap::kScale;
}

// φ(√scale·q) for query rows [row0, row0 + n) into ws.phi_q [n, m]. FAVOR+: feature r of
// query i is exp(w_r·q_i + key_shift[r] - s_i), with s_i the row maximum of the exponent: the
// key shifts cancel against the state's, s_i (which also absorbs the constant -|q|²/2 and
// 1/√m) cancels between numerator and denominator, and the feature of the largest
// exponent is 1, so the denominator is at least that feature's normaliser.
const float* query_features(const LinearPlan& plan, const HeadState& state, const ConstRows& q,
                            std::int64_t row0, std::int64_t n, LinearWorkspace& ws) {
  float* phi = ws.phi_q.data();
  if (plan.map != FeatureMap::kFavor) {
    gather_rotated(plan, RopeSide::kQuery, q, row0, n, row_map(plan.map), phi);
    return phi;
  }
  const std::int64_t m = plan.features;
  gather_rotated(plan, RopeSide::kQuery, q, row0, n, simd::RowMap::kScale, ws.x.data());
  multiply(n, m, plan.dim, ws.x.data(), plan.dim, plan.favor_t->data(), m, false, phi, m);
  simd::add_to_rows(phi, n, m, m, state.key_shift.data());
  simd::row_max(phi, n, m, m, ws.norms.data());
  simd::exp_shifted_rows(phi, n, m, m, ws.norms.data(), nullptr);
  return phi;
}

// Raises the per-feature key shifts to cover the log-features in ws.phi_k (already minus
// |k|²/2, given as row shifts in ws.norms), rescaling the state rows whose shift rose.
void raise_key_shifts(const LinearPlan& plan, HeadState& state, std::int64_t n,
                      LinearWorkspace& ws) {
  const std::int64_t m = plan.features;
  float* col_max = ws.col_max.data();
  float* factors = ws.factors.data();
  std::copy(state.key_shift.begin(), state.key_shift.end(), col_max);
  simd::column_max_shifted(ws.phi_k.data(), n, m, m, ws.norms.data(), col_max);
  bool rescale = false;
  for (std::int64_t r = 0; r < m; ++r) {
    factors[r] = 1.0f;
    if (col_max[r] > state.key_shift[r]) {
      if (state.keys > 0) factors[r] = std::exp(state.key_shift[r] - col_max[r]);
      rescale = rescale || state.keys > 0;
      state.key_shift[r] = col_max[r];
    }
  }
  if (rescale) {
    simd::scale_rows(state.summary.data(), m, plan.dim_v, plan.dim_v, factors);
    simd::scale_rows(state.normaliser.data(), m, 1, 1, factors);
  }
}

// φ(√scale·k) for key rows [row0, row0 + n) into ws.phi_k [n, m]; FAVOR+ features are
// exp(w_r·k - |k|²/2 - key_shift[r]) after raising the shifts (the common 1/√m cancels in
// the ratio and is dropped).
void key_features(const LinearPlan& plan, HeadState& state, const ConstRows& k, std::int64_t row0,
                  std::int64_t n, LinearWorkspace& ws) {
  float* phi = ws.phi_k.data();
  if (plan.map != FeatureMap::kFavor) {
    gather_rotated(plan, RopeSide::kKey, k, row0, n, row_map(plan.map), phi);
    return;
  }
  const std::int64_t m = plan.features;
  gather_rotated(plan, RopeSide::kKey, k, row0, n, simd::RowMap::kScale, ws.x.data());
  multiply(n, m, plan.dim, ws.x.data(), plan.dim, plan.favor_t->data(), m, false, phi, m);
  simd::half_squared_norms(ws.x.data(), n, plan.dim, plan.dim, ws.norms.data());
  raise_key_shifts(plan, state, n, ws);
  simd::exp_shifted_rows(phi, n, m, m, ws.norms.data(), state.key_shift.data());
}

// Value rows [row0, row0 + n) as a tile-kernel operand, always copied: the copy streams V
// from memory in order (which the hardware prefetcher follows), and the kernel then re-reads
// it from L1. Read in place, V's first touch stalled the kernel's loads (18% of its samples
// at S = 65536 on one load).
// The copy is [n, D_v], contiguous.
const float* value_rows(const ConstRows& v, std::int64_t row0, std::int64_t n,
                        LinearWorkspace& ws) {
  gather_mapped(v, row0, n, 1.0f, simd::RowMap::kScale, ws.values.data());
  return ws.values.data();
}

// Lines requested per block at most: 2 × 256 rows of 256 bytes (key or query block of K and V,
// or of Q and out, at D = 64); longer rows are requested in part.
constexpr std::size_t kAheadLines = 2048;

// Adds the cache lines of rows [row0, row0 + n) of t (clipped to its rows) to ws.ahead, up to
// its capacity: the next block, requested while this one computes (see linear_tiles).
template <class T>
void add_lines(const StridedRows<T>& t, std::int64_t row0, std::int64_t n, LinearWorkspace& ws) {
  constexpr std::int64_t kLineFloats = 16;
  const std::int64_t span = (t.cols - 1) * t.col_stride + 1;  // floats one row reaches
  const std::int64_t per_row = (span + kLineFloats - 1) / kLineFloats;
  const std::int64_t room = static_cast<std::int64_t>(ws.ahead.size()) - ws.ahead_count;
  const std::int64_t rows = std::max<std::int64_t>(0, std::min({n, t.rows - row0, room / per_row}));
  const float** out = ws.ahead.data() + ws.ahead_count;
  for (std::int64_t r = row0; r < row0 + rows; ++r) {
    const float* row = t.row(r);
    for (std::int64_t l = 0; l < per_row; ++l) *out++ = row + l * kLineFloats;
  }
  ws.ahead_count += rows * per_row;
}

// The cache lines of rows [row0, row0 + n) of a and of b: the next block of two operands.
template <class A, class B>
linear_tiles::Lines lines_ahead(const StridedRows<A>& a, const StridedRows<B>& b, std::int64_t row0,
                                std::int64_t n, LinearWorkspace& ws) {
  ws.ahead_count = 0;
  add_lines(a, row0, n, ws);
  add_lines(b, row0, n, ws);
  return {ws.ahead.data(), ws.ahead_count};
}

// Adds the keys whose features are in ws.phi_k to the state.
// values [n, D_v] contiguous.
void absorb_keys(const LinearPlan& plan, HeadState& state, std::int64_t n, const float* values,
                 LinearWorkspace& ws, linear_tiles::Lines ahead = {}) {
  const std::int64_t m = plan.features, dv = plan.dim_v;
  accumulate_transposed(n, m, dv, ws.phi_k.data(), m, values, dv, ahead, state.summary.data(), dv);
  simd::add_column_sums(ws.phi_k.data(), n, m, m, state.normaliser.data());
  state.keys += n;
}

// The keys of the current causal chunk: query row i sees its first
// clamp(i + visible_base, 0, count) keys.
struct ChunkKeys {
  std::int64_t count = 0;
  const float* phi_t = nullptr;   // their features, transposed: [m, count]
  const float* values = nullptr;  // [count, D_v], contiguous
  std::int64_t visible_base = 0;
  bool finite_values = true;  // no Inf or NaN among the values
};

// num [n, dv] += scores [n, c] · values [c, dv], row r over its visible(r) first keys only
// (visible non-decreasing in r): a masked score must not meet a value it cannot see, since
// 0 · NaN is NaN. Blocks of rows share the keys their first row sees; each row adds the few
// beyond them (fewer than kRowBlock) on its own.
template <class Visible>
void add_visible_products(std::int64_t n, std::int64_t dv, std::int64_t c, const float* scores,
                          const Visible& visible, const float* values, float* num) {
  constexpr std::int64_t kRowBlock = 8;
  for (std::int64_t r0 = 0; r0 < n; r0 += kRowBlock) {
    const std::int64_t rows = std::min(kRowBlock, n - r0), common = visible(r0);
    multiply(rows, dv, common, scores + r0 * c, c, values, dv, true, num + r0 * dv, dv);
    for (std::int64_t r = r0; r < r0 + rows; ++r) {
      const std::int64_t extra = visible(r) - common;
      if (extra == 0) continue;
      multiply(1, dv, extra, scores + r * c + common, c, values + common * dv, dv, true,
               num + r * dv, dv);
    }
  }
}

// Outputs of query rows [row0, row0 + n): the state's contribution, plus the chunk's keys
// under the causal mask when `chunk` is given.
void emit_queries(const LinearPlan& plan, const HeadState& state, const ConstRows& q,
                  const MutRows& out, std::int64_t row0, std::int64_t n, const ChunkKeys* chunk,
                  LinearWorkspace& ws) {
  const std::int64_t m = plan.features, dv = plan.dim_v;
  if (state.keys == 0 && chunk == nullptr) {  // nothing visible: zeros (the guard's value)
    for (std::int64_t r = 0; r < n; ++r) {
      for (std::int64_t c = 0; c < dv; ++c) out.row(row0 + r)[c * out.col_stride] = 0.0f;
    }
    return;
  }
  const float* phi = query_features(plan, state, q, row0, n, ws);
  float* num = ws.num.data();
  float* den = ws.den.data();
  // The next query block's rows are requested while this one computes.
  multiply(n, dv, m, phi, m, state.summary.data(), dv, false, num, dv,
           lines_ahead(q, out, row0 + n, n, ws));
  std::fill(den, den + n, 0.0f);
  simd::add_row_dots(phi, n, m, m, state.normaliser.data(), den);
  if (chunk != nullptr) {
    const std::int64_t c = chunk->count;
    float* scores = ws.scores.data();
    multiply(n, c, m, phi, m, chunk->phi_t, c, false, scores, c);
    const auto visible = [&](std::int64_t r) {
      return std::clamp(row0 + r + chunk->visible_base, std::int64_t{0}, c);
    };
    for (std::int64_t r = 0; r < n; ++r)
      std::fill(scores + r * c + visible(r), scores + (r + 1) * c, 0.0f);
    // With finite values a masked (zero) score adds exactly 0, so one product does.
    if (chunk->finite_values) {
      multiply(n, dv, c, scores, c, chunk->values, dv, true, num, dv);
    } else {
      add_visible_products(n, dv, c, scores, visible, chunk->values, num);
    }
    simd::add_row_sums(scores, n, c, c, den);
  }
  simd::divide_rows(num, n, dv, dv, den, plan.epsilon, plan.map == FeatureMap::kFavor,
                    out.row(row0), out.row_stride, out.col_stride);
}

// dst[0, n) += src[0, n).
void add_to(float* dst, const float* src, std::int64_t n) { simd::add_to_rows(dst, 1, n, n, src); }

// emit_queries over rows [first, last) of every head in the group, in query blocks.
void emit_range(const LinearPlan& plan, const HeadState& state, const QueryGroup& group,
                std::int64_t first, std::int64_t last, const ChunkKeys* chunk,
                LinearWorkspace& ws) {
  const std::int64_t block = plan.blocking.query_block;
  for (std::size_t g = 0; g < group.q.size(); ++g) {
    for (std::int64_t r = first; r < last; r += block) {
      emit_queries(plan, state, group.q[g], group.out[g], r, std::min(block, last - r), chunk, ws);
    }
  }
}

// The queries of the causal chunk of keys [c0, c0 + chunk.count): query i goes with the chunk
// holding its last visible key i + offset, the last chunk also takes every query that sees
// all keys, and queries [0, state_only) (which see none) were emitted before.
void emit_chunk_queries(const LinearPlan& plan, const HeadState& state, const QueryGroup& group,
                        const ChunkKeys& chunk, std::int64_t c0, std::int64_t offset,
                        std::int64_t state_only, bool last, LinearWorkspace& ws) {
  const std::int64_t seq_q = group.q.front().rows;
  const std::int64_t first = std::clamp(c0 - offset, state_only, seq_q);
  const std::int64_t end = last ? seq_q : std::clamp(c0 + chunk.count - offset, first, seq_q);
  emit_range(plan, state, group, first, end, &chunk, ws);
}

using SharedMatrix = std::shared_ptr<const std::vector<float>>;

// Wᵀ [D, m] of a [m, D] matrix, contiguous.
SharedMatrix transposed(const MatrixView<const float>& w) {
  auto t = std::make_shared<std::vector<float>>(checked_vector<float>(
      checked_product({w.cols, w.rows}, "D x num_features"), "spec.num_features"));
  transpose(w.data, w.rows, w.cols, w.row_stride, t->data());
  return t;
}

// The transposed FAVOR+ matrices drawn for the last few (m, D, seed): attend() plans on every
// call, and drawing and orthogonalising (O(m·D²)) each time cost more than attention itself at
// short lengths. Bounded in entries and in size (a larger matrix is drawn every time).
SharedMatrix drawn_favor_transpose(std::int64_t m, std::int64_t dim, std::uint64_t seed) {
  struct Entry {
    std::int64_t m, dim;
    std::uint64_t seed;
    SharedMatrix w;
  };
  constexpr std::size_t kEntries = 8;
  constexpr std::int64_t kMaxCachedFloats = std::int64_t{1} << 22;  // 16 MB
  static std::mutex mutex;
  static std::vector<Entry> recent;  // most recent last
  {
    const std::lock_guard<std::mutex> lock(mutex);
    for (auto it = recent.begin(); it != recent.end(); ++it) {
      if (it->m == m && it->dim == dim && it->seed == seed) {
        Entry hit = *it;
        recent.erase(it);
        recent.push_back(hit);
        return hit.w;
      }
    }
  }
  const std::vector<float> drawn = favor_random_matrix(m, dim, seed);
  SharedMatrix w = transposed({drawn.data(), m, dim, dim});
  if (m * dim <= kMaxCachedFloats) {
    const std::lock_guard<std::mutex> lock(mutex);
    if (recent.size() == kEntries) recent.erase(recent.begin());
    recent.push_back({m, dim, seed, w});
  }
  return w;
}

}  // namespace

std::int64_t validate_linear_spec(const LinearSpec& spec, std::int64_t dim) {
  if (!std::isfinite(spec.epsilon) || spec.epsilon < 0.0f) {
    fail("spec.epsilon", "a finite number >= 0", std::to_string(spec.epsilon));
  }
  const MatrixView<const float>& w = spec.favor_matrix;
  const bool has_matrix = w.given();
  if (spec.feature_map != FeatureMap::kFavor) {
    if (spec.num_features != 0 && spec.num_features != dim) {
      fail("spec.num_features", "0 or D = " + str(dim), str(spec.num_features),
           "elu1 and relu have exactly one feature per head dimension");
    }
    if (has_matrix) {
      fail("spec.favor_matrix", "empty (only feature_map=favor uses it)",
           "a " + str(w.rows) + " x " + str(w.cols) + " matrix");
    }
    return dim;
  }
  if (spec.num_features < 0 || spec.num_features > kMaxFeatures) {
    fail("spec.num_features", "in [1, " + str(kMaxFeatures) + "], or 0 for m = D",
         str(spec.num_features));
  }
  const std::int64_t m = spec.num_features == 0 ? dim : spec.num_features;
  if (has_matrix) {
    if (w.data == nullptr) fail("spec.favor_matrix.data", "a non-null pointer", "nullptr");
    if (w.rows != m || w.cols != dim) {
      fail("spec.favor_matrix", "shape [m, D] = [" + str(m) + ", " + str(dim) + "]",
           "[" + str(w.rows) + ", " + str(w.cols) + "]");
    }
    if (w.row_stride < w.cols) {
      fail("spec.favor_matrix.row_stride", ">= cols = " + str(w.cols), str(w.row_stride));
    }
  }
  return m;
}

LinearPlan make_linear_plan(const LinearSpec& spec, std::int64_t dim, std::int64_t dim_v,
                            std::optional<float> scale) {
  LinearPlan plan;
  plan.map = spec.feature_map;
  plan.dim = dim;
  plan.dim_v = dim_v;
  plan.features = validate_linear_spec(spec, dim);
  // Every head's summary is features x D_v (HeadState::reset sizes it inside thread regions).
  checked_product({plan.features, dim_v}, "num_features x D_v (the summary)");
  const bool favor = spec.feature_map == FeatureMap::kFavor;
  const float default_scale = favor ? 1.0f / std::sqrt(static_cast<float>(dim)) : 1.0f;
  plan.root_scale = std::sqrt(scale.value_or(default_scale));
  plan.epsilon = spec.epsilon;
  plan.blocking = simd::blocking();
  if (plan.map == FeatureMap::kFavor) {
    const MatrixView<const float>& w = spec.favor_matrix;
    plan.favor_t =
        w.data != nullptr ? transposed(w) : drawn_favor_transpose(plan.features, dim, spec.seed);
  }
  return plan;
}

HeadState::HeadState(const LinearPlan& plan, ScratchArena& arena)
    : summary(arena, plan.features * plan.dim_v),
      normaliser(arena, plan.features),
      key_shift(arena, plan.features) {}

void HeadState::reset(const LinearPlan& plan) {
  (void)plan;  // carved for it
  std::fill(summary.begin(), summary.end(), 0.0f);
  std::fill(normaliser.begin(), normaliser.end(), 0.0f);
  std::fill(key_shift.begin(), key_shift.end(), -std::numeric_limits<float>::infinity());
  keys = 0;
}

void HeadState::copy_from(const HeadState& other) {
  std::copy(other.summary.begin(), other.summary.end(), summary.begin());
  std::copy(other.normaliser.begin(), other.normaliser.end(), normaliser.begin());
  std::copy(other.key_shift.begin(), other.key_shift.end(), key_shift.begin());
  keys = other.keys;
}

LinearWorkspace::LinearWorkspace(const LinearPlan& plan, ScratchArena& arena) {
  const linear_simd::Blocking& b = plan.blocking;
  const std::int64_t key_rows = std::max(b.key_block, b.causal_chunk);
  const std::int64_t rows = std::max(key_rows, b.query_block);
  x = Carved<float>(arena, rows * plan.dim);
  phi_q = Carved<float>(arena, b.query_block * plan.features);
  phi_k = Carved<float>(arena, key_rows * plan.features);
  phi_kt = Carved<float>(arena, b.causal_chunk * plan.features);
  norms = Carved<float>(arena, rows);
  values = Carved<float>(arena, key_rows * plan.dim_v);
  num = Carved<float>(arena, b.query_block * plan.dim_v);
  den = Carved<float>(arena, b.query_block);
  scores = Carved<float>(arena, b.query_block * b.causal_chunk);
  col_max = Carved<float>(arena, plan.features);
  factors = Carved<float>(arena, plan.features);
  ahead = Carved<const float*>(arena, kAheadLines);
}

void linear_causal_head(const LinearPlan& plan, HeadState& state, const ConstRows& k,
                        const ConstRows& v, const QueryGroup& group, std::int64_t offset,
                        LinearWorkspace& ws) {
  if (group.q.empty()) return;
  const std::int64_t keys = k.rows, seq_q = group.q.front().rows;
  // Queries that see none of the new keys get the state's answer alone (zeros when empty).
  const std::int64_t state_only = keys == 0 ? seq_q : std::clamp(-offset, std::int64_t{0}, seq_q);
  emit_range(plan, state, group, 0, state_only, nullptr, ws);
  const std::int64_t chunk_len = plan.blocking.causal_chunk;
  for (std::int64_t c0 = 0; c0 < keys; c0 += chunk_len) {
    const std::int64_t n = std::min(chunk_len, keys - c0);
    const bool last = c0 + n == keys;
    key_features(plan, state, k, c0, n, ws);
    ChunkKeys chunk;
    chunk.count = n;
    transpose(ws.phi_k.data(), n, plan.features, plan.features, ws.phi_kt.data());
    chunk.phi_t = ws.phi_kt.data();
    chunk.values = value_rows(v, c0, n, ws);
    chunk.finite_values = simd::all_finite(chunk.values, n * plan.dim_v);
    chunk.visible_base = offset - c0 + 1;
    emit_chunk_queries(plan, state, group, chunk, c0, offset, state_only, last, ws);
    absorb_keys(plan, state, n, chunk.values, ws);
  }
}

void linear_absorb_all(const LinearPlan& plan, HeadState& state, const ConstRows& k,
                       const ConstRows& v, LinearWorkspace& ws) {
  const std::int64_t block = plan.blocking.key_block;
  for (std::int64_t r = 0; r < k.rows; r += block) {
    const std::int64_t n = std::min(block, k.rows - r);
    key_features(plan, state, k, r, n, ws);
    const float* values = value_rows(v, r, n, ws);
    absorb_keys(plan, state, n, values, ws, lines_ahead(k, v, r + n, block, ws));
  }
}

void linear_emit_rows(const LinearPlan& plan, const HeadState& state, const ConstRows& q,
                      const MutRows& out, std::int64_t row0, std::int64_t n, LinearWorkspace& ws) {
  emit_queries(plan, state, q, out, row0, n, nullptr, ws);
}

}  // namespace seqattn::detail

namespace seqattn::detail {

SegmentKeys::SegmentKeys(const LinearPlan& plan, ScratchArena& arena) {
  const std::int64_t g = plan.blocking.segment, c = plan.blocking.causal_chunk;
  const std::int64_t chunks = (g + c - 1) / c, m = plan.features, dv = plan.dim_v;
  phi_t = Carved<float>(arena, g * m);
  values = Carved<float>(arena, g * dv);
  summaries = Carved<float>(arena, chunks * m * dv);
  normalisers = Carved<float>(arena, chunks * m);
  finite_values = Carved<std::uint8_t>(arena, chunks);
  total = HeadState(plan, arena);
}

void linear_segment_keys(const LinearPlan& plan, const ConstRows& k, const ConstRows& v,
                         std::int64_t first_key, std::int64_t keys, SegmentKeys& seg,
                         LinearWorkspace& ws) {
  const std::int64_t m = plan.features, dv = plan.dim_v, chunk_len = plan.blocking.causal_chunk;
  seg.first_key = first_key;
  seg.keys = keys;
  seg.total.reset(plan);
  for (std::int64_t c = 0; c * chunk_len < keys; ++c) {
    const std::int64_t r0 = first_key + c * chunk_len,
                       n = std::min(chunk_len, keys - c * chunk_len);
    float* phi_t = seg.phi_t.data() + c * chunk_len * m;  // [m, n]
    float* values = seg.values.data() + c * chunk_len * dv;
    float* summary = seg.summaries.data() + c * m * dv;
    float* normaliser = seg.normalisers.data() + c * m;
    gather_rotated(plan, RopeSide::kKey, k, r0, n, row_map(plan.map), ws.phi_k.data());
    transpose(ws.phi_k.data(), n, m, m, phi_t);
    gather_mapped(v, r0, n, 1.0f, simd::RowMap::kScale, values);
    seg.finite_values[static_cast<std::size_t>(c)] = simd::all_finite(values, n * dv);
    // The next chunk's keys and values are requested while this one's summary computes.
    linear_tiles::multiply_broadcast(m, dv, n, phi_t, n, 1, values, dv, summary, dv, false,
                                     lines_ahead(k, v, r0 + n, n, ws));
    std::fill(normaliser, normaliser + m, 0.0f);
    simd::add_row_sums(phi_t, m, n, n, normaliser);
    add_to(seg.total.summary.data(), summary, m * dv);
    add_to(seg.total.normaliser.data(), normaliser, m);
  }
  seg.total.keys = keys;
}

void linear_add_state(HeadState& state, const HeadState& more) {
  add_to(state.summary.data(), more.summary.data(), static_cast<std::int64_t>(more.summary.size()));
  add_to(state.normaliser.data(), more.normaliser.data(),
         static_cast<std::int64_t>(more.normaliser.size()));
  state.keys += more.keys;
}

void linear_segment_queries(const LinearPlan& plan, HeadState& state, const SegmentKeys& seg,
                            const QueryGroup& group, std::int64_t offset, bool last_segment,
                            LinearWorkspace& ws) {
  if (group.q.empty()) return;
  const std::int64_t m = plan.features, dv = plan.dim_v, chunk_len = plan.blocking.causal_chunk;
  const std::int64_t seq_q = group.q.front().rows, end_key = seg.first_key + seg.keys;
  // Queries that see no key at all (before the first, or none visible) take the empty state.
  const std::int64_t state_only =
      end_key == 0 ? seq_q : std::clamp(-offset, std::int64_t{0}, seq_q);
  if (seg.first_key == 0) emit_range(plan, state, group, 0, state_only, nullptr, ws);
  for (std::int64_t c = 0; c * chunk_len < seg.keys; ++c) {
    const std::int64_t c0 = seg.first_key + c * chunk_len;
    const std::int64_t n = std::min(chunk_len, end_key - c0);
    const bool last = last_segment && c0 + n == end_key;
    ChunkKeys chunk;
    chunk.count = n;
    chunk.phi_t = seg.phi_t.data() + c * chunk_len * m;
    chunk.finite_values = seg.finite_values[static_cast<std::size_t>(c)] != 0;
    chunk.values = seg.values.data() + c * chunk_len * dv;
    chunk.visible_base = offset - c0 + 1;
    emit_chunk_queries(plan, state, group, chunk, c0, offset, state_only, last, ws);
    add_to(state.summary.data(), seg.summaries.data() + c * m * dv, m * dv);
    add_to(state.normaliser.data(), seg.normalisers.data() + c * m, m);
    state.keys += n;
  }
}

}  // namespace seqattn::detail
