// Software prefetch into L2 for the decode kernel's streams (every backend and target).
#pragma once

namespace seqattn::simd {

// Asks for the line holding p into L2 (prefetcht2), not L1: a decode step streams the cache
// from DRAM, and requests into L1 hold one of its few miss buffers each until the line comes,
// which capped a core's stream far below what it can read. Into L2 (whose misses the hardware
// tracks in far more entries) the one-thread decode over a bf16 cache at S_k 32768 (H_kv 8,
// D 128, Zen 4) went from 12.5 to 6.5 ms; the L1 refill from L2 hides under the arithmetic.
// Always inlined: called from Highway's per-target code (another target than this plain
// function's), g++ 12 kept it out of line, found it free of side effects and deleted the calls
// (the decode kernel lost 90% of its prefetches and ran at half speed).
template <class T>
__attribute__((always_inline)) inline void PrefetchToL2(const T* p) {
  __builtin_prefetch(p, 0, 1);  // read, locality 1: prefetcht2
}

}  // namespace seqattn::simd
