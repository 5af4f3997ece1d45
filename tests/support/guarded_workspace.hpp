// A caller's workspace for the tests' runs (RunArgs::workspace): `bytes` bytes, 64-byte aligned
// as a run requires, filled with 0xff (NaN floats, so that a read before a write shows), and
// kGuard bytes past its end that no run may touch.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace seqattn::testing {

class GuardedWorkspace {
 public:
  static constexpr std::size_t kGuard = 128;

  explicit GuardedWorkspace(std::size_t bytes) : storage_(bytes + 64 + kGuard, kUnwritten) {
    const auto misaligned = reinterpret_cast<std::uintptr_t>(storage_.data()) % 64;
    ws_ = {storage_.data() + (64 - misaligned) % 64, bytes};
    std::fill(ws_.end(), ws_.end() + kGuard, kGuardByte);
  }
  GuardedWorkspace(const GuardedWorkspace&) = delete;
  GuardedWorkspace& operator=(const GuardedWorkspace&) = delete;

  static constexpr std::byte kUnwritten{0xff};

  // The workspace's bytes (the object owns them; a run writes through this span).
  std::span<std::byte> bytes() const { return ws_; }
  // Every byte kUnwritten again, as before the first run.
  void refill() const { std::fill(ws_.begin(), ws_.end(), kUnwritten); }
  bool guard_intact() const {
    return std::all_of(ws_.end(), ws_.end() + kGuard, [](std::byte b) { return b == kGuardByte; });
  }

 private:
  static constexpr std::byte kGuardByte{0xab};
  std::vector<std::byte> storage_;
  std::span<std::byte> ws_;
};

}  // namespace seqattn::testing
