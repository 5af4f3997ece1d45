// Transparent huge pages for the KV caches' storage. A decode step streams the whole cache,
// and with 4 KiB pages every page is a TLB miss and a restart of the hardware prefetcher:
// over 64 MiB of an int8 cache (S_k 32768, H_kv 8, D 128, one thread, Zen 4) 2 MiB pages took
// the step from 8.6 to 6.6 ms. Debian's default THP mode is "madvise", so the cache asks.
#pragma once

#include <cstddef>

namespace seqattn::detail {

// Asks Linux for huge pages over [data, data + bytes) from its first 2 MiB boundary on, before
// the memory is first touched (the caches' storage; the scratch of scratch_floats.cpp). Advice
// only: where THP is off (or not Linux) the memory stays in small pages and nothing else changes,
// so a refusal is not an error.
void advise_huge_pages(void* data, std::size_t bytes);

}  // namespace seqattn::detail
