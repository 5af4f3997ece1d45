// The Highway target runtime dispatch runs (for every kernel still on Highway: in the xsimd
// build that is all but the dense/sliding-window flash kernel).
#pragma once

#include <string>

namespace seqattn::simd {

// hwy::TargetName of the dispatched target, following any hwy::SetSupportedTargetsForTest.
std::string dispatched_target_name();

}  // namespace seqattn::simd
