// simd_target(): the public name of what runtime dispatch runs, from the SIMD layer's backend.
#include <string>

#include "seqattn/attention.hpp"
#include "src/simd/highway_target.hpp"

namespace seqattn {
std::string simd_target() { return std::string(simd::backend_target_name()); }
}  // namespace seqattn
