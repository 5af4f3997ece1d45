// Attention over a KV cache: the driver (work items, split-KV merge, threads) over the
// per-target CacheWorker, compiled for every Highway target and dispatched at run time.
// The xsimd build uses this Highway kernel too (see docs/architecture.md).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernel/decode/cache_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <omp.h>

#include <array>
#include <utility>

#include "src/kernel/decode/cache_attention.hpp"
#include "src/kernel/decode/int8_products_avx512vnni.hpp"
#include "src/kernel/flash_kernel_deps.hpp"
#include "src/runtime/cpu_features.hpp"
#include "src/runtime/element_types.hpp"
#include "src/runtime/int8_rows.hpp"
#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
using simd::HWY_NAMESPACE::Exp2NonPositive;
// The flash kernel's micro-kernels first: the worker is written over them.
#include "src/kernel/flash_tiles_body.inc"  // IWYU pragma: keep
// clang-format off
#include "src/kernel/decode/int8_products-inl.h"  // IWYU pragma: keep
#include "src/kernel/decode/cache_worker-inl.h"  // IWYU pragma: keep
// clang-format on

// Combines the chunks of one row tile in chunk order (fixed, so bitwise reproducible):
// O = Σ_c O_c·2^(m_c - M), l = Σ_c l_c·2^(m_c - M), M = max_c m_c.
template <class Worker>
void MergeChunks(const CacheProblem& p, Worker& worker, const float* partials, std::int64_t chunks,
                 std::int64_t rows, float* acc) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t dv_pad = p.kv.dv_pad;
  const CachePartialLayout part(p.split.row_tile, dv_pad);
  for (std::int64_t r = 0; r < rows; ++r) {
    float max = kNegInf;
    for (std::int64_t c = 0; c < chunks; ++c)
      max = std::max(max, partials[c * part.total + part.max + r]);
    float sum = 0.0f;
    std::fill(acc, acc + dv_pad, 0.0f);
    for (std::int64_t c = 0; c < chunks && max != kNegInf; ++c) {
      const float* chunk = partials + c * part.total;
      if (chunk[part.max + r] == kNegInf) continue;  // the chunk saw no key of this row
      const float w = std::exp2(chunk[part.max + r] - max);
      sum += w * chunk[part.sum + r];
      for (std::int64_t d = 0; d < dv_pad; ++d)
        acc[static_cast<size_t>(d)] += w * chunk[r * dv_pad + d];
    }
    worker.store_row(r, acc, max, sum);
  }
}

// Whether an int8 cache's products run on vpdpbusd / vpdpwssd: on a target at least AVX3_DL
// (Ice Lake, Zen 4 and later; Highway's later AVX3_ZEN4 and AVX3_SPR too) of a CPU and OS with
// AVX512-VNNI. The AVX3 target keeps the portable micro-kernels, so on a VNNI machine the tests
// compare both.
template <class Elem>
bool UseVnni() {
  if constexpr (std::is_same_v<Elem, std::int8_t> && HWY_TARGET <= HWY_AVX3_DL) {
    const CpuFeatures& cpu = cpu_features();
    return cpu.avx512_vnni && cpu.os_avx512;
  } else {
    return false;
  }
}

// Work items are (batch, kv head, row tile, chunk); every output row is written by one thread
// (directly, or by the merge of its tile's chunks in chunk order).
template <class Ops, class Elem>
void CacheAttention(const CacheProblem& p, float* workspace) {
  const CacheSplit& split = p.split;
  const bool vnni = UseVnni<Elem>();
  const bool merge = split.chunk_keys != 0;
  const std::int64_t tiles = p.kv.batch * p.kv.heads_kv * split.row_tiles;
  const std::int64_t items = tiles * split.chunks;
  const CacheScratchLayout layout(split.row_tile, p.kv.dim, p.kv.dv_pad);
  const CachePartialLayout part(split.row_tile, p.kv.dv_pad);
  float* partials = workspace + p.threads * layout.total;
  // The (b, hk, first row, rows) of a tile: sequence b has group · S_q(b) rows per kv head, so
  // a tile past a ragged sequence's rows has none (n <= 0).
  auto tile_rows = [&](std::int64_t tile, std::int64_t& b, std::int64_t& hk, std::int64_t& r0) {
    const std::int64_t pair = tile / split.row_tiles;
    b = pair / p.kv.heads_kv;
    hk = pair % p.kv.heads_kv;
    r0 = tile % split.row_tiles * split.row_tile;
    return std::min(split.row_tile, p.group * p.seq_q(b) - r0);
  };
  auto item = [&](CacheWorker<Ops, Elem>& worker, std::int64_t it) {
    const std::int64_t tile = it / split.chunks, c = it % split.chunks;
    std::int64_t b, hk, r0;
    const std::int64_t n = tile_rows(tile, b, hk, r0);
    if (n <= 0 || c >= ChunksOf(p, b)) return;  // past the sequence's rows or keys
    const CacheKeyRange keys = KeysOfChunk(p, b, c);
    worker.run(b, hk, r0, n, keys.lo, keys.hi);
    if (merge) {
      worker.store_partial(partials + it * part.total);
    } else {
      worker.store_out();
    }
  };
  // `thread`'s output accumulator region is free once its items are done (the workspace is
  // the caller's: a run allocates nothing). The index is passed, not asked of OpenMP: the
  // one-thread path runs outside our region, maybe inside a caller's, where
  // omp_get_thread_num() is the caller's thread number, not 0.
  auto merge_tile = [&](CacheWorker<Ops, Elem>& worker, int thread, std::int64_t tile) {
    float* acc = workspace + thread * layout.total + layout.o;
    std::int64_t b, hk, r0;
    const std::int64_t n = tile_rows(tile, b, hk, r0);
    if (n <= 0) return;
    worker.bind_rows(b, hk, r0, n);
    MergeChunks(p, worker, partials + tile * split.chunks * part.total, ChunksOf(p, b), n, acc);
  };
  // One thread runs plain loops outside any OpenMP construct: libgomp allocates a team for
  // every parallel region it enters (an if(false) one too) and a work share for an orphaned
  // loop, and a decode step must not allocate.
  const int team = static_cast<int>(std::min<std::int64_t>(p.threads, items));
  if (team <= 1) {
    CacheWorker<Ops, Elem> worker(p, workspace, vnni);
    for (std::int64_t it = 0; it < items; ++it) item(worker, it);
    if (merge) {
      for (std::int64_t tile = 0; tile < tiles; ++tile) merge_tile(worker, 0, tile);
    }
    return;
  }
#pragma omp parallel num_threads(team)
  {
    const int thread = omp_get_thread_num();
    CacheWorker<Ops, Elem> worker(p, workspace + thread * layout.total, vnni);
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t it = 0; it < items; ++it) item(worker, it);
    if (merge) {
#pragma omp for schedule(static)
      for (std::int64_t tile = 0; tile < tiles; ++tile) merge_tile(worker, thread, tile);
    }
  }
}

// Whether this target's int8 products run on vpdpbusd / vpdpwssd (the record's compute path).
bool Int8UsesVnniOnTarget() { return UseVnni<std::int8_t>(); }

// One instantiation per cache dtype: the element type is fixed for a whole run.
void CacheAttentionOnTarget(const CacheProblem& p, float* workspace) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  switch (p.kv.dtype) {
    case DType::kI8:
      return CacheAttention<Ops, std::int8_t>(p, workspace);
    case DType::kBF16:
      return CacheAttention<Ops, bfloat16>(p, workspace);
    case DType::kF16:
      return CacheAttention<Ops, float16>(p, workspace);
    case DType::kF32:
      return CacheAttention<Ops, float>(p, workspace);
  }
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace seqattn::detail {

HWY_EXPORT(CacheAttentionOnTarget);
HWY_EXPORT(Int8UsesVnniOnTarget);

std::string_view cache_compute_path(DType dtype) {
  if (dtype != DType::kI8) return "fp32";
  return HWY_DYNAMIC_DISPATCH(Int8UsesVnniOnTarget)() ? "int8-vnni" : "int8";
}

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
    floats += batch * heads_kv * split.row_tiles * split.chunks *
              CachePartialLayout(split.row_tile, dv_pad).total;
  }
  return static_cast<std::size_t>(floats);
}

void cache_attention(const CacheProblem& p, float* workspace) {
  HWY_DYNAMIC_DISPATCH(CacheAttentionOnTarget)(p, workspace);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
