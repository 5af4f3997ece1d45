// Workspace counts kept per (SIMD target, compute path): what a prepared variant's kernel calls
// or a plan's run over q, k, v carve depends on both (the fp32 and tile products block their
// tiles differently, and each target has its own blocking). A count is taken on first need and
// kept, so that only the first run on a new target or path pays for it (a count builds the
// kernel's tables) and a steady loop on one path allocates nothing. Thread-safe: a plan and
// its prepared variant are shared by every thread that runs them; a first count runs under the
// lock (milliseconds at most, once per key), so concurrent runs wait for it. The key holds no
// shape: every problem counted through one PathCounts has its owner's shape and threads (a
// plan's runs bind the planned problem's).
#pragma once

#include <cstddef>
#include <mutex>
#include <optional>
#include <string_view>
#include <vector>

#include "src/core/problem.hpp"
#include "src/simd/highway_target.hpp"

namespace seqattn::detail {

template <class Value>
class PathCounts {
 public:
  // The value for the dispatched target and `path`: kept, or count() (under the lock; again
  // next time if it threw) kept and returned.
  template <class Count>
  Value get(ComputePath path, Count&& count) const {
    const std::string_view target = simd::backend_target_name();
    const std::lock_guard<std::mutex> lock(mutex_);
    for (const Entry& e : entries_) {
      if (e.target == target && e.path == path) return e.value;
    }
    entries_.push_back({target, path, count()});
    return entries_.back().value;
  }

 private:
  struct Entry {
    std::string_view target;  // interned for the process's life
    ComputePath path;
    Value value;
  };
  mutable std::mutex mutex_;
  mutable std::vector<Entry> entries_;
};

}  // namespace seqattn::detail
