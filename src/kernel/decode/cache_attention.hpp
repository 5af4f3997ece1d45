// Softmax attention of S_q new queries over a KvCache or a PagedKvCache, for the rows of the
// variant table that declare a CacheRule (dense, sliding window): the GQA grouped, split-KV
// decode kernel. See docs/architecture.md, "Attention over a KV cache".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "seqattn/tensor.hpp"
#include "src/kernel/decode/packed_kv.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "src/runtime/positional.hpp"
#include "src/simd/prefetch.hpp"

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
  // RoPE (queries rotated at offset + position; the keys were rotated on append) and ALiBi.
  const PositionalTables* positional = nullptr;

  // Ragged batches (chunked prefill and decode in one call): sequence b has query_lengths[b]
  // new queries, rows 0.. of its S_q; null = S_q each. Rows past a sequence's count are
  // padding the kernel never visits.
  const std::int64_t* query_lengths = nullptr;

  // What the kernel asks for ahead (decode_prefetch(), per CPU): the cache its requests for the
  // next blocks fill, the rows on its passes ask for into L1, and whether an int8 tile spreads
  // its requests over its four passes (paced, paced_requests.hpp). Speed only, never a result.
  DecodePrefetch prefetch;

  std::int64_t seq_q() const { return q.shape[2]; }
  std::int64_t seq_q(std::int64_t b) const {
    return query_lengths != nullptr ? query_lengths[b] : seq_q();
  }
  // Absolute position of new query i of sequence b: its queries are its last tokens.
  std::int64_t position(std::int64_t b, std::int64_t i) const {
    return kv.length(b) - seq_q(b) + i;
  }
  bool is_global(std::int64_t j) const {
    return std::binary_search(globals->begin(), globals->end(), j);
  }
};

struct CacheKeyRange {
  std::int64_t lo = 0, hi = 0;  // [lo, hi) in absolute positions; empty when hi <= lo
  bool empty() const { return hi <= lo; }
};

// The keys the query at position `pos` of sequence b sees through the contiguous rules
// (stored keys, causal limit, band; a global query row sees every stored key up to the causal
// limit). Global key columns come on top. The kernel and the cost count both use this.
inline CacheKeyRange VisibleKeys(const CacheProblem& p, std::int64_t b, std::int64_t pos) {
  CacheKeyRange r{p.kv.base(b), p.kv.length(b)};
  if (p.causal) r.hi = std::min(r.hi, pos + 1);
  if (p.banded && !p.is_global(pos)) {
    r.lo = std::max(r.lo, pos - p.left);
    r.hi = std::min(r.hi, pos + p.right + 1);
  }
  return r;
}

// Whether global key j is seen, beyond its range, by the query at `pos` of sequence b.
inline bool SeesGlobalKey(const CacheProblem& p, std::int64_t b, std::int64_t pos, std::int64_t j) {
  return j >= p.kv.base(b) && j < p.kv.length(b) && (!p.causal || j <= pos);
}

// Chunk c of sequence b holds keys [first + c·chunk, +chunk) ∩ the stored keys, where first is
// the stored base rounded down to a chunk boundary (split points are fixed positions).
inline CacheKeyRange KeysOfChunk(const CacheProblem& p, std::int64_t b, std::int64_t c) {
  const std::int64_t base = p.kv.base(b), len = p.kv.length(b), chunk = p.split.chunk_keys;
  if (chunk == 0) return {base, len};
  const std::int64_t k0 = base / chunk * chunk + c * chunk;
  return {std::max(k0, base), std::min(k0 + chunk, len)};
}

// Chunks of sequence b that hold keys (at least 1, so an empty sequence still gives its rows).
inline std::int64_t ChunksOf(const CacheProblem& p, std::int64_t b) {
  const std::int64_t chunk = p.split.chunk_keys;
  if (chunk == 0) return 1;
  const std::int64_t first = p.kv.base(b) / chunk, last = (p.kv.length(b) + chunk - 1) / chunk;
  return std::max<std::int64_t>(last - first, 1);
}

// Per-thread scratch of the cache kernel, as floats of the workspace (each region a whole
// number of 16-float lines so every region stays 64-byte aligned).
struct CacheScratchLayout {
  static constexpr std::int64_t kMaxRows = 8;  // >= every target's rows
  static constexpr std::int64_t kMaxLanes = 16;
  static std::int64_t line(std::int64_t floats) { return (floats + 15) / 16 * 16; }
  // q8: an int8 cache's queries quantised to int8, rows of dim rounded up to whole quads;
  // qf: the same queries as the int8 ops' factors (src/simd/int8_ops-inl.h: at most one int32
  // per byte; reserved for every dtype, as q8 is, since the layout does not know it: 48 KiB
  // per thread at row_tile 96, D 128); pv: an int8 cache's P·V of one tile,
  // [kMaxRows][dv_pad], before its scale.
  std::int64_t q, q8, qf, o, scores, sum_lanes, m, alpha, angles, pv, total;
  CacheScratchLayout(std::int64_t row_tile, std::int64_t dim, std::int64_t dv_pad) {
    q = 0;
    q8 = q + line(row_tile * dim);
    qf = q8 + line(row_tile * ((dim + 3) / 4));
    o = qf + line(row_tile * ((dim + 3) / 4 * 4));
    scores = o + line(row_tile * dv_pad);
    sum_lanes = scores + kMaxRows * kKvBlock;
    m = sum_lanes + row_tile * kMaxLanes;
    alpha = m + line(row_tile);
    angles = alpha + line(kMaxRows);  // RoPE: cos, sin of one query position (<= D floats)
    pv = angles + line(dim);
    total = pv + kMaxRows * dv_pad;
  }
};

// One item's partial result in the workspace (split keys): the unnormalised output
// [row_tile][dv_pad], then each row's running max (log2 units), then each row's sum.
struct CachePartialLayout {
  std::int64_t max, sum, total;
  CachePartialLayout(std::int64_t row_tile, std::int64_t dv_pad)
      : max(row_tile * dv_pad),
        sum(max + CacheScratchLayout::line(row_tile)),
        total(sum + CacheScratchLayout::line(row_tile)) {}
};

// Floats of workspace a run needs with `threads` threads (64-byte aligned by the caller).
std::size_t cache_workspace_floats(const CacheSplit& split, std::int64_t batch,
                                   std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                                   int threads);

// What a run over a cache of `dtype` computes its products on, for the run record: "fp32"
// (the cache widened exactly), or for int8 "int8-vnni" / "int8" (Q·Kᵀ and P·V in integers on
// vpdpbusd and vpdpwssd / on the portable int16 pairs of src/simd/int8_ops-inl.h, pmaddwd on
// x86, int32 lanes on SCALAR; around an fp32 softmax).
std::string_view cache_compute_path(DType dtype);

// out (and lse) of every query row; `workspace` holds cache_workspace_floats(...) floats.
void cache_attention(const CacheProblem& p, float* workspace);

// cache_attention() of a bf16 or f16 cache (cache_attention_half.cpp).
void cache_attention_half(const CacheProblem& p, float* workspace);

}  // namespace seqattn::detail
