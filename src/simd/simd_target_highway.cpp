// simd_target() of the Highway build: every kernel runs on the Highway target dispatch picks.
#include <string>

#include "seqattn/attention.hpp"
#include "src/simd/highway_target.hpp"

namespace seqattn {
std::string simd_target() { return "highway:" + simd::dispatched_target_name(); }
}  // namespace seqattn
