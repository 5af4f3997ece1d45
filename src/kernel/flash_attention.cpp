// Compiles the flash kernel (the shared source, over the Highway ops) for every Highway
// target and dispatches to the best one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernel/flash_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "src/kernel/flash_kernel_deps.hpp"
#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
using simd::HWY_NAMESPACE::Exp2NonPositive;
#include "src/kernel/flash_driver_body.inc"  // IWYU pragma: keep

void FlashForwardOnTarget(const Problem& p, const KeyStructure& keys) {
  FlashForward<simd::HWY_NAMESPACE::FloatOps>(p, keys);
}
}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/kernel/flash_attention.hpp"

namespace seqattn::detail {

HWY_EXPORT(FlashForwardOnTarget);

void flash_forward(const Problem& p, const KeyStructure& keys) {
  HWY_DYNAMIC_DISPATCH(FlashForwardOnTarget)(p, keys);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
