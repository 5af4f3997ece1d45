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
#include <array>
#include <atomic>
#include <cstddef>
#include <list>
#include <mutex>
#include <utility>

#include "src/simd/highway_target.hpp"

namespace seqattn::simd {
HWY_EXPORT(CurrentTargetName);

const char* dispatched_target_cstr() { return HWY_DYNAMIC_DISPATCH(CurrentTargetName)(); }
std::string dispatched_target_name() { return dispatched_target_cstr(); }

namespace {

// The names met so far. A lookup of a known name, on every run (RunRecord::simd_target, the
// workspace counts), reads the published slots without a lock; a new name is added under the
// lock, written before the count that publishes it. Names live for the process's life (never
// freed: views stay valid through static destruction); past kSlots (only a test forcing
// targets could get there) they are kept in `more` and looked up under the lock.
struct InternedNames {
  static constexpr std::size_t kSlots = 64;
  std::mutex mutex;
  std::array<const std::string*, kSlots> slots{};
  std::atomic<std::size_t> published{0};
  std::list<std::string> more;
};

bool equals(std::string_view name, std::initializer_list<std::string_view> parts) {
  for (const std::string_view part : parts) {
    if (name.substr(0, part.size()) != part) return false;
    name.remove_prefix(part.size());
  }
  return name.empty();
}

const std::string* find_slot(const InternedNames& names, std::size_t published,
                             std::initializer_list<std::string_view> parts) {
  for (std::size_t i = 0; i < published; ++i) {
    if (equals(*names.slots[i], parts)) return names.slots[i];
  }
  return nullptr;
}

}  // namespace

std::string_view interned_name(std::initializer_list<std::string_view> parts) {
  static auto* const names = new InternedNames;
  if (const std::string* hit =
          find_slot(*names, names->published.load(std::memory_order_acquire), parts)) {
    return *hit;
  }
  const std::lock_guard<std::mutex> lock(names->mutex);
  const std::size_t published = names->published.load(std::memory_order_relaxed);
  if (const std::string* hit = find_slot(*names, published, parts)) return *hit;
  for (const std::string& name : names->more) {
    if (equals(name, parts)) return name;
  }
  std::string joined;
  for (const std::string_view part : parts) joined += part;
  if (published == InternedNames::kSlots) return names->more.emplace_back(std::move(joined));
  names->slots[published] = new std::string(std::move(joined));
  names->published.store(published + 1, std::memory_order_release);
  return *names->slots[published];
}
}  // namespace seqattn::simd
#endif  // HWY_ONCE
