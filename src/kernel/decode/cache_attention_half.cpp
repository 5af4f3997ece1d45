// Attention over a KV cache of bf16 or f16 tokens: cache_attention.cpp's driver
// (cache_driver-inl.h) and worker, instantiated for the half dtypes in a translation unit of
// their own, compiled for every Highway target and dispatched at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernel/decode/cache_attention_half.cpp"
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
#include "src/kernel/flash_tiles_body.inc"  // IWYU pragma: keep
// clang-format off
#include "src/kernel/decode/int8_products-inl.h"  // IWYU pragma: keep
#include "src/kernel/decode/cache_worker-inl.h"  // IWYU pragma: keep
#include "src/kernel/decode/cache_driver-inl.h"  // IWYU pragma: keep
// clang-format on

void CacheAttentionHalfOnTarget(const CacheProblem& p, float* workspace) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  if (p.kv.dtype == DType::kBF16) {
    CacheAttention<Ops, bfloat16>(p, workspace);
  } else {
    CacheAttention<Ops, float16>(p, workspace);
  }
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE

namespace seqattn::detail {

HWY_EXPORT(CacheAttentionHalfOnTarget);

void cache_attention_half(const CacheProblem& p, float* workspace) {
  HWY_DYNAMIC_DISPATCH(CacheAttentionHalfOnTarget)(p, workspace);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
