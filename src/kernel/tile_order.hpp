// ALiBi's visiting order of a work item's key tiles (FlashWorker, flash_worker_body.inc), as a
// function of the tiles alone, so that a test compares it with std::stable_sort's.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqattn::detail {

// Distance in keys from position `diagonal` to key tile kt (keys [kt·width, (kt + 1)·width)):
// 0 for the tile holding it.
inline std::int64_t tile_distance(std::int64_t kt, std::int64_t width, std::int64_t diagonal) {
  const std::int64_t j0 = kt * width, j1 = j0 + width;
  return diagonal < j0 ? j0 - diagonal : diagonal >= j1 ? diagonal - j1 + 1 : 0;
}

// out[0, n) = in[0, n) (Tile::tile increasing) stably ordered by tile_distance. In increasing
// order the distances fall strictly over the tiles wholly before the diagonal, then rise
// strictly, so the stable order merges the first part, read backwards, with the rest, a tie
// going to the earlier tile: std::stable_sort's order without its buffer (a steady run in a
// workspace allocates nothing). in and out must not overlap.
template <class Tile>
void nearest_tiles_first(const Tile* in, std::size_t n, std::int64_t width, std::int64_t diagonal,
                         Tile* out) {
  std::size_t before = 0;  // tiles wholly before the diagonal
  while (before < n && (in[before].tile + 1) * width <= diagonal) ++before;
  std::size_t low = before, high = before, at = 0;  // low counts down over [0, before)
  while (low > 0 || high < n) {
    const bool take_low =
        high == n || (low > 0 && tile_distance(in[low - 1].tile, width, diagonal) <=
                                     tile_distance(in[high].tile, width, diagonal));
    out[at++] = take_low ? in[--low] : in[high++];
  }
}

}  // namespace seqattn::detail
