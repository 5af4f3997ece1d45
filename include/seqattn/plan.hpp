// Plan → execute: everything attend() would rebuild per call (validation of the options, the
// variant choice, block structure, FAVOR+ and Linformer matrices, the decode split) is done
// once by make_plan(); AttentionPlan::run() then checks only what can differ between calls
// (pointers, strides, overlap, and the RunArgs: key lengths, masks, query counts) and runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>

#include "seqattn/attention.hpp"
#include "seqattn/kv_cache.hpp"
#include "seqattn/options.hpp"
#include "seqattn/paged_kv_cache.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

namespace detail {
struct PlanState;
}

// The element types of a run's q, k, v and out, and whether it asks for the attention weights
// (RunArgs::weights): what AttentionPlan::qkv_workspace_bytes counts for.
struct QkvDtypes {
  DType q = DType::kF32, k = DType::kF32, v = DType::kF32, out = DType::kF32;
  bool weights = false;
};

// The extents a plan is built for: q [B, H_q, S_q, D], k [B, H_kv, S_k, D],
// v [B, H_kv, S_k, D_v], out [B, H_q, S_q, D_v]. For a plan over a KvCache, S_k is the
// cache's capacity (the split of the keys over threads is derived from it).
struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;
  std::int64_t seq_q = 1;
  std::int64_t seq_k = 1;
  std::int64_t dim = 64;
  std::int64_t dim_v = 64;
  bool operator==(const AttentionShape&) const = default;
};

// The shape of a plan that attends S_q new queries over `cache`.
AttentionShape cache_shape(const KvCacheShape& cache, std::int64_t heads_q, std::int64_t seq_q);

// The shape of a plan that attends S_q new queries of each of `batch` sequences of a paged
// cache, none longer than max_length tokens (S_k: the decode split and workspace are sized by
// it, so give the longest length the plan must serve, not the pool's size).
AttentionShape paged_shape(const PagedKvCacheShape& cache, std::int64_t batch, std::int64_t heads_q,
                           std::int64_t seq_q, std::int64_t max_length);

// The per-call arguments of AttentionPlan::run (oneDNN's execute arguments): the data that may
// differ between runs of one plan. The plan holds what defines the computation (shape, variant,
// causal, scale, RoPE/ALiBi, fp32 precision, threads); one plan serves any key lengths, masks
// and outputs. Views are referenced for the duration of the call, never copied or kept. Errors
// name the mask parts as Mask's (mask.key_lengths, mask.keep, mask.bias), which attend() takes.
struct RunArgs {
  // Valid keys per batch (a padding mask): B entries in [0, S_k]; empty = all S_k keys. Runs
  // over q, k, v only: a cache's own per-sequence lengths are its key lengths.
  std::span<const std::int64_t> key_lengths{};
  // Runs over a cache only: a ragged batch (chunked prefill and decode in one call, as vLLM
  // schedules them). Sequence b has query_lengths[b] new queries, 1 <= n <= S_q, in rows
  // 0..n-1 of q[b] (its last n tokens, each at its own position); rows n..S_q-1 are padding,
  // never read, and written as zeros in out (lse -inf). Empty = S_q queries for each sequence.
  std::span<const std::int64_t> query_lengths{};
  // As Mask::keep and Mask::bias ([B or 1, H_q or 1, S_q, S_k]); runs over q, k, v only, and
  // only for variants that take them (an Error of kind kUnsupported names the one that does not).
  std::optional<TensorView<const std::uint8_t>> keep{};
  std::optional<ConstTensor> bias{};
  std::optional<Tensor> lse{};      // output [B, H_q, S_q, 1]
  std::optional<Tensor> weights{};  // output [B, H_q, S_q, S_k] (dense and sliding window)
  // Scratch of the run: at least workspace_bytes() over a cache, qkv_workspace_bytes(dtypes)
  // over q, k, v; 64-byte aligned; one per concurrent run.
  // Empty = the run allocates it. Over a KvCache or a PagedKvCache, any variant that runs there.
  // Over q, k, v: every variant, on any compute path (the packed K/V tiles and
  // each thread's scratch; Linformer's projected K and V before them; linear attention's
  // per-thread buffers and states; hierarchical attention's coarse tokens and its kernel
  // calls' scratch; LSH attention's hashes, sorted slots, accumulators and its kernel calls'
  // scratch; dense and sliding window's weights pass, when weights are asked for; then the fp32
  // copies of half views, or of f32 views fp32_precision rounds). The count depends on the
  // path the run's bf16 operands take (SEQATTN_COMPUTE_PATH may force amx-bf16 or
  // amx-emulated, whose tiles are shaped differently): size it with the same environment.
  std::span<std::byte> workspace{};
};

class AttentionPlan {
 public:
  // Scratch a run over a KvCache or PagedKvCache needs (RunArgs::workspace): the kernel's
  // scratch, a paged batch's block tables, then fp32 copies of a half q and out, the last
  // 4·B·H_q·S_q·(D + D_v) bytes (each copy rounded up to 64 bytes). With a caller's workspace
  // of this size, a steady decode loop allocates nothing on the heap, whatever the q and out
  // dtypes (tests/kv_cache/test_steady_decode.cpp counts). A workspace without the staging part
  // is accepted too (f32 q and out never use it; a half one is then staged in allocations):
  // for a long prefill chunk over a cache, it is as large as q and out in fp32.
  std::size_t workspace_bytes() const;

  // Scratch a run over q, k, v needs (RunArgs::workspace): the packed K/V tiles and each
  // planned thread's scratch at full key lengths, counted for the SIMD target runs dispatch to
  // now (each target blocks its tiles its own way; the fp32 path's count on the plan's target is
  // taken when planned, and builds the tile tables it needs then). With it,
  // a steady prefill loop allocates nothing after its first run (which builds the RoPE rows and the
  // thread team; tests/kv_cache/test_steady_prefill.cpp counts; an LSH run also builds the
  // windows of a key length its plan has not met yet). `dtypes`: the run's view types. A
  // half view (or, with fp32_precision bf16, every f32 input) is staged in an fp32 copy after
  // the variant's part (rounded up to 64 bytes): each adds 4 bytes an element, rounded up to 64
  // (bitwise the same result as without a workspace). `dtypes.weights`: the count for runs
  // that ask for weights (dense and sliding window; the weights pass's score rows and, with
  // RoPE, rotated copies of q and k share the variant's part). Counted on the path a run with
  // these dtypes takes (the first query on another path or target counts it, and builds the
  // kernel's tables for it). nullopt: weights from a variant that writes none. Error naming
  // `q.dtype` (k, v, out) for a type other than f32, bf16 or f16, or SEQATTN_COMPUTE_PATH when
  // it forces a path this CPU or build cannot run (as a run would).
  std::optional<std::size_t> qkv_workspace_bytes(const QkvDtypes& dtypes = {}) const;

  // Attention over q, k, v (shapes as planned; any strides; out must not overlap an input).
  // Throws Error, writing nothing, on a bad view. One plan may run from many threads at once.
  // This path packs K and V on every call, into RunArgs::workspace or scratch it allocates
  // (RunArgs::workspace says which variants and views take a workspace). Views may be
  // float, bfloat16 or float16: half inputs are widened to fp32 copies first and a half out is
  // rounded from an fp32 result (lse and weights are always fp32).
  RunRecord run(const AnyConstTensor& q, const AnyConstTensor& k, const AnyConstTensor& v,
                const AnyTensor& out, const RunArgs& args = {}) const;

  // S_q new queries over the tokens in `cache` (append the new tokens first): query i of
  // sequence b sits at position length(b) - S_q + i (length(b) - query_lengths[b] + i when
  // RunArgs::query_lengths is given), and causal masks, windows and global
  // tokens are taken at those positions. Dense and sliding window only; lse may be asked.
  // q and out may be float, bfloat16 or float16; the cache is read in its own dtype.
  RunRecord run(const AnyConstTensor& q, const KvCache& cache, const AnyTensor& out,
                const RunArgs& args = {}) const;

  // S_q new queries of each sequence in `sequences` over a PagedKvCache: q [B, H_q, S_q, D]
  // with B = sequences.size() (row b is sequences[b]), each sequence at its own length, as the
  // KvCache run above takes positions. Throws Error, writing nothing, for a freed or unknown
  // sequence, one longer than the plan's S_k or shorter than S_q, or a cache whose extents or
  // rope differ from the plan's.
  RunRecord run(const AnyConstTensor& q, const PagedKvCache& cache,
                std::span<const PagedKvCache::SequenceId> sequences, const AnyTensor& out,
                const RunArgs& args = {}) const;

  const AttentionShape& shape() const;
  Variant variant() const;  // the variant that runs (never kAuto)

 private:
  friend AttentionPlan make_plan(const AttentionShape&, const AttentionOptions&);
  explicit AttentionPlan(std::shared_ptr<const detail::PlanState> state);
  std::shared_ptr<const detail::PlanState> state_;
};

// Validates shape and options (every check that does not need the data) and resolves the
// variant. The per-call parts of the options must be unset: mask.key_lengths, mask.keep,
// mask.bias, weights and lse go to run() as RunArgs (attend() splits them off itself).
// Caller-given FAVOR+ and Linformer matrices are copied.
AttentionPlan make_plan(const AttentionShape& shape, const AttentionOptions& options);

// One-shot attention over a cache: make_plan(cache_shape(…), options).run(q, cache, out, …).
RunRecord attend(const AnyConstTensor& q, const KvCache& cache, const AnyTensor& out,
                 const AttentionOptions& options = {});

}  // namespace seqattn
