// What an AttentionPlan holds, and the cache path's per-run helpers (plan_cache.cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "seqattn/plan.hpp"
#include "src/kernel/decode/cache_attention.hpp"
#include "src/kernel/decode/cache_rule.hpp"
#include "src/runtime/path_counts.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

struct PlanState {
  AttentionShape shape;
  AttentionOptions options;  // as planned: no per-call parts (those are RunArgs)
  Problem planned;           // shapes only (null data); its mask holds the causal flag
  VariantSpec spec;          // resolved: never AutoSpec
  Variant id = Variant::kDense;
  std::shared_ptr<const std::string> reason;  // shared with every RunRecord of the plan
  const AttentionVariant* impl = nullptr;
  std::shared_ptr<const PreparedVariant> prepared;
  Cost cost;
  // Attention over a KvCache: the row's rule (VariantRow::over_cache), unset for a variant that
  // does not run over a cache; the split and workspace of the decode kernel.
  std::optional<CacheRule> cache_rule;
  CacheSplit split;
  std::size_t cache_workspace_bytes = 0;  // the kernel's scratch (a multiple of 64)
  std::size_t paged_table_bytes = 0;      // then a paged batch's lengths and block tables
  std::size_t staging_bytes = 0;          // then fp32 copies of a half (or rounded) q and out
  // A run over q, k, v: the variant's scratch (PreparedVariant::workspace_bytes, and
  // weights_workspace_bytes for a run that asks for weights) per SIMD target and compute path,
  // unset for a variant that takes no workspace (every variant takes one today). The plan
  // counts the fp32 path on its target; another target or path (bf16 products forced onto the
  // tile path) is counted on first need (qkv_variant_bytes in plan.cpp).
  struct QkvCounts {
    PathCounts<std::optional<std::size_t>> plain, weights;
  };
  std::shared_ptr<const QkvCounts> qkv_counts = std::make_shared<const QkvCounts>();
  // Where the staging starts: what a cache run's workspace must hold at least.
  std::size_t tables_end() const { return cache_workspace_bytes + paged_table_bytes; }
};

// Everything a cache run can get wrong besides the views: the variant, mask parts the cache
// replaces, the cache's shape against the plan, a ring that no longer holds what the queries
// see. Throws Error; reads the cache only.
void check_cache_run(const PlanState& st, const KvCache& cache, const RunArgs& args);

// The same for a batch of a PagedKvCache's sequences, given its gathered view (their lengths
// and block tables): the sequence count, extents and rope against the plan, S_q <= lengths,
// and no key the rule reaches among a sequence's dropped positions (drop_front).
void check_paged_run(const PlanState& st, const PagedKvCache& cache,
                     std::span<const PagedKvCache::SequenceId> sequences, const PackedKv& kv,
                     const RunArgs& args);

// The kernel's problem for bound q/out (and lse) over the packed cache; query_lengths as
// RunArgs::query_lengths (checked).
CacheProblem cache_problem(const PlanState& st, const Problem& bound, const PackedKv& kv,
                           std::span<const std::int64_t> query_lengths);

// Writes the padding rows of a ragged run (rows past each sequence's query count): out zeros,
// lse -inf.
void clear_padding_rows(const CacheProblem& p);

// FLOPs (2·(D + D_v) per visible pair) and bytes (the K/V the rows' ranges reach, q, out).
Cost cache_cost(const CacheProblem& p);

// Threads the kernel's parallel loop runs with.
int cache_team(const CacheProblem& p);

}  // namespace seqattn::detail
