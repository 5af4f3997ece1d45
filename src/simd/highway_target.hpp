// The Highway target runtime dispatch runs (for every kernel still on Highway: in the xsimd
// build that is all but the dense/sliding-window flash kernel).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace seqattn::simd {

// hwy::TargetName of the dispatched target, following any hwy::SetSupportedTargetsForTest.
std::string dispatched_target_name();
const char* dispatched_target_cstr();  // the same, static storage

// What simd_target() (src/api/simd_target.cpp) reports: "highway:<target>", or in the xsimd
// build "xsimd:<arch>+highway:<target>". Defined by the backend's own file. A view of storage
// that lives as long as the process, so RunRecord::simd_target allocates nothing.
std::string_view backend_target_name();

// The concatenation of `parts`, stored once per distinct value for the process's lifetime
// (a handful: one per target a test forces); a lookup of a known value allocates nothing and
// takes no lock (every run looks its target's name up).
std::string_view interned_name(std::initializer_list<std::string_view> parts);

}  // namespace seqattn::simd
