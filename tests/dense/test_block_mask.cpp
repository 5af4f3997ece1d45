// The block mask a key structure gives the tile kernel (src/kernel/block_mask.hpp), checked
// pair by pair on odd grids: every key a row may see lies in a tile its query tile visits
// (nothing hidden is skipped), a run marked full hides no key from any row of its query tile
// (the kernel skips the element rule there), and the runs of a query tile are increasing and
// disjoint (the kernel's visiting order, which fixes the floating-point result); and ALiBi's
// nearest-tile-first reorder of that order (src/kernel/tile_order.hpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "src/kernel/block_mask.hpp"
#include "src/kernel/tile_order.hpp"

namespace {

using seqattn::detail::AllKeys;
using seqattn::detail::BlockMask;
using seqattn::detail::KeyRange;
using seqattn::detail::KeyRun;
using seqattn::detail::KeyStructure;
using seqattn::detail::RowKeyRanges;
using seqattn::detail::TileGrid;

// A band of `left`/`right` keys around i + S_k - S_q with global tokens, written here from
// the sliding window's definition (the variant's own structure is private to it).
class Band final : public KeyStructure {
 public:
  Band(std::int64_t seq_q, std::int64_t seq_k, std::int64_t left, std::int64_t right,
       std::vector<std::int64_t> globals)
      : seq_q_(seq_q), seq_k_(seq_k), left_(left), right_(right), globals_(std::move(globals)) {
    for (const std::int64_t g : globals_) {
      if (g < seq_k_) columns_.push_back(g);
    }
  }
  KeyRange row_keys(std::int64_t i) const override {
    if (std::binary_search(globals_.begin(), globals_.end(), i)) return {0, seq_k_};
    const std::int64_t pos = i + seq_k_ - seq_q_;
    return {std::max<std::int64_t>(pos - left_, 0), std::min(pos + right_ + 1, seq_k_)};
  }
  const std::vector<std::int64_t>& columns() const override { return columns_; }
  std::int64_t local_width() const override { return left_ + right_ + 1; }

 private:
  std::int64_t seq_q_, seq_k_, left_, right_;
  std::vector<std::int64_t> globals_, columns_;
};

// The structure's rule, written from its definition: row i sees its range plus the columns.
bool Allows(const KeyStructure& keys, std::int64_t i, std::int64_t j) {
  const KeyRange r = keys.row_keys(i);
  const std::vector<std::int64_t>& c = keys.columns();
  return (j >= r.lo && j < r.hi) || std::binary_search(c.begin(), c.end(), j);
}

RowKeyRanges RandomRows(std::int64_t seq_q, std::int64_t seq_k, std::mt19937& rng) {
  std::vector<std::int64_t> lo(static_cast<size_t>(seq_q)), hi(static_cast<size_t>(seq_q));
  std::uniform_int_distribution<std::int64_t> key(0, seq_k);
  for (std::int64_t i = 0; i < seq_q; ++i) {
    const std::int64_t a = key(rng), b = key(rng);
    lo[static_cast<size_t>(i)] = std::min(a, b);
    hi[static_cast<size_t>(i)] = i % 7 == 3 ? std::min(a, b) : std::max(a, b);  // some empty rows
  }
  return RowKeyRanges(std::move(lo), std::move(hi));
}

// Checks the three properties of the header comment for one structure and grid.
void CheckMask(const KeyStructure& keys, const TileGrid& grid, const std::string& what) {
  const BlockMask m = keys.block_mask(grid);
  ASSERT_EQ(m.offsets.size(), static_cast<size_t>(grid.query_tiles()) + 1) << what;
  ASSERT_EQ(m.offsets.front(), 0) << what;
  ASSERT_EQ(m.offsets.back(), static_cast<std::int64_t>(m.runs.size())) << what;
  for (std::int64_t qt = 0; qt < grid.query_tiles(); ++qt) {
    const std::string at = what + " query tile " + std::to_string(qt);
    std::vector<char> listed(static_cast<size_t>(grid.key_tiles()), 0);
    std::int64_t previous_last = 0;
    for (const KeyRun* run = m.begin(qt); run != m.end(qt); ++run) {
      ASSERT_LT(run->first, run->last) << at;
      ASSERT_GE(run->first, previous_last) << at << ": runs must increase and not overlap";
      ASSERT_LE(run->last, grid.key_tiles()) << at;
      previous_last = run->last;
      for (std::int64_t kt = run->first; kt < run->last; ++kt) listed[static_cast<size_t>(kt)] = 1;
    }
    const std::int64_t i0 = qt * grid.query_tile;
    const std::int64_t i1 = std::min(i0 + grid.query_tile, grid.seq_q);
    for (std::int64_t i = i0; i < i1; ++i) {
      for (std::int64_t j = 0; j < grid.seq_k; ++j) {
        if (Allows(keys, i, j)) {
          ASSERT_TRUE(listed[static_cast<size_t>(j / grid.key_tile)])
              << at << ": row " << i << " sees key " << j << " in an unlisted tile";
        }
      }
    }
    for (const KeyRun* run = m.begin(qt); run != m.end(qt); ++run) {
      if (!run->full) continue;
      const std::int64_t j1 = std::min(run->last * grid.key_tile, grid.seq_k);
      for (std::int64_t i = i0; i < i1; ++i) {
        for (std::int64_t j = run->first * grid.key_tile; j < j1; ++j) {
          ASSERT_TRUE(Allows(keys, i, j)) << at << ": full run [" << run->first << ", " << run->last
                                          << ") hides key " << j << " from row " << i;
        }
      }
    }
  }
}

struct GridShape {
  std::int64_t query_tile, key_tile;
};
constexpr GridShape kGrids[] = {{1, 1}, {3, 8}, {16, 16}, {48, 32}, {64, 64}};
constexpr std::int64_t kSeqs[] = {1, 3, 17, 80, 130};

std::string Describe(const char* name, std::int64_t seq_q, std::int64_t seq_k, GridShape g) {
  return std::string(name) + " S_q=" + std::to_string(seq_q) + " S_k=" + std::to_string(seq_k) +
         " tiles " + std::to_string(g.query_tile) + "x" + std::to_string(g.key_tile);
}

TEST(BlockMask, AllKeysListsEveryTileAsOneFullRun) {
  for (const std::int64_t seq_q : kSeqs) {
    for (const std::int64_t seq_k : kSeqs) {
      for (const GridShape g : kGrids) {
        const AllKeys keys(seq_k);
        const TileGrid grid{g.query_tile, g.key_tile, seq_q, seq_k};
        CheckMask(keys, grid, Describe("all keys", seq_q, seq_k, g));
        const BlockMask m = keys.block_mask(grid);
        for (std::int64_t qt = 0; qt < grid.query_tiles(); ++qt) {
          ASSERT_EQ(m.end(qt) - m.begin(qt), 1);
          EXPECT_TRUE(m.begin(qt)->full);
        }
      }
    }
  }
}

TEST(BlockMask, BandWithGlobalTokens) {
  const std::vector<std::int64_t> globals[] = {{}, {0}, {2, 40, 79}, {5, 6, 7, 129}};
  for (const std::int64_t seq_q : kSeqs) {
    for (const std::int64_t seq_k : kSeqs) {
      for (const GridShape g : kGrids) {
        for (const std::int64_t left : {0, 5, 40}) {
          for (const auto& global : globals) {
            const Band keys(seq_q, seq_k, left, left / 2 + 1, global);
            CheckMask(keys, {g.query_tile, g.key_tile, seq_q, seq_k},
                      Describe("band", seq_q, seq_k, g) + " left " + std::to_string(left) +
                          " globals " + std::to_string(global.size()));
          }
        }
      }
    }
  }
}

TEST(BlockMask, RandomRowRangesWithEmptyRows) {
  std::mt19937 rng(1234);
  for (const std::int64_t seq_q : kSeqs) {
    for (const std::int64_t seq_k : kSeqs) {
      for (const GridShape g : kGrids) {
        const RowKeyRanges keys = RandomRows(seq_q, seq_k, rng);
        CheckMask(keys, {g.query_tile, g.key_tile, seq_q, seq_k},
                  Describe("row ranges", seq_q, seq_k, g));
      }
    }
  }
}

// A band's middle tiles are full and only its edge tiles partial: the kernel runs the element
// or range mask on O(1) tiles per query tile, not on all of them.
TEST(BlockMask, BandMiddleIsFull) {
  const Band keys(4096, 4096, 256, 256, {});
  const BlockMask m = keys.block_mask({64, 64, 4096, 4096});
  const std::int64_t qt = 32;  // rows 2048..2111: row i sees keys i - 256 .. i + 256
  std::int64_t full = 0, partial = 0;
  for (const KeyRun* run = m.begin(qt); run != m.end(qt); ++run)
    (run->full ? full : partial) += run->last - run->first;
  EXPECT_EQ(full, 7);     // tiles 29..35: keys 1856..2303, seen by every row
  EXPECT_EQ(partial, 2);  // tiles 28 and 36: keys 1792.. and ..2367, not seen by every row
}

// ALiBi's reorder of a work item's tiles is std::stable_sort's order by distance from the
// diagonal (the kernel's result depends on the order, and the merge replaced the sort so that a
// run allocates nothing): random increasing tile lists with gaps, tile widths 1..64, diagonals
// before, inside and past the tiles, ties included (two tiles at the same distance on either
// side, and the tile holding the diagonal at 0).
TEST(TileOrder, NearestFirstIsStableSortByDistance) {
  struct Tile {
    std::int64_t tile = 0;
    bool full = false;
  };
  std::mt19937_64 rng(7);
  int compared = 0, with_ties = 0;
  for (int round = 0; round < 2000; ++round) {
    const std::int64_t width = std::int64_t{1} << (rng() % 7);
    std::vector<Tile> tiles;
    for (std::int64_t kt = 0; kt < 40; ++kt) {
      if (rng() % 3 != 0) tiles.push_back({kt, rng() % 2 == 0});  // gaps: skipped tiles
    }
    const auto diagonal = static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(44 * width));
    std::vector<Tile> merged(tiles.size()), sorted = tiles;
    seqattn::detail::nearest_tiles_first(tiles.data(), tiles.size(), width, diagonal,
                                         merged.data());
    auto distance = [&](const Tile& t) {
      return seqattn::detail::tile_distance(t.tile, width, diagonal);
    };
    std::stable_sort(sorted.begin(), sorted.end(),
                     [&](const Tile& a, const Tile& b) { return distance(a) < distance(b); });
    for (size_t i = 0; i < tiles.size(); ++i) {
      ASSERT_EQ(merged[i].tile, sorted[i].tile) << "round " << round << ", position " << i;
      ASSERT_EQ(merged[i].full, sorted[i].full);
    }
    for (size_t i = 1; i < sorted.size(); ++i)
      with_ties += distance(sorted[i]) == distance(sorted[i - 1]);
    compared += static_cast<int>(tiles.size());
  }
  EXPECT_GT(with_ties, 100);  // the tie rule was exercised
  EXPECT_GT(compared, 40000);
}

}  // namespace
