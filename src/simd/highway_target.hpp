// The Highway target runtime dispatch runs (for every kernel still on Highway: in the xsimd
// build that is all but the dense/sliding-window flash kernel).
#pragma once

#include <string>

namespace seqattn::simd {

// hwy::TargetName of the dispatched target, following any hwy::SetSupportedTargetsForTest.
std::string dispatched_target_name();

// What simd_target() (src/api/simd_target.cpp) reports: "highway:<target>", or in the xsimd
// build "xsimd:<arch>+highway:<target>". Defined by the backend's own file.
std::string backend_target_name();

}  // namespace seqattn::simd
