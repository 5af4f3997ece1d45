#include "src/runtime/scratch_floats.hpp"

#include <sys/mman.h>

#include <cstdint>
#include <limits>
#include <new>

#include "src/runtime/checked_size.hpp"
#include "src/runtime/huge_pages.hpp"

namespace seqattn::detail {
namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;

}  // namespace

void ScratchRelease::operator()(float* p) const {
  if (base != nullptr) {
    munmap(base, bytes);
  } else {
    delete[] p;
  }
}

ScratchFloats scratch_floats(std::int64_t count, const std::string& argument) {
  ScratchFloats s;
  constexpr std::size_t kMostFloats = (std::numeric_limits<std::size_t>::max() - kHugePage) / 4;
  if (count < 0 || static_cast<std::size_t>(count) > kMostFloats) {
    fail_allocation(argument, 4.0 * static_cast<double>(count));
  }
  const std::size_t bytes = static_cast<std::size_t>(count) * sizeof(float);
  if (bytes < kHugePage) {
    try {
      s.owned_ =
          std::unique_ptr<float[], ScratchRelease>(new float[static_cast<std::size_t>(count)]);
      return s;
    } catch (const std::bad_alloc&) {
    }
    fail_allocation(argument, static_cast<double>(bytes));
  }
  // One huge page more than asked, so that the block can start on a 2 MiB boundary (only
  // whole aligned 2 MiB ranges can be huge pages).
  const std::size_t mapped = bytes + kHugePage;
  void* base = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (base == MAP_FAILED) fail_allocation(argument, static_cast<double>(bytes));
  const auto address = reinterpret_cast<std::uintptr_t>(base);
  const std::uintptr_t aligned = (address + kHugePage - 1) / kHugePage * kHugePage;
  // A hint: without transparent huge pages (mode "never") the block still works in 4 KiB pages.
  advise_huge_pages(reinterpret_cast<void*>(aligned), bytes);
  s.owned_ = std::unique_ptr<float[], ScratchRelease>(reinterpret_cast<float*>(aligned),
                                                      ScratchRelease{base, mapped});
  return s;
}

}  // namespace seqattn::detail
