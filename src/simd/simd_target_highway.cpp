// The Highway build's target name: every kernel runs on the Highway target dispatch picks.
#include <string>

#include "src/simd/highway_target.hpp"

namespace seqattn::simd {
std::string backend_target_name() { return "highway:" + dispatched_target_name(); }
}  // namespace seqattn::simd
