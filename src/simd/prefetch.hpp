// Software prefetch for the decode kernel's streams (every backend and target).
#pragma once

#include <cstddef>

namespace seqattn::simd {

// The cache a prefetch fills. Which one streams a decode step fastest depends on the core
// (src/kernel/decode/prefetch_level.hpp chooses per CPU).
enum class CacheLevel : unsigned char { kL1, kL2 };

// A request for the line `offset` elements past each address the decode micro-kernels read
// (the same row of a cache block further on), into `level`. offset 0 asks for nothing.
//  - L2 (prefetcht2): on Zen 4 a request into L1 held one of its few miss buffers until the
//    line came, which capped a core's stream far below what it can read; into L2 one thread's
//    decode over a bf16 cache at S_k 32768 (H_kv 8, D 128) went from 12.5 to 6.5 ms.
//  - L1 (prefetcht0): on Zen 5 it streams faster than L2 (prefetch_level.hpp has the figures).
// Always inlined: called from Highway's per-target code (another target than a plain
// function's), g++ 12 kept such a function out of line, found it free of side effects and
// deleted the calls (the decode kernel lost 90% of its prefetches and ran at half speed). The
// level is a run-time value: one branch that goes the same way for a whole run, where a
// template parameter would compile every decode micro-kernel twice.
// Asks for the line holding p into `level`. Always inlined, as Prefetch::Line below.
template <class T>
__attribute__((always_inline)) inline void PrefetchLine(const T* p, CacheLevel level) {
  if (level == CacheLevel::kL1) {
    __builtin_prefetch(p, 0, 3);  // read, locality 3: prefetcht0
  } else {
    __builtin_prefetch(p, 0, 1);  // read, locality 1: prefetcht2
  }
}

struct Prefetch {
  std::ptrdiff_t offset = 0;  // elements of the pointer's type
  CacheLevel level = CacheLevel::kL2;

  explicit operator bool() const { return offset != 0; }

  // Asks for the line holding p + offset (p points into the block being read).
  template <class T>
  __attribute__((always_inline)) void Line(const T* p) const {
    PrefetchLine(p + offset, level);
  }
};

}  // namespace seqattn::simd
