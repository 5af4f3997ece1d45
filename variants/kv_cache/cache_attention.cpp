// Attention over a KV cache: the driver (work items, split-KV merge, threads) over the
// per-target CacheWorker, compiled for every Highway target and dispatched at run time.
// The xsimd build uses this Highway kernel too (see docs/architecture.md).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "variants/kv_cache/cache_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <omp.h>

#include <array>
#include <utility>

#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"
#include "variants/dense/flash_kernel_deps.hpp"
#include "variants/kv_cache/cache_attention.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
using simd::HWY_NAMESPACE::Exp2NonPositive;
#include "variants/dense/flash_tiles_shared-inl.h"  // IWYU pragma: keep
#include "variants/kv_cache/cache_worker-inl.h"     // IWYU pragma: keep

// Chunk c of batch b: keys [first + c·chunk, +chunk) ∩ stored keys, first = base rounded down.
struct ChunkKeys {
  std::int64_t k0, k1;
};
inline ChunkKeys KeysOfChunk(const CacheProblem& p, std::int64_t b, std::int64_t c) {
  const std::int64_t base = p.kv.base(b), len = p.kv.length(b);
  if (p.split.chunk_keys == 0) return {base, len};
  const std::int64_t first = base / p.split.chunk_keys * p.split.chunk_keys;
  const std::int64_t k0 = first + c * p.split.chunk_keys;
  return {std::max(k0, base), std::min(k0 + p.split.chunk_keys, len)};
}

// Combines the chunks of one row tile in chunk order (fixed, so bitwise reproducible):
// O = Σ_c O_c·2^(m_c - M), l = Σ_c l_c·2^(m_c - M), M = max_c m_c.
template <class Ops>
void MergeChunks(const CacheProblem& p, CacheWorker<Ops>& worker, const float* partials,
                 std::int64_t chunks, std::int64_t rows, std::vector<float>& acc) {
  const std::int64_t rt = p.split.row_tile, dv_pad = p.kv.dv_pad;
  const std::int64_t stride = rt * dv_pad + 2 * CacheScratchLayout::line(rt);
  for (std::int64_t r = 0; r < rows; ++r) {
    float max = -std::numeric_limits<float>::infinity();
    for (std::int64_t c = 0; c < chunks; ++c)
      max = std::max(max, partials[c * stride + rt * dv_pad + r]);
    float sum = 0.0f;
    std::fill(acc.begin(), acc.end(), 0.0f);
    if (max != -std::numeric_limits<float>::infinity()) {
      for (std::int64_t c = 0; c < chunks; ++c) {
        const float* part = partials + c * stride;
        const float m = part[rt * dv_pad + r];
        if (m == -std::numeric_limits<float>::infinity()) continue;
        const float w = std::exp2(m - max);
        sum += w * part[rt * dv_pad + CacheScratchLayout::line(rt) + r];
        for (std::int64_t d = 0; d < dv_pad; ++d)
          acc[static_cast<size_t>(d)] += w * part[r * dv_pad + d];
      }
    }
    worker.store_row(r, acc.data(), max, sum);
  }
}

template <class Ops>
void CacheAttention(const CacheProblem& p, float* workspace) {
  const CacheSplit& split = p.split;
  const std::int64_t pairs = p.kv.batch * p.kv.heads_kv;
  const std::int64_t tiles = pairs * split.row_tiles;  // (batch, kv head, row tile)
  const std::int64_t items = tiles * split.chunks;
  const std::int64_t rows = p.group * p.seq_q();
  const CacheScratchLayout layout(split.row_tile, p.kv.dim, p.kv.dv_pad);
  const std::int64_t partial_floats =
      split.row_tile * p.kv.dv_pad + 2 * CacheScratchLayout::line(split.row_tile);
  float* partials = workspace + p.threads * layout.total;
  const int team = static_cast<int>(std::min<std::int64_t>(p.threads, items));
#pragma omp parallel num_threads(team) if (team > 1)
  {
    CacheWorker<Ops> worker(p, workspace + omp_get_thread_num() * layout.total);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t tile = item / split.chunks, c = item % split.chunks;
      const std::int64_t pair = tile / split.row_tiles, rt = tile % split.row_tiles;
      const std::int64_t b = pair / p.kv.heads_kv, hk = pair % p.kv.heads_kv;
      const ChunkKeys keys = KeysOfChunk(p, b, c);
      const std::int64_t r0 = rt * split.row_tile, n = std::min(split.row_tile, rows - r0);
      if (split.chunk_keys != 0 && keys.k0 >= keys.k1 && c > 0) continue;  // past the keys
      worker.run(b, hk, r0, n, keys.k0, keys.k1);
      if (split.chunk_keys == 0) {
        worker.store_out();
      } else {
        worker.store_partial(partials + item * partial_floats);
      }
    }
    if (split.chunk_keys != 0) {
      std::vector<float> acc(static_cast<size_t>(p.kv.dv_pad));
#pragma omp for schedule(static)
      for (std::int64_t tile = 0; tile < tiles; ++tile) {
        const std::int64_t pair = tile / split.row_tiles, rt = tile % split.row_tiles;
        const std::int64_t b = pair / p.kv.heads_kv, hk = pair % p.kv.heads_kv;
        const std::int64_t r0 = rt * split.row_tile, n = std::min(split.row_tile, rows - r0);
        std::int64_t used = 1;  // chunks holding keys of b (chunk 0 always ran)
        while (used < split.chunks && KeysOfChunk(p, b, used).k0 < KeysOfChunk(p, b, used).k1)
          ++used;
        worker.bind_rows(b, hk, r0, n);
        MergeChunks(p, worker, partials + tile * split.chunks * partial_floats, used, n, acc);
      }
    }
  }
}

void CacheAttentionOnTarget(const CacheProblem& p, float* workspace) {
  CacheAttention<simd::HWY_NAMESPACE::FloatOps>(p, workspace);
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace seqattn::detail {

HWY_EXPORT(CacheAttentionOnTarget);

// Splitting pays when fewer than ~64 (batch, kv head, row tile) items exist: 512-key chunks
// (512 KiB of K+V at D = 128) keep each item long next to its merge (rows × D_v per chunk).
CacheSplit cache_split(std::int64_t batch, std::int64_t heads_kv, std::int64_t group,
                       std::int64_t seq_q, std::int64_t capacity) {
  constexpr std::int64_t kEnoughItems = 64, kChunkKeys = 512;
  CacheSplit s;
  s.row_tiles = (group * seq_q + s.row_tile - 1) / s.row_tile;
  if (batch * heads_kv * s.row_tiles < kEnoughItems && capacity > kChunkKeys) {
    s.chunk_keys = kChunkKeys;
    s.chunks = (capacity + kChunkKeys - 1) / kChunkKeys + 1;  // +1: a ring's base is unaligned
  }
  return s;
}

std::size_t cache_workspace_floats(const CacheSplit& split, std::int64_t batch,
                                   std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                                   int threads) {
  const std::int64_t dv_pad = (dim_v + kKvColumnAlign - 1) / kKvColumnAlign * kKvColumnAlign;
  const CacheScratchLayout layout(split.row_tile, dim, dv_pad);
  std::int64_t floats = threads * layout.total;
  if (split.chunk_keys != 0) {
    const std::int64_t partial =
        split.row_tile * dv_pad + 2 * CacheScratchLayout::line(split.row_tile);
    floats += batch * heads_kv * split.row_tiles * split.chunks * partial;
  }
  return static_cast<std::size_t>(floats);
}

void cache_attention(const CacheProblem& p, float* workspace) {
  HWY_DYNAMIC_DISPATCH(CacheAttentionOnTarget)(p, workspace);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
