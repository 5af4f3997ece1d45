// Names the SIMD target that runtime dispatch actually runs: the name is produced by a
// function compiled for every target and reached through the same HWY_DYNAMIC_DISPATCH as the
// kernels, so it follows the CPU and any hwy::SetSupportedTargetsForTest restriction.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/simd_target.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <string>

HWY_BEFORE_NAMESPACE();
namespace seqattn::simd::HWY_NAMESPACE {

const char* CurrentTargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace seqattn::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/simd/highway_target.hpp"

namespace seqattn::simd {
HWY_EXPORT(CurrentTargetName);

std::string dispatched_target_name() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }
}  // namespace seqattn::simd
#endif  // HWY_ONCE
