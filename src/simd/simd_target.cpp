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
#include <list>
#include <mutex>

#include "src/simd/highway_target.hpp"

namespace seqattn::simd {
HWY_EXPORT(CurrentTargetName);

const char* dispatched_target_cstr() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }
std::string dispatched_target_name() { return dispatched_target_cstr(); }

std::string_view interned_name(std::initializer_list<std::string_view> parts) {
  static std::mutex mutex;
  // Nodes never move and the list is never destroyed: views of it stay valid for the whole
  // process, static destruction included.
  static auto* const names = new std::list<std::string>;
  auto equals = [&](const std::string& name) {
    std::string_view rest = name;
    for (const std::string_view part : parts) {
      if (rest.substr(0, part.size()) != part) return false;
      rest.remove_prefix(part.size());
    }
    return rest.empty();
  };
  const std::lock_guard<std::mutex> lock(mutex);
  for (const std::string& name : *names) {
    if (equals(name)) return name;
  }
  std::string& name = names->emplace_back();
  for (const std::string_view part : parts) name += part;
  return name;
}
}  // namespace seqattn::simd
#endif  // HWY_ONCE
