// The per-head algorithm of kernelised linear attention, shared by the batch variant
// (linear_variant.cpp) and the public recurrent state (linear_state.cpp). Knows nothing about
// batches, threads or the public views: it works on one kv head's key/value rows and the query
// rows of the heads that share it (GQA).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"
#include "src/kernel/scratch_arena.hpp"
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
  // √scale, applied to q and k before φ: elu1/relu take the raw vectors unless the caller set a
  // scale (Katharopoulos et al. 2020); FAVOR+ approximates softmax(q·k·scale), default 1/√D.
  float root_scale = 1.0f;
  float epsilon = 0.0f;
  // FAVOR+ Wᵀ [D, m], contiguous (null otherwise); drawn ones are shared between plans.
  std::shared_ptr<const std::vector<float>> favor_t;
  linear_simd::Blocking blocking;
  // RoPE of the (q, k, v) call (null: none), set per run by the batch variant: each q and k row
  // is rotated at its position after the √scale and before φ, while it is gathered.
  const RopeTables* rope = nullptr;
};

// Throws Error (kInvalidArgument, naming `spec.*`) unless num_features is 0 or valid for the
// feature map, favor_matrix is [m, D] with a valid row stride (FAVOR+ only) and epsilon is
// finite and >= 0. Returns m.
std::int64_t validate_linear_spec(const LinearSpec& spec, std::int64_t dim);
// `scale` is the caller's (already checked finite and > 0), or nullopt for the map's default.
LinearPlan make_linear_plan(const LinearSpec& spec, std::int64_t dim, std::int64_t dim_v,
                            std::optional<float> scale);

// The running sums of one (batch, kv head): summary = Σ_j φ(k_j) v_jᵀ [m, D_v] and
// normaliser = Σ_j φ(k_j) [m]. For FAVOR+, feature r of every key is stored multiplied by
// exp(-key_shift[r]), key_shift[r] being the largest log-feature w_r·k - |k|²/2 seen so far
// for that feature: when a new key raises it, row r of the state is rescaled by
// exp(old - new) <= 1, so no stored value overflows however long the sequence, and the
// largest key of every feature contributes exactly 1 (its normaliser never underflows). The
// queries take exp(key_shift[r]) back into their features (see query_features), so the
// shifts cancel exactly. elu1/relu leave key_shift unused.
struct HeadState {
  Carved<float> summary, normaliser, key_shift;
  std::int64_t keys = 0;  // keys absorbed so far
  HeadState() = default;
  HeadState(const LinearPlan& plan, ScratchArena& arena);
  void reset(const LinearPlan& plan);
  // This state becomes `other` (contents copied; both carved for the same plan).
  void copy_from(const HeadState& other);
};

// Per-thread scratch buffers sized once for a plan.
class LinearWorkspace {
 public:
  LinearWorkspace() = default;
  LinearWorkspace(const LinearPlan& plan, ScratchArena& arena);
  Carved<float> x, phi_q, phi_k, phi_kt, norms, values, num, den, scores, col_max, factors;
  // Cache lines of the next block, requested while this one computes: ahead[0, ahead_count).
  Carved<const float*> ahead;
  std::int64_t ahead_count = 0;
};

// The query heads (and their outputs) that share one kv head: `heads` of them, carved for the
// plan's group size and filled per task (query_group).
struct QueryGroup {
  Carved<ConstRows> q;
  Carved<MutRows> out;
  QueryGroup() = default;
  QueryGroup(std::int64_t heads, ScratchArena& arena) : q(arena, heads), out(arena, heads) {}
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

// Causal attention in segments of plan.blocking.segment keys (elu1 and relu: no stabiliser),
// so that threads can share one kv head. Phase 1 (linear_segment_keys, any order) computes a
// segment's features, values and per-chunk sums; a prefix over the segment totals, in
// order, gives each segment the state of the keys before it (linear_add_state); phase 2
// (linear_segment_queries, any order) finishes the segment's queries from that state and its
// stored chunk sums, nothing recomputed. Segments and chunks are fixed by the plan, so the
// result is the same whichever thread runs which segment.
struct SegmentKeys {
  std::int64_t first_key = 0, keys = 0;  // the segment's key rows [first_key, first_key + keys)
  Carved<float> phi_t, values;           // per chunk [m, chunk] (transposed); [segment, D_v]
  Carved<float> summaries, normalisers;  // per chunk: [m, D_v], [m]
  Carved<std::uint8_t> finite_values;    // per chunk: no Inf or NaN among its values
  HeadState total;                       // the sum over its chunks
  SegmentKeys() = default;
  SegmentKeys(const LinearPlan& plan, ScratchArena& arena);
};
void linear_segment_keys(const LinearPlan& plan, const ConstRows& k, const ConstRows& v,
                         std::int64_t first_key, std::int64_t keys, SegmentKeys& seg,
                         LinearWorkspace& ws);
// state += more (summary, normaliser, key count).
void linear_add_state(HeadState& state, const HeadState& more);
// state: the keys before the segment on entry, and with the segment's on return. Also emits
// the queries that see no key when the segment is the first; `last_segment` takes the queries
// that see every key.
void linear_segment_queries(const LinearPlan& plan, HeadState& state, const SegmentKeys& seg,
                            const QueryGroup& group, std::int64_t offset, bool last_segment,
                            LinearWorkspace& ws);

}  // namespace seqattn::detail
