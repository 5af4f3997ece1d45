// Software prefetch for the decode kernel's streams (every backend and target).
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqattn::simd {

// The cache a prefetch fills. Which one streams a decode step fastest depends on the core:
// src/kernel/decode/prefetch_level.cpp chooses per CPU and has the measurements.
enum class CacheLevel : unsigned char { kL1, kL2 };

// Asks for the line holding p into `level`: prefetcht0 for L1, prefetcht2 for L2.
// Always inlined: called from Highway's per-target code (another target than a plain
// function's), g++ 12 kept such a function out of line, found it free of side effects and
// deleted the calls (the decode kernel lost 90% of its prefetches and ran at half speed). The
// level is a run-time value: one branch that goes the same way for a whole run, where a
// template parameter would compile every decode micro-kernel twice.
template <class T>
__attribute__((always_inline)) inline void PrefetchLine(const T* p, CacheLevel level) {
  if (level == CacheLevel::kL1) {
    __builtin_prefetch(p, 0, 3);  // read, locality 3: prefetcht0
  } else {
    __builtin_prefetch(p, 0, 1);  // read, locality 1: prefetcht2
  }
}

// What the decode micro-kernels ask for as they read a cache block: the line `offset`
// elements past each address they read (the same row of a block further on), into `level`;
// and the line `near` elements past it (a row a little further on in this block, which the far
// request brought to L2 or L1 a block earlier), into L1, so it is there before the loads reach
// it. The caller that knows the block's layout sets both (CacheWorker::visit_tile); a
// micro-kernel asks for each line it reads and knows nothing of rows or levels. 0 means no
// request of that kind: callers test operator bool before Line and Near before NearLine, once
// per row (one test inside Line per request measured slower on the Xeon of the near requests'
// figures, src/kernel/decode/prefetch_level.cpp: bf16 decode at S_k 131072 44.5 → 46.5 ms,
// the paged bench 80-82% → 75-77% of its probe).
struct Prefetch {
  std::ptrdiff_t offset = 0;  // elements of the pointer's type
  CacheLevel level = CacheLevel::kL2;
  std::int32_t near = 0;  // elements (kept to 32 bits: the struct is passed in two registers)

  explicit operator bool() const { return offset != 0; }
  bool Near() const { return near != 0; }

  // Asks for the line holding p + offset (p points into the block being read).
  template <class T>
  __attribute__((always_inline)) void Line(const T* p) const {
    PrefetchLine(p + offset, level);
  }

  // Asks for the line holding p + near into L1. Rows near the end of a pass ask for the next
  // pass's rows or for the memory after the block (the next block of a contiguous cache,
  // another sequence's of a paged pool): a request never faults, and asking only within the
  // pass measured as slow as no near requests (int8) or half their gain (bf16). The address is
  // formed as an integer, as it may be outside the block's allocation.
  template <class T>
  __attribute__((always_inline)) void NearLine(const T* p) const {
    const std::uintptr_t at =
        reinterpret_cast<std::uintptr_t>(p) + static_cast<std::uintptr_t>(near) * sizeof(T);
    PrefetchLine(reinterpret_cast<const T*>(at), CacheLevel::kL1);
  }
};

}  // namespace seqattn::simd
