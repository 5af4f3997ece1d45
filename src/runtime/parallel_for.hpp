// A loop that enters OpenMP only when it is worth it. Library code only (built with OpenMP).
#pragma once

#include <cstdint>

namespace seqattn::detail {

// fn(i) for i in [0, count): across the threads (a static schedule) when `parallel`, otherwise
// on the calling thread without entering an OpenMP region. libgomp allocates a team for every
// parallel region it enters, an if(false) one too, so a small call (a decode step's append or
// staging copy) that must not allocate stays out of the region altogether.
template <class Fn>
void for_each_index(std::int64_t count, bool parallel, const Fn& fn) {
  if (!parallel || count <= 1) {
    for (std::int64_t i = 0; i < count; ++i) fn(i);
    return;
  }
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < count; ++i) fn(i);
}

}  // namespace seqattn::detail
