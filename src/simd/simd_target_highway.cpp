// The Highway build's target name: every kernel runs on the Highway target dispatch picks.
#include <string>

#include "src/simd/highway_target.hpp"

namespace seqattn::simd {
std::string_view backend_target_name() {
  return interned_name({"highway:", dispatched_target_cstr()});
}
}  // namespace seqattn::simd
