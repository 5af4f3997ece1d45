// What a variant tells the tile kernel about which keys each query sees, in the form of
// FlexAttention's block masks. The kernel hands the variant's KeyStructure its tile grid
// (TileGrid, which differs per SIMD target) and gets back a BlockMask: for every query tile,
// the key tiles to visit in increasing order, as runs that are each *full* (every row of the
// query tile sees every key of the run) or *partial* (the row rule below decides per key).
// The kernel knows no band, window or level: dense, sliding window and hierarchical attention
// differ only in the KeyStructure they pass (AllKeys here, KeyBand and RowKeyRanges with their
// variants).
//
// The row rule of a partial tile: row i sees the keys of its contiguous range row_keys(i) plus
// the key columns every row sees (columns(), e.g. global tokens). The problem's own mask
// (causal, key lengths, keep mask, bias) applies on top of the structure, at run time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace seqattn::detail {

struct KeyRange {
  std::int64_t lo = 0, hi = 0;  // [lo, hi); empty when hi <= lo
  bool empty() const { return hi <= lo; }
};

// The kernel's tiling of one (batch, head): query tiles of `query_tile` rows, key tiles of
// `key_tile` keys (the last of each may be partial).
struct TileGrid {
  std::int64_t query_tile = 1, key_tile = 1, seq_q = 0, seq_k = 0;
  std::int64_t query_tiles() const { return (seq_q + query_tile - 1) / query_tile; }
  std::int64_t key_tiles() const { return (seq_k + key_tile - 1) / key_tile; }
};

// Key tiles [first, last) of one query tile; `full`: no key of them is hidden by the structure.
struct KeyRun {
  std::int64_t first = 0, last = 0;
  bool full = false;
};

// Per query tile qt, runs [offsets[qt], offsets[qt + 1]) of `runs`, increasing and disjoint.
struct BlockMask {
  TileGrid grid;
  std::vector<std::int64_t> offsets;
  std::vector<KeyRun> runs;

  const KeyRun* begin(std::int64_t qt) const {
    return runs.data() + offsets[static_cast<size_t>(qt)];
  }
  const KeyRun* end(std::int64_t qt) const {
    return runs.data() + offsets[static_cast<size_t>(qt) + 1];
  }
};

// What the kernel derives from a structure alone, whatever the run's data: the rows as an
// array (when the structure stores none) and a flag per key that is a column ([S_k], empty
// without columns).
struct RowTables {
  std::int64_t seq_q = 0, seq_k = 0;
  std::vector<KeyRange> rows;
  std::vector<std::uint8_t> column;
};

// ... and from a structure and one tile grid: the block mask and, per key tile, its smallest
// key column (INT64_MAX when it holds none).
struct GridTables {
  BlockMask blocks;
  std::vector<std::int64_t> first_column;
};

// The tables of one structure. A fixed structure's (KeyStructure::fixed) are built on first use
// and kept: a plan's structure meets one grid per SIMD target and compute path, so a steady loop
// of runs builds nothing (and allocates nothing) after its first; handing out a kept table is a
// shared_ptr copy. Thread-safe: concurrent runs of one plan share it. Any other structure's (one
// changed in place between runs) are built afresh on every request: a kept mask would skip keys. A
// copy or an assignment starts empty (the tables are derived, not state).
class KeyStructure;

class StructureTables {
 public:
  // noexcept, so that a structure (and a class holding one) stays nothrow-movable: std::vector
  // moves rather than copies them when it grows.
  StructureTables() = default;
  StructureTables(const StructureTables&) noexcept {}
  StructureTables(StructureTables&&) noexcept {}
  StructureTables& operator=(const StructureTables&) noexcept;
  StructureTables& operator=(StructureTables&&) noexcept;

  std::shared_ptr<const RowTables> rows(const KeyStructure& keys, std::int64_t seq_q,
                                        std::int64_t seq_k);
  std::shared_ptr<const GridTables> grid(const KeyStructure& keys, const TileGrid& grid);

 private:
  std::mutex mutex_;
  std::vector<std::shared_ptr<const RowTables>> rows_;
  std::vector<std::shared_ptr<const GridTables>> grids_;
};

class KeyStructure {
 public:
  KeyStructure() = default;
  KeyStructure(const KeyStructure&) = default;
  KeyStructure(KeyStructure&&) = default;
  KeyStructure& operator=(const KeyStructure&) = default;
  KeyStructure& operator=(KeyStructure&&) = default;
  virtual ~KeyStructure() = default;

  // The structure's tables for S_q rows over S_k keys, and for one grid (StructureTables).
  std::shared_ptr<const RowTables> row_tables(std::int64_t seq_q, std::int64_t seq_k) const {
    return tables_.rows(*this, seq_q, seq_k);
  }
  std::shared_ptr<const GridTables> grid_tables(const TileGrid& grid) const {
    return tables_.grid(*this, grid);
  }

  // True when rows, columns and the block mask never change after construction, so the
  // kernel's tables are kept (StructureTables); false (the default) for a structure that is
  // changed in place between runs.
  virtual bool fixed() const { return false; }

  // Row i's contiguous key range, in [0, S_k).
  virtual KeyRange row_keys(std::int64_t i) const = 0;

  // The rows as an array [S_q] when the structure stores them (else its row tables hold a
  // copy: StructureTables).
  virtual const KeyRange* row_table() const { return nullptr; }

  // Keys every row sees besides its range, sorted and unique, each < S_k.
  virtual const std::vector<std::int64_t>& columns() const;

  // > 0: every row's range holds at most this many keys, except "wide" rows (a global query
  // row, say). The kernel then streams the keys of long sequences through a ring of packed
  // tiles (FlashRun's banded path) and runs the query tiles holding a wide row on a full copy.
  // 0: rows may see any number of keys (dense); every key is packed up front.
  virtual std::int64_t local_width() const { return 0; }

  // The visiting plan for the kernel's grid. The default derives it from row_keys and
  // columns (O(S_q + query tiles · columns)); a variant with a cheaper closed form overrides.
  virtual BlockMask block_mask(const TileGrid& grid) const;

 private:
  mutable StructureTables tables_;
};

// Dense attention's structure: every row sees every key; every run is full.
class AllKeys final : public KeyStructure {
 public:
  explicit AllKeys(std::int64_t seq_k) : seq_k_(seq_k) {}
  KeyRange row_keys(std::int64_t) const override { return {0, seq_k_}; }
  BlockMask block_mask(const TileGrid& grid) const override;
  bool fixed() const override { return true; }

 private:
  std::int64_t seq_k_;
};

// Hierarchical levels' structure: one explicit range per row, [lo[i], hi[i]).
class RowKeyRanges final : public KeyStructure {
 public:
  RowKeyRanges() = default;  // no rows
  RowKeyRanges(const std::vector<std::int64_t>& lo, const std::vector<std::int64_t>& hi);
  KeyRange row_keys(std::int64_t i) const override { return rows_[static_cast<size_t>(i)]; }
  const KeyRange* row_table() const override { return rows_.data(); }
  std::int64_t local_width() const override { return width_; }
  bool fixed() const override { return true; }

 private:
  std::vector<KeyRange> rows_;
  std::int64_t width_ = 1;
};
static_assert(std::is_nothrow_move_constructible_v<RowKeyRanges>,
              "vectors of structures move rather than copy");

}  // namespace seqattn::detail
