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
// and, when near_rows is not 0, the same line of the row near_rows further on, into L1 (the
// far request brought it to L2 or L1 a block earlier; the near one has it in L1 before the
// loads reach it). Offset 0 means no far request: callers test the object (operator bool)
// before calling Line, and Near before NearLine.
struct Prefetch {
  std::ptrdiff_t offset = 0;  // elements of the pointer's type
  CacheLevel level = CacheLevel::kL2;
  std::uint8_t near_rows = 0;  // at most 64 (kept small: the struct is passed in two registers)

  explicit operator bool() const { return offset != 0; }
  bool Near() const { return near_rows != 0; }

  // Asks for the line holding p + offset (p points into the block being read).
  template <class T>
  __attribute__((always_inline)) void Line(const T* p) const {
    PrefetchLine(p + offset, level);
  }

  // Asks for the line near_rows·row_stride elements past p into L1. Rows near the end of a pass
  // ask for the next pass's rows, or for the memory after the block (the next block of a
  // contiguous cache, another sequence's of a paged pool): a request never faults, and asking
  // only within the pass measured as slow as no near requests (int8) or half their gain (bf16).
  // The address is formed as an integer: it may be outside the block's allocation.
  template <class T>
  __attribute__((always_inline)) void NearLine(const T* p, std::size_t row_stride) const {
    const std::uintptr_t at =
        reinterpret_cast<std::uintptr_t>(p) + near_rows * row_stride * sizeof(T);
    PrefetchLine(reinterpret_cast<const T*>(at), CacheLevel::kL1);
  }
};

}  // namespace seqattn::simd
