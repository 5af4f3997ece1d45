// The flash driver's loops, written once for two kinds of team. SerialTeam runs them as plain
// loops on the calling thread: libgomp allocates a team for every parallel region of one
// thread it enters (an if(false) one too) and a work share for an orphaned loop, and a steady
// run in a caller's workspace must not allocate. OmpTeam's loops are worksharing constructs
// that bind to the parallel region RunOnTeam opened (orphaned constructs, with their implicit
// barriers). FirstException carries a task's exception out of a region. Library code only
// (built with OpenMP).
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <exception>

#include "src/runtime/threads.hpp"

namespace seqattn::detail {

struct SerialTeam {
  int thread() const { return 0; }
  template <class Fn>
  void for_static(std::int64_t count, const Fn& fn) const {
    for (std::int64_t i = 0; i < count; ++i) fn(i);
  }
  template <class Fn>
  void for_dynamic(std::int64_t count, const Fn& fn) const {
    for (std::int64_t i = 0; i < count; ++i) fn(i);
  }
  template <class Fn>
  void single(const Fn& fn) const {
    fn();
  }
};

struct OmpTeam {
  int thread() const { return omp_get_thread_num(); }
  template <class Fn>
  void for_static(std::int64_t count, const Fn& fn) const {
#pragma omp for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) fn(i);
  }
  template <class Fn>
  void for_dynamic(std::int64_t count, const Fn& fn) const {
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t i = 0; i < count; ++i) fn(i);
  }
  template <class Fn>
  void single(const Fn& fn) const {
#pragma omp single
    fn();
  }
};

// body(team) on `threads` threads: SerialTeam for one, an OpenMP region of OmpTeam otherwise.
// team.thread() is the thread's index in [0, threads). Inside a caller's active parallel region
// a nested region would get one thread (team_here) and still allocate a team: the plain loops
// run instead.
template <class Body>
void RunOnTeam(int threads, const Body& body) {
  if (team_here(threads) <= 1) {
    body(SerialTeam{});
    return;
  }
#pragma omp parallel num_threads(threads)
  body(OmpTeam{});
}

// The first exception thrown by tasks of a team, kept to rethrow after the region: an
// exception may not leave an OpenMP region (std::terminate). Tasks after a failure still run
// (they write scratch only). rethrow() runs after the region, whose join orders first_.
class FirstException {
 public:
  template <class Fn>
  void run(const Fn& fn) noexcept {
    try {
      fn();
    } catch (...) {
      if (!taken_.exchange(true)) first_ = std::current_exception();
    }
  }
  void rethrow() const {
    if (first_) std::rethrow_exception(first_);
  }

 private:
  std::atomic<bool> taken_{false};
  std::exception_ptr first_;
};

// fn(i, thread) for i in [0, n) over `threads` threads, on RunOnTeam (one thread, or one task,
// runs a plain loop): dynamic sharing for tasks of uneven cost (LSH's pairs, Linformer's
// projections), static for even ones (a pair's rows). An exception may not leave a region, so
// the first is rethrown after it.
template <bool kDynamic = false, class Fn>
void ForEachTask(std::int64_t n, int threads, const Fn& fn) {
  FirstException failure;
  RunOnTeam(n > 1 ? threads : 1, [&](const auto& team) {
    const auto caught = [&](std::int64_t i) { failure.run([&] { fn(i, team.thread()); }); };
    if constexpr (kDynamic) {
      team.for_dynamic(n, caught);
    } else {
      team.for_static(n, caught);
    }
  });
  failure.rethrow();
}

}  // namespace seqattn::detail
