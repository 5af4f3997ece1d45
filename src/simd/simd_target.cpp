// Names the SIMD target runtime dispatch picks on this CPU.
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <string>

#include "seqattn/attention.hpp"

namespace seqattn {

std::string simd_target() {
  // Highway dispatches to the best target that is both compiled in and supported by the CPU;
  // target bits are ordered so that the lowest set bit is the best one.
  const std::int64_t usable = hwy::SupportedTargets() & HWY_TARGETS;
  const std::int64_t best = usable & -usable;
  return std::string("highway:") + hwy::TargetName(best);
}

}  // namespace seqattn
