// Workspace counts kept per (SIMD target, compute path): what a prepared variant's kernel calls
// or a plan's run over q, k, v carve depends on both (the fp32 and tile products block their
// tiles differently, and each target has its own blocking). A count is taken on first need and
// kept, so that only the first run on a new target or path pays for it (a count builds the
// kernel's tables) and a steady loop allocates nothing. The key holds no shape: every problem
// counted through one PathCounts has its owner's shape and threads (a plan's runs bind the
// planned problem's).
//
// Thread-safe: a plan and its prepared variant are shared by every thread that runs them. A
// count already kept is read without a lock (every run reads one); a first count runs under
// the lock (milliseconds at most, once per key), so concurrent first runs wait for it.
#pragma once

#include <array>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <string_view>

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
    if (const Entry* e = find(target, path, kept_.load(std::memory_order_acquire))) {
      return e->value;
    }
    const std::lock_guard<std::mutex> lock(mutex_);
    const std::size_t kept = kept_.load(std::memory_order_relaxed);
    if (const Entry* e = find(target, path, kept)) return e->value;  // kept meanwhile
    const Value value = count();
    // Keys are (compiled target, path) pairs: at most 9 Highway x86 targets (times the xsimd
    // archs in that build) by 4 paths, and a process meets a few. Past kCapacity the value is
    // counted again on every call rather than kept (only a test forcing targets could).
    if (kept < kCapacity) {
      entries_[kept] = {target, path, value};
      kept_.store(kept + 1, std::memory_order_release);  // publishes entries_[kept]
    }
    return value;
  }

 private:
  struct Entry {
    std::string_view target;  // interned for the process's life
    ComputePath path = ComputePath::kFp32;
    Value value{};
  };
  static constexpr std::size_t kCapacity = 64;

  // The entry for (target, path) among the first `kept`.
  const Entry* find(std::string_view target, ComputePath path, std::size_t kept) const {
    for (std::size_t i = 0; i < kept; ++i) {
      if (entries_[i].target == target && entries_[i].path == path) return &entries_[i];
    }
    return nullptr;
  }

  // entries_[0, kept_) are written once, before kept_ is raised past them, and never again.
  mutable std::mutex mutex_;
  mutable std::array<Entry, kCapacity> entries_{};
  mutable std::atomic<std::size_t> kept_{0};
};

}  // namespace seqattn::detail
