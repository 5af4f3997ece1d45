// Softmax attention of S_q new queries over a KvCache (dense or sliding window): the GQA
// grouped, split-KV decode kernel. See docs/architecture.md, "Attention over a KV cache".
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "seqattn/tensor.hpp"
#include "variants/kv_cache/packed_kv.hpp"

namespace seqattn::detail {

// How the work is cut, fixed by the plan's shape (never by the thread count, so the result
// is bitwise the same for any number of threads).
//  row_tile:   rows per work item; the rows of one (batch, kv head) are its group·S_q query
//              rows (row r = query r / group of head r % group), so the heads sharing a kv
//              head read every K/V tile once, as one multi-row tile.
//  chunk_keys: keys per work item when the keys are split (a multiple of 64), else 0.
//  chunks:     the most chunks a (batch, kv head, row tile) can have (workspace sizing).
inline constexpr std::int64_t kCacheRowTile = 96;  // a multiple of every target's rows

struct CacheSplit {
  std::int64_t row_tile = kCacheRowTile;
  std::int64_t row_tiles = 1;
  std::int64_t chunk_keys = 0;
  std::int64_t chunks = 1;
};

// The split for a plan: keys are split only when (batch, kv head, row tile) items are too few
// to keep several cores busy; the chunk length is fixed, so split points are positions.
CacheSplit cache_split(std::int64_t batch, std::int64_t heads_kv, std::int64_t group,
                       std::int64_t seq_q, std::int64_t capacity);

struct CacheProblem {
  ConstTensor q;  // [B, H_q, S_q, D]
  Tensor out;     // [B, H_q, S_q, D_v]
  std::optional<Tensor> lse;
  PackedKv kv;
  float scale = 1.0f;
  bool causal = false;
  bool banded = false;                       // sliding window: [pos - left, pos + right]
  std::int64_t left = 0, right = 0;          // clamped so pos ± w cannot overflow
  const std::vector<std::int64_t>* globals;  // sorted absolute positions (never null)
  std::int64_t group = 1;                    // query heads per kv head
  CacheSplit split;
  int threads = 1;

  std::int64_t seq_q() const { return q.shape[2]; }
};

// Per-thread scratch of the cache kernel, as floats of the workspace (each region a whole
// number of 16-float lines so every region stays 64-byte aligned).
struct CacheScratchLayout {
  static constexpr std::int64_t kMaxRows = 8;  // >= every target's rows
  static constexpr std::int64_t kMaxLanes = 16;
  static std::int64_t line(std::int64_t floats) { return (floats + 15) / 16 * 16; }
  std::int64_t q, o, scores, sum_lanes, m, alpha, total;
  CacheScratchLayout(std::int64_t row_tile, std::int64_t dim, std::int64_t dv_pad) {
    q = 0;
    o = q + line(row_tile * dim);
    scores = o + line(row_tile * dv_pad);
    sum_lanes = scores + kMaxRows * kKvBlock;
    m = sum_lanes + row_tile * kMaxLanes;
    alpha = m + line(row_tile);
    total = alpha + line(kMaxRows);
  }
};

// Floats of workspace a run needs with `threads` threads (64-byte aligned by the caller).
std::size_t cache_workspace_floats(const CacheSplit& split, std::int64_t batch,
                                   std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                                   int threads);

// out (and lse) of every query row; `workspace` holds cache_workspace_floats(...) floats.
void cache_attention(const CacheProblem& p, float* workspace);

}  // namespace seqattn::detail
