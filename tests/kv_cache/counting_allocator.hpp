// Heap allocations counted for the steady-loop tests (test_steady_decode.cpp,
// test_steady_prefill.cpp). A program that links counting_allocator.cpp has every C++
// allocation (the global operator new: vectors, strings, shared pointers) and, outside the
// sanitizers (whose runtimes own malloc), malloc, calloc, realloc and the aligned allocators
// (through glibc's __libc_* entry points: Highway's aligned buffers) counted while
// allocations_of runs its step.
#pragma once

#if !defined(SEQATTN_TEST_PROGRAM_ASAN) && !defined(__SANITIZE_ADDRESS__) && \
    !defined(__SANITIZE_THREAD__)
#define SEQATTN_COUNTS_MALLOC 1
#endif

namespace seqattn::testing {

#ifdef SEQATTN_COUNTS_MALLOC
inline constexpr bool kCountsMalloc = true;
#else
inline constexpr bool kCountsMalloc = false;
#endif

void start_counting();
long stop_counting();  // the allocations since start_counting()

// Counts the allocations of `step` (e.g. a decode step: append + run).
template <class Step>
long allocations_of(const Step& step) {
  start_counting();
  step();
  return stop_counting();
}

}  // namespace seqattn::testing
