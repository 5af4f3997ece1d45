#include "src/kernel/block_mask.hpp"

#include <algorithm>
#include <limits>
#include <utility>

namespace seqattn::detail {
namespace {

// Appends [first, last) to the query tile's runs, skipping what is empty.
void add_run(BlockMask& m, std::int64_t first, std::int64_t last, bool full) {
  if (last > first) m.runs.push_back({first, last, full});
}

// Column tiles in [from, to) as partial runs of one tile each (columns sorted); `start` is the
// query tile's first run.
void add_column_tiles(BlockMask& m, std::int64_t start, const std::vector<std::int64_t>& columns,
                      std::int64_t from, std::int64_t to) {
  const std::int64_t size = m.grid.key_tile;
  for (const std::int64_t j : columns) {
    const std::int64_t kt = j / size;
    if (kt < from) continue;
    if (kt >= to) break;
    const bool new_tile =
        static_cast<std::int64_t>(m.runs.size()) == start || m.runs.back().last <= kt;
    if (new_tile) add_run(m, kt, kt + 1, false);
  }
}

}  // namespace

const std::vector<std::int64_t>& KeyStructure::columns() const {
  static const std::vector<std::int64_t> none;
  return none;
}

// Per query tile: the union of its rows' ranges, split into the tiles every row covers
// whole (full) and the edge tiles around them (partial), with the column tiles outside the
// union added as partial runs, in increasing order.
BlockMask KeyStructure::block_mask(const TileGrid& grid) const {
  BlockMask m;
  m.grid = grid;
  const std::int64_t size = grid.key_tile;
  const std::vector<std::int64_t>& cols = columns();
  m.offsets.reserve(static_cast<size_t>(grid.query_tiles()) + 1);
  m.offsets.push_back(0);
  for (std::int64_t qt = 0; qt < grid.query_tiles(); ++qt) {
    const std::int64_t i0 = qt * grid.query_tile;
    const std::int64_t i1 = std::min(i0 + grid.query_tile, grid.seq_q);
    const std::int64_t start = m.offsets.back();
    std::int64_t lo = grid.seq_k, hi = 0, inner_lo = 0, inner_hi = grid.seq_k;
    for (std::int64_t i = i0; i < i1; ++i) {
      const KeyRange r = row_keys(i);
      inner_lo = std::max(inner_lo, r.lo);
      inner_hi = std::min(inner_hi, r.hi);
      if (r.empty()) continue;
      lo = std::min(lo, r.lo);
      hi = std::max(hi, r.hi);
    }
    if (hi > lo) {
      const std::int64_t first = lo / size, last = (hi + size - 1) / size;
      // Tiles inside [inner_lo, inner_hi) are whole in every row's range; the last key tile
      // counts as whole when the ranges reach S_k.
      std::int64_t full_first = (inner_lo + size - 1) / size;
      std::int64_t full_last = inner_hi >= grid.seq_k ? grid.key_tiles() : inner_hi / size;
      full_first = std::clamp(full_first, first, last);
      full_last = std::clamp(full_last, full_first, last);
      add_column_tiles(m, start, cols, 0, first);
      add_run(m, first, full_first, false);
      add_run(m, full_first, full_last, true);
      add_run(m, full_last, last, false);
      add_column_tiles(m, start, cols, last, grid.key_tiles());
    } else {
      add_column_tiles(m, start, cols, 0, grid.key_tiles());
    }
    m.offsets.push_back(static_cast<std::int64_t>(m.runs.size()));
  }
  return m;
}

namespace {

std::shared_ptr<const RowTables> build_rows(const KeyStructure& keys, std::int64_t seq_q,
                                            std::int64_t seq_k) {
  auto t = std::make_shared<RowTables>();
  t->seq_q = seq_q;
  t->seq_k = seq_k;
  if (keys.row_table() == nullptr) {
    t->rows.resize(static_cast<size_t>(seq_q));
    for (std::int64_t i = 0; i < seq_q; ++i) t->rows[static_cast<size_t>(i)] = keys.row_keys(i);
  }
  if (!keys.columns().empty()) {
    t->column.assign(static_cast<size_t>(seq_k), 0);
    for (const std::int64_t j : keys.columns()) t->column[static_cast<size_t>(j)] = 1;
  }
  return t;
}

std::shared_ptr<const GridTables> build_grid(const KeyStructure& keys, const TileGrid& grid) {
  auto t = std::make_shared<GridTables>();
  t->blocks = keys.block_mask(grid);
  t->first_column.assign(static_cast<size_t>(grid.key_tiles()),
                         std::numeric_limits<std::int64_t>::max());
  for (const std::int64_t j : keys.columns()) {
    std::int64_t& f = t->first_column[static_cast<size_t>(j / grid.key_tile)];
    f = std::min(f, j);
  }
  return t;
}

bool same_grid(const TileGrid& a, const TileGrid& b) {
  return a.query_tile == b.query_tile && a.key_tile == b.key_tile && a.seq_q == b.seq_q &&
         a.seq_k == b.seq_k;
}

}  // namespace

// The destination's tables belonged to the structure it was: both assignments drop them.
StructureTables& StructureTables::operator=(const StructureTables&) noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  rows_.clear();
  grids_.clear();
  return *this;
}
StructureTables& StructureTables::operator=(StructureTables&&) noexcept {
  const std::lock_guard<std::mutex> lock(mutex_);
  rows_.clear();
  grids_.clear();
  return *this;
}

std::shared_ptr<const RowTables> StructureTables::rows(const KeyStructure& keys, std::int64_t seq_q,
                                                       std::int64_t seq_k) {
  if (!keys.fixed()) return build_rows(keys, seq_q, seq_k);
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& t : rows_) {
    if (t->seq_q == seq_q && t->seq_k == seq_k) return t;
  }
  rows_.push_back(build_rows(keys, seq_q, seq_k));
  return rows_.back();
}

std::shared_ptr<const GridTables> StructureTables::grid(const KeyStructure& keys,
                                                        const TileGrid& grid) {
  if (!keys.fixed()) return build_grid(keys, grid);
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& t : grids_) {
    if (same_grid(t->blocks.grid, grid)) return t;
  }
  grids_.push_back(build_grid(keys, grid));
  return grids_.back();
}

BlockMask AllKeys::block_mask(const TileGrid& grid) const {
  BlockMask m;
  m.grid = grid;
  m.offsets.resize(static_cast<size_t>(grid.query_tiles()) + 1);
  for (std::int64_t qt = 0; qt <= grid.query_tiles(); ++qt) m.offsets[static_cast<size_t>(qt)] = qt;
  m.runs.assign(static_cast<size_t>(grid.query_tiles()), KeyRun{0, grid.key_tiles(), true});
  return m;
}

RowKeyRanges::RowKeyRanges(const std::vector<std::int64_t>& lo, const std::vector<std::int64_t>& hi)
    : rows_(lo.size()) {
  for (size_t i = 0; i < lo.size(); ++i) {
    rows_[i] = {lo[i], hi[i]};
    width_ = std::max(width_, hi[i] - lo[i]);
  }
}

}  // namespace seqattn::detail
