// Software prefetch for the decode kernel's streams (every backend and target).
#pragma once

#include <algorithm>
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

// A micro-kernel's far requests in address order, spread over its passes in proportion to what
// they have read: `visits` in all (rows × passes, or rows × vectors), over the `bytes` from
// `begin` (the far lines are these bytes `far.offset` on). The decode micro-kernels read a
// tile's rows in column passes a few lines apart (AVX2's int8 Q·Kᵀ: line p of every quad row in
// pass p; a bf16 key tile: every other line of each key row); asked for in that order, the next
// blocks' lines came from DRAM as strided requests. A stand-alone stream of the same reads (Zen 3,
// 2 × 32 MiB, FMA work between lines as the int8 kernel's) ran 8.2-9.2 ns a line with requests in
// the passes' order and 7.0 in address order, as fast as reading in order (docs/architecture.md,
// "Far requests in address order").
class OrderedLines {
 public:
  OrderedLines() = default;  // no requests
  OrderedLines(const std::int8_t* begin, std::size_t bytes, Prefetch far, std::size_t visits)
      : begin_(begin),
        end_(far ? (bytes + 63) / 64 * 64 : 0),
        step_(visits == 0 ? end_ : (end_ + visits - 1) / visits),
        far_(far) {}
  // The same over `count` elements of T from `begin`, `far.offset` in elements of T (as
  // Prefetch::Line takes it).
  template <class T>
  static OrderedLines Of(const T* begin, std::size_t count, Prefetch far, std::size_t visits) {
    const Prefetch in_bytes{far.offset * static_cast<std::ptrdiff_t>(sizeof(T)), far.level};
    return OrderedLines(reinterpret_cast<const std::int8_t*>(begin), count * sizeof(T), in_bytes,
                        visits);
  }

  // `visits` more were made: asks for the lines due by now (a line as soon as any of its bytes
  // is due; the last visit asks for the rest).
  __attribute__((always_inline)) void Visit(std::size_t visits) {
    due_ = std::min(due_ + visits * step_, end_);
    for (; asked_ < due_; asked_ += 64) far_.Line(begin_ + asked_);
  }

  // Bytes from the start whose lines were asked for (whole lines).
  std::size_t asked_bytes() const { return asked_; }

 private:
  const std::int8_t* begin_ = nullptr;
  std::size_t end_ = 0, step_ = 0;  // bytes: the run's whole lines, and those due per visit
  std::size_t due_ = 0, asked_ = 0;
  Prefetch far_;
};

}  // namespace seqattn::simd
