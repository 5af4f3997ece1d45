// The per-head algorithm of kernelised linear attention, shared by the batch variant
// (linear_variant.cpp) and the public recurrent state (linear_state.cpp). Knows nothing about
// batches, threads or the public views: it works on one kv head's key/value rows and the query
// rows of the heads that share it (GQA).
#pragma once

#include <cstdint>
#include <vector>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"
#include "variants/linear/linear_simd.hpp"

namespace seqattn::detail {

// A strided rows × cols matrix: one (batch, head) slice [seq, dim] of a tensor view.
template <class T>
struct StridedRows {
  T* data = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 1;
  T* row(std::int64_t r) const { return data + r * row_stride; }
};
using ConstRows = StridedRows<const float>;
using MutRows = StridedRows<float>;

template <class T>
StridedRows<T> head_rows(const TensorView<T>& t, std::int64_t b, std::int64_t h) {
  return {t.ptr(b, h, 0), t.shape[2], t.shape[3], t.strides[2], t.strides[3]};
}

// Everything the kernels need to know about a LinearSpec for given head dims, validated.
struct LinearPlan {
  FeatureMap map = FeatureMap::kElu1;
  std::int64_t dim = 0, dim_v = 0, features = 0;  // D, D_v, m
  float root_scale = 1.0f;                        // √scale, applied to q and k before φ
  float epsilon = 0.0f;
  std::vector<float> favor_t;  // FAVOR+ Wᵀ [D, m], contiguous (empty otherwise)
  linear_simd::Blocking blocking;
};

// Throws Error (kInvalidArgument, naming `spec.*`) unless num_features is 0 or valid for the
// feature map, favor_matrix is [m, D] with a valid row stride (FAVOR+ only) and epsilon is
// finite and >= 0. Returns m.
std::int64_t validate_linear_spec(const LinearSpec& spec, std::int64_t dim);
LinearPlan make_linear_plan(const LinearSpec& spec, std::int64_t dim, std::int64_t dim_v,
                            float scale);

// The running sums of one (batch, kv head): summary = Σ_j φ(k_j) v_jᵀ [m, D_v] and
// normaliser = Σ_j φ(k_j) [m]. For FAVOR+, feature r of every key is stored multiplied by
// exp(-key_shift[r]), key_shift[r] being the largest log-feature w_r·k - |k|²/2 seen so far
// for that feature: when a new key raises it, row r of the state is rescaled by
// exp(old - new) <= 1, so no stored value overflows however long the sequence, and the
// largest key of every feature contributes exactly 1 (its normaliser never underflows). The
// queries take exp(key_shift[r]) back into their features (see query_features), so the
// shifts cancel exactly. elu1/relu leave key_shift unused.
struct HeadState {
  std::vector<float> summary, normaliser, key_shift;
  std::int64_t keys = 0;  // keys absorbed so far
  void reset(const LinearPlan& plan);
};

// Per-thread scratch buffers sized once for a plan.
class LinearWorkspace {
 public:
  explicit LinearWorkspace(const LinearPlan& plan);
  std::vector<float> x, phi_q, phi_k, norms, values, num, den, scores, col_max, factors;
};

// The query heads (and their outputs) that share one kv head.
struct QueryGroup {
  std::vector<ConstRows> q;
  std::vector<MutRows> out;
};

// Causal: query i sees every key already in `state` and new key j <= i + offset. Consumes all
// rows of k/v into the state in chunks (quadratic inside a chunk, state between chunks).
void linear_causal_head(const LinearPlan& plan, HeadState& state, const ConstRows& k,
                        const ConstRows& v, const QueryGroup& group, std::int64_t offset,
                        LinearWorkspace& ws);

// Non-causal, in two phases so that the second can run in parallel over query blocks:
// absorb every row of k/v into the state, then write the outputs of query rows
// [row0, row0 + n) (n <= plan.blocking.query_block) from the finished state.
void linear_absorb_all(const LinearPlan& plan, HeadState& state, const ConstRows& k,
                       const ConstRows& v, LinearWorkspace& ws);
void linear_emit_rows(const LinearPlan& plan, const HeadState& state, const ConstRows& q,
                      const MutRows& out, std::int64_t row0, std::int64_t n, LinearWorkspace& ws);

}  // namespace seqattn::detail
