// Contiguous bf16/f16 → fp32 with FloatOps::LoadWide (a shift for bf16; F16C on AVX2/AVX-512
// and integer operations below for f16), so staging a half tensor costs a memory pass rather
// than a scalar conversion per element; tails use the scalar conversion.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/widen_halves.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "src/simd/highway_ops-inl.h"
#include "src/simd/widen_halves.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {

template <class Half>
void WidenRun(const Half* HWY_RESTRICT src, float* HWY_RESTRICT dst, std::int64_t n) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  constexpr std::int64_t kLanes = static_cast<std::int64_t>(Ops::kLanes);
  std::int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) Ops::StoreU(Ops::LoadWide(src + i), dst + i);
  for (; i < n; ++i) dst[i] = static_cast<float>(src[i]);
}

void WidenBf16(const bfloat16* src, float* dst, std::int64_t n) { WidenRun(src, dst, n); }
void WidenF16(const float16* src, float* dst, std::int64_t n) { WidenRun(src, dst, n); }

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seqattn::detail {

HWY_EXPORT(WidenBf16);
HWY_EXPORT(WidenF16);

void widen_bf16(const bfloat16* src, float* dst, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenBf16)(src, dst, n);
}
void widen_f16(const float16* src, float* dst, std::int64_t n) {
  HWY_DYNAMIC_DISPATCH(WidenF16)(src, dst, n);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
