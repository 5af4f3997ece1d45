// A run's scratch, carved out of one byte range: the caller's workspace
// (RunArgs::workspace through Problem::workspace), or one allocation of the same size when the
// caller gives none. Every array starts on a 64-byte line. An arena without a range only
// counts: the workspace query (flash_workspace_bytes) runs the same carving code as the run,
// so the two cannot disagree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

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

// n elements of T carved from a ScratchArena (null data while the arena only counts): a
// caller's workspace, one allocation of the run, or an object's own (LinearAttentionState). The
// part of std::vector's interface the kernels use, without growth; not copyable, since a copy would
// alias (HeadState::copy_from copies contents); a move leaves the source empty. Trivially
// destructible: arrays of structs of them (carve_objects) are carved and constructed in place,
// never destroyed.
template <class T>
class Carved {
 public:
  Carved() = default;
  Carved(ScratchArena& arena, std::int64_t n)
      : data_(arena.take<T>(n)), size_(static_cast<std::size_t>(n)) {
    if (data_ != nullptr) std::uninitialized_default_construct_n(data_, size_);
  }
  Carved(const Carved&) = delete;
  Carved& operator=(const Carved&) = delete;
  Carved(Carved&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  Carved& operator=(Carved&& other) noexcept {
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    return *this;
  }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* begin() const { return data_; }
  T* end() const { return data_ + size_; }
  T& front() const { return data_[0]; }
  T& operator[](std::size_t i) const { return data_[i]; }

 private:
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

// n objects of T built in place in the arena, each carving its own buffers after the array
// (T(args..., arena)); while the arena only counts, each is built only to count them. T is
// trivially destructible: the objects are never destroyed, their memory is the arena's.
template <class T, class... Args>
T* carve_objects(ScratchArena& arena, std::int64_t n, const Args&... args) {
  static_assert(std::is_trivially_destructible_v<T>, "carved objects are never destroyed");
  T* at = arena.take<T>(n);
  for (std::int64_t i = 0; i < n; ++i) {
    if (at != nullptr) {
      new (at + i) T(args..., arena);
    } else {
      const T counted(args..., arena);
      (void)counted;
    }
  }
  return at;
}

}  // namespace seqattn::detail
