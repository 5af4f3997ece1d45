// The flash kernel's scratch, carved out of one byte range: the caller's workspace
// (RunArgs::workspace through Problem::workspace), or one allocation of the same size when the
// caller gives none. Every array starts on a 64-byte line. An arena without a range only
// counts: the workspace query (flash_workspace_bytes) runs the same carving code as the run,
// so the two cannot disagree.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqattn::detail {

class ScratchArena {
 public:
  ScratchArena() = default;  // counts only: take() returns null
  ScratchArena(std::byte* base, std::size_t size) : base_(base), size_(size) {}

  // n elements of T (uninitialised), or null when counting. The caller sized the range by
  // counting the same takes, so a carving arena never runs out; if it did, that would be a
  // bug in the carving order, and take() returns null rather than memory past the range.
  template <class T>
  T* take(std::int64_t n) {
    const std::size_t bytes = (static_cast<std::size_t>(n) * sizeof(T) + 63) / 64 * 64;
    T* at =
        base_ != nullptr && used_ + bytes <= size_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += bytes;
    return at;
  }

  std::size_t used() const { return used_; }

 private:
  std::byte* base_ = nullptr;
  std::size_t size_ = 0;
  std::size_t used_ = 0;
};

}  // namespace seqattn::detail
