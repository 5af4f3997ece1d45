// Attention over a KV cache of f32 or int8 tokens (cache_attention_half.cpp has bf16 and f16):
// the driver (cache_driver-inl.h) over the per-target CacheWorker, compiled for every Highway
// target and dispatched at run time; the split and workspace arithmetic of every dtype.
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
#include "src/kernel/decode/paced_requests.hpp"
#include "src/kernel/flash_kernel_deps.hpp"
#include "src/runtime/cpu_features.hpp"
#include "src/runtime/element_types.hpp"
#include "src/runtime/int8_rows.hpp"
#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"
#include "src/simd/int8_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
using simd::HWY_NAMESPACE::Exp2NonPositive;
// The flash kernel's micro-kernels first: the worker is written over them.
#include "src/kernel/flash_tiles_body.inc"  // IWYU pragma: keep
// clang-format off
#include "src/kernel/decode/int8_products-inl.h"  // IWYU pragma: keep
#include "src/kernel/decode/cache_worker-inl.h"  // IWYU pragma: keep
#include "src/kernel/decode/cache_driver-inl.h"  // IWYU pragma: keep
// clang-format on

// Whether this target's int8 products run on vpdpbusd / vpdpwssd (the record's compute path).
bool Int8UsesVnniOnTarget() { return UseVnni<std::int8_t>(); }

// One instantiation per cache dtype (the element type is fixed for a whole run); bf16 and f16
// caches are cache_attention_half.cpp's.
void CacheAttentionF32OnTarget(const CacheProblem& p, float* workspace) {
  CacheAttention<simd::HWY_NAMESPACE::FloatOps, float>(p, workspace);
}
void CacheAttentionI8OnTarget(const CacheProblem& p, float* workspace) {
  CacheAttention<simd::HWY_NAMESPACE::FloatOps, std::int8_t>(p, workspace);
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace seqattn::detail {

HWY_EXPORT(CacheAttentionF32OnTarget);
HWY_EXPORT(CacheAttentionI8OnTarget);
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
  switch (p.kv.dtype) {
    case DType::kF32:
      return HWY_DYNAMIC_DISPATCH(CacheAttentionF32OnTarget)(p, workspace);
    case DType::kI8:
      return HWY_DYNAMIC_DISPATCH(CacheAttentionI8OnTarget)(p, workspace);
    case DType::kBF16:
    case DType::kF16:
      return cache_attention_half(p, workspace);
  }
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
