#include "src/mpi/ring_geometry.hpp"

#include <algorithm>

namespace seqattn::mpi {

std::int64_t valid_prefix(const Pieces& pieces, std::int64_t rows, std::int64_t length) {
  std::int64_t valid = 0;
  for (const auto& p : pieces) {
    const std::int64_t take = std::min(p.length, rows);
    const std::int64_t here = std::clamp<std::int64_t>(length - p.start, 0, take);
    valid += here;
    rows -= take;
    if (here < take || rows == 0) break;
  }
  return valid;
}

std::size_t pieces_before(const Pieces& keys, const ShardLayout::Piece& query) {
  std::size_t m = 0;
  while (m < keys.size() && keys[m].start + keys[m].length <= query.start) ++m;
  return m;
}

std::optional<BandBlock> band_block(const ShardLayout::Piece& queries,
                                    const ShardLayout::Piece& keys, std::int64_t left,
                                    std::int64_t right) {
  // Local query i and key j see each other iff lo <= j - i <= hi.
  const std::int64_t delta = keys.start - queries.start;
  const std::int64_t lo = -left - delta, hi = right - delta;
  BandBlock b;
  b.i0 = std::max<std::int64_t>(0, -hi);
  b.i1 = std::min(queries.length, keys.length - lo);
  if (b.i0 >= b.i1) return std::nullopt;
  b.j0 = std::max<std::int64_t>(0, b.i0 + lo);
  b.j1 = std::min(keys.length, b.i1 + hi);
  if (b.j0 >= b.j1) return std::nullopt;
  // On the sub-blocks the kernel sees j' - i' - t in [-left', right'] with t = j1 - i1, and
  // j - i = j' - i' + j0 - i0: so left' = t - lo and right' = hi - t (both >= 0 by the
  // choice of the ranges above).
  const std::int64_t t = b.j1 - b.i1;
  b.left = t - lo;
  b.right = hi - t;
  return b;
}

}  // namespace seqattn::mpi
