// Kernelised linear attention for one kv head: φ(K)ᵀV summaries through the GEMM engine, the
// element work (feature maps, stabilisers, the final division) through linear_simd.
#include "variants/linear/linear_core.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "gemm/gemm.hpp"
#include "runtime/validate.hpp"
#include "seqattn/attention.hpp"

namespace seqattn::detail {
namespace {

namespace simd = linear_simd;

// Upper bound on FAVOR+ features: keeps workspace sizes far from overflow; Performer uses
// m ~ D log D, i.e. a few hundred.
constexpr std::int64_t kMaxFeatures = 1 << 16;

std::string str(std::int64_t x) { return std::to_string(x); }

// Blocks of at most this many token rows (token-by-token decoding) skip the GEMM engine,
// whose packing costs more than their arithmetic.
constexpr std::int64_t kSmallRows = 4;

// The products below are single-threaded: the caller already runs one kv head per thread.
// c [n, cols] = beta·c + a [n, k] · b [k, cols].
void multiply(std::int64_t n, std::int64_t cols, std::int64_t k, const float* a, std::int64_t lda,
              const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc) {
  if (n <= kSmallRows) return simd::small_multiply(n, cols, k, a, lda, b, ldb, beta, c, ldc);
  sgemm(Transpose::kNo, Transpose::kNo, n, cols, k, 1.0f, a, lda, b, ldb, beta, c, ldc, 1);
}

// c [m, cols] += a [k, m]ᵀ · b [k, cols].
void accumulate_transposed(std::int64_t k, std::int64_t m, std::int64_t cols, const float* a,
                           std::int64_t lda, const float* b, std::int64_t ldb, float* c,
                           std::int64_t ldc) {
  if (k <= kSmallRows) return simd::small_transposed_accumulate(k, m, cols, a, lda, b, ldb, c, ldc);
  sgemm(Transpose::kYes, Transpose::kNo, m, cols, k, 1.0f, a, lda, b, ldb, 1.0f, c, ldc, 1);
}

// out [n, c] = a [n, m] · b [c, m]ᵀ.
void multiply_transposed(std::int64_t n, std::int64_t c, std::int64_t m, const float* a,
                         const float* b, float* out) {
  if (n <= kSmallRows && c <= kSmallRows) {
    std::fill(out, out + n * c, 0.0f);
    for (std::int64_t i = 0; i < n; ++i) simd::add_row_dots(b, c, m, m, a + i * m, out + i * c);
    return;
  }
  sgemm(Transpose::kNo, Transpose::kYes, n, c, m, 1.0f, a, m, b, m, 0.0f, out, c, 1);
}

// map(rows [row0, row0 + n) of src · mul) as a contiguous [n, cols] matrix.
void gather_mapped(const ConstRows& src, std::int64_t row0, std::int64_t n, float mul,
                   simd::RowMap map, float* dst) {
  simd::scaled_map_rows(src.row(row0), n, src.cols, src.row_stride, src.col_stride, mul, map, dst);
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
    gather_mapped(q, row0, n, plan.root_scale, row_map(plan.map), phi);
    return phi;
  }
  const std::int64_t m = plan.features;
  gather_mapped(q, row0, n, plan.root_scale, simd::RowMap::kScale, ws.x.data());
  multiply(n, m, plan.dim, ws.x.data(), plan.dim, plan.favor_t.data(), m, 0.0f, phi, m);
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
    gather_mapped(k, row0, n, plan.root_scale, row_map(plan.map), phi);
    return;
  }
  const std::int64_t m = plan.features;
  gather_mapped(k, row0, n, plan.root_scale, simd::RowMap::kScale, ws.x.data());
  multiply(n, m, plan.dim, ws.x.data(), plan.dim, plan.favor_t.data(), m, 0.0f, phi, m);
  simd::half_squared_norms(ws.x.data(), n, plan.dim, plan.dim, ws.norms.data());
  raise_key_shifts(plan, state, n, ws);
  simd::exp_shifted_rows(phi, n, m, m, ws.norms.data(), state.key_shift.data());
}

// Value rows [row0, row0 + n) as a GEMM operand: read in place when rows are contiguous.
const float* value_rows(const ConstRows& v, std::int64_t row0, std::int64_t n, LinearWorkspace& ws,
                        std::int64_t* ld) {
  if (v.col_stride == 1 && v.row_stride >= v.cols) {
    *ld = v.row_stride;
    return v.row(row0);
  }
  gather_mapped(v, row0, n, 1.0f, simd::RowMap::kScale, ws.values.data());
  *ld = v.cols;
  return ws.values.data();
}

// Adds the keys whose features are in ws.phi_k to the state.
void absorb_keys(const LinearPlan& plan, HeadState& state, std::int64_t n, const float* values,
                 std::int64_t ldv, LinearWorkspace& ws) {
  const std::int64_t m = plan.features;
  accumulate_transposed(n, m, plan.dim_v, ws.phi_k.data(), m, values, ldv, state.summary.data(),
                        plan.dim_v);
  simd::add_column_sums(ws.phi_k.data(), n, m, m, state.normaliser.data());
  state.keys += n;
}

// The keys of the current causal chunk (features in ws.phi_k): query row i sees its first
// clamp(i + visible_base, 0, count) keys.
struct ChunkKeys {
  std::int64_t count = 0;
  const float* values = nullptr;
  std::int64_t ldv = 0;
  std::int64_t visible_base = 0;
};

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
  multiply(n, dv, m, phi, m, state.summary.data(), dv, 0.0f, num, dv);
  std::fill(den, den + n, 0.0f);
  simd::add_row_dots(phi, n, m, m, state.normaliser.data(), den);
  if (chunk != nullptr) {
    const std::int64_t c = chunk->count;
    float* scores = ws.scores.data();
    multiply_transposed(n, c, m, phi, ws.phi_k.data(), scores);
    for (std::int64_t r = 0; r < n; ++r) {
      const std::int64_t visible = std::clamp(row0 + r + chunk->visible_base, std::int64_t{0}, c);
      std::fill(scores + r * c + visible, scores + (r + 1) * c, 0.0f);
    }
    multiply(n, dv, c, scores, c, chunk->values, chunk->ldv, 1.0f, num, dv);
    simd::add_row_sums(scores, n, c, c, den);
  }
  simd::divide_rows(num, n, dv, dv, den, plan.epsilon, plan.map == FeatureMap::kFavor,
                    out.row(row0), out.row_stride, out.col_stride);
}

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

}  // namespace

std::int64_t validate_linear_spec(const LinearSpec& spec, std::int64_t dim) {
  if (!std::isfinite(spec.epsilon) || spec.epsilon < 0.0f) {
    fail("spec.epsilon", "a finite number >= 0", std::to_string(spec.epsilon));
  }
  const MatrixView<const float>& w = spec.favor_matrix;
  const bool has_matrix = w.data != nullptr || w.rows != 0 || w.cols != 0;
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
                            float scale) {
  LinearPlan plan;
  plan.map = spec.feature_map;
  plan.dim = dim;
  plan.dim_v = dim_v;
  plan.features = validate_linear_spec(spec, dim);
  // Every head's summary is features x D_v (HeadState::reset sizes it inside thread regions).
  checked_product({plan.features, dim_v}, "num_features x D_v (the summary)");
  plan.root_scale = std::sqrt(scale);
  plan.epsilon = spec.epsilon;
  plan.blocking = simd::blocking();
  if (plan.map == FeatureMap::kFavor) {
    const std::int64_t m = plan.features;
    std::vector<float> drawn;
    MatrixView<const float> w = spec.favor_matrix;
    if (w.data == nullptr) {
      drawn = favor_random_matrix(m, dim, spec.seed);
      w = {drawn.data(), m, dim, dim};
    }
    plan.favor_t =
        checked_vector<float>(checked_product({dim, m}, "D x num_features"), "spec.num_features");
    for (std::int64_t r = 0; r < m; ++r) {
      for (std::int64_t c = 0; c < dim; ++c) plan.favor_t[c * m + r] = w.row(r)[c];
    }
  }
  return plan;
}

void HeadState::reset(const LinearPlan& plan) {
  summary.assign(static_cast<std::size_t>(plan.features * plan.dim_v), 0.0f);
  normaliser.assign(static_cast<std::size_t>(plan.features), 0.0f);
  key_shift.assign(static_cast<std::size_t>(plan.features),
                   -std::numeric_limits<float>::infinity());
  keys = 0;
}

LinearWorkspace::LinearWorkspace(const LinearPlan& plan) {
  const linear_simd::Blocking& b = plan.blocking;
  const std::int64_t key_rows = std::max(b.key_block, b.causal_chunk);
  const std::int64_t rows = std::max(key_rows, b.query_block);
  auto sized = [](std::int64_t n) { return std::vector<float>(static_cast<std::size_t>(n)); };
  x = sized(rows * plan.dim);
  phi_q = sized(b.query_block * plan.features);
  phi_k = sized(key_rows * plan.features);
  norms = sized(rows);
  values = sized(key_rows * plan.dim_v);
  num = sized(b.query_block * plan.dim_v);
  den = sized(b.query_block);
  scores = sized(b.query_block * b.causal_chunk);
  col_max = sized(plan.features);
  factors = sized(plan.features);
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
    chunk.values = value_rows(v, c0, n, ws, &chunk.ldv);
    chunk.visible_base = offset - c0 + 1;
    // Query i belongs to the chunk holding its last visible key i + offset; the last chunk
    // also takes every query that sees all keys.
    const std::int64_t first = std::clamp(c0 - offset, state_only, seq_q);
    const std::int64_t end = last ? seq_q : std::clamp(c0 + n - offset, first, seq_q);
    emit_range(plan, state, group, first, end, &chunk, ws);
    absorb_keys(plan, state, n, chunk.values, chunk.ldv, ws);
  }
}

void linear_absorb_all(const LinearPlan& plan, HeadState& state, const ConstRows& k,
                       const ConstRows& v, LinearWorkspace& ws) {
  const std::int64_t block = plan.blocking.key_block;
  for (std::int64_t r = 0; r < k.rows; r += block) {
    const std::int64_t n = std::min(block, k.rows - r);
    key_features(plan, state, k, r, n, ws);
    std::int64_t ldv = 0;
    const float* values = value_rows(v, r, n, ws, &ldv);
    absorb_keys(plan, state, n, values, ldv, ws);
  }
}

void linear_emit_rows(const LinearPlan& plan, const HeadState& state, const ConstRows& q,
                      const MutRows& out, std::int64_t row0, std::int64_t n, LinearWorkspace& ws) {
  emit_queries(plan, state, q, out, row0, n, nullptr, ws);
}

}  // namespace seqattn::detail
