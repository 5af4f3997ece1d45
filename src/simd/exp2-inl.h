// Vectorised 2^x for the softmax on the Highway backend: the shared source
// (exp2_body.inc, which documents the accuracy) over FloatOps, plus the Highway-style
// entry taking a descriptor.

// Per-target include guard, toggled by foreach_target.h.
#if defined(SEQATTN_SIMD_EXP2_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_SIMD_EXP2_INL_H_
#undef SEQATTN_SIMD_EXP2_INL_H_
#else
#define SEQATTN_SIMD_EXP2_INL_H_
#endif

#include <hwy/highway.h>

#include "src/simd/highway_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

#include "src/simd/exp2_body.inc"  // IWYU pragma: keep

// 2^x for x <= 0 on full vectors of the target (DF is the target's ScalableTag<float>).
template <class DF, class VF = hn::Vec<DF>>
HWY_INLINE VF Exp2NonPositive(DF /*df*/, VF x) {
  return Exp2NonPositive<FloatOps>(x);
}

}  // namespace seqattn::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
