// The key structure of one LSH kernel call (ChunkWindows) and the plan's store of them
// (WindowStore). A call's windows depend only on its geometry, not on the hashes: most calls of
// a run, and of every later run, share one, so a structure is built once and keeps the
// kernel's tables (KeyStructure::fixed), and a steady loop of runs builds none. The rules that
// depend on the data (a row's own key, causal positions) go with the call (SlotRule).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

// A segment's windows over its gathered keys: `prefix` slots (0 or the chunk length c) holding
// the previous chunk's keys, right-aligned (its `prev_len` keys at the end), then the segment's
// own `rows` keys. Row r, of chunk u = r / c of the segment, sees [prefix - prev_len,
// prefix + min(c, rows)) when u = 0 and [prefix + (u - 1)·c, prefix + min((u + 1)·c, rows))
// otherwise: its own chunk and the one before.
class ChunkWindows final : public KeyStructure {
 public:
  ChunkWindows(std::int64_t rows, std::int64_t prefix, std::int64_t prev_len, std::int64_t chunk);
  KeyRange row_keys(std::int64_t i) const override { return rows_[static_cast<size_t>(i)]; }
  const KeyRange* row_table() const override { return rows_.data(); }
  std::int64_t local_width() const override { return width_; }
  bool fixed() const override { return true; }

  std::int64_t rows() const { return static_cast<std::int64_t>(rows_.size()); }
  bool matches(std::int64_t rows, std::int64_t prefix, std::int64_t prev_len) const {
    return this->rows() == rows && prefix_ == prefix && prev_len_ == prev_len;
  }

 private:
  std::vector<KeyRange> rows_;
  std::int64_t width_ = 1, prefix_ = 0, prev_len_ = 0;
};

// The windows a plan's calls have met, shared by its concurrent runs (thread-safe). A lookup
// that finds one copies a shared_ptr (no allocation) and marks it the most recently used; a
// new geometry builds one. A key length gives at most two geometries of its own (its first and
// last segments; the middle ones are every length's), so a store of `capacity` >= 2·B + 8 holds
// a whole batch's: a loop whose key lengths give at most `capacity` geometries (one batch's
// lengths, run again and again) builds nothing after its first pass, and one over ever new
// lengths holds bounded memory (the least recently used goes; a run still using it holds its
// own reference).
class WindowStore {
 public:
  WindowStore(std::int64_t chunk, std::size_t capacity) : chunk_(chunk), capacity_(capacity) {}
  std::shared_ptr<const ChunkWindows> get(std::int64_t rows, std::int64_t prefix,
                                          std::int64_t prev_len) const;

  // The capacity for a plan over `batch` sequences.
  static std::size_t capacity_for(std::int64_t batch) {
    return std::max<std::size_t>(24, 2 * static_cast<std::size_t>(batch) + 8);
  }

 private:
  std::int64_t chunk_;
  std::size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::vector<std::shared_ptr<const ChunkWindows>> kept_;  // least recently used first
};

}  // namespace seqattn::detail
