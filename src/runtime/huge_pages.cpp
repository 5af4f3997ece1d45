#include "src/runtime/huge_pages.hpp"

#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace seqattn::detail {

#if defined(__linux__) && defined(MADV_HUGEPAGE)

void advise_huge_pages(void* data, std::size_t bytes) {
  constexpr std::uintptr_t kHuge = std::uintptr_t{1} << 21;
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = (begin + kHuge - 1) & ~(kHuge - 1);
  if (data == nullptr || begin + bytes <= first) return;
  // Linux rounds the length up to whole pages and uses huge pages only for the aligned 2 MiB
  // ranges the mapping holds entirely.
  (void)madvise(reinterpret_cast<void*>(first), begin + bytes - first, MADV_HUGEPAGE);
}

#else

void advise_huge_pages(void*, std::size_t) {}

#endif

}  // namespace seqattn::detail
