// Which keys a shard's queries see in another shard, in the kernel's terms. Pure functions of
// the agreed layout: every rank computes the same schedule without asking the others.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "seqattn/mpi/ring.hpp"

namespace seqattn::mpi {

using Pieces = std::vector<ShardLayout::Piece>;

// Keys of `pieces` (in order) that are valid when the sequence has `length` valid keys: a
// prefix, because the pieces of a shard are in increasing position order.
std::int64_t valid_prefix(const Pieces& pieces, std::int64_t rows, std::int64_t length);

// Zig-zag causal: how many leading pieces of the key shard lie entirely before the query
// piece (all visible); the rest lie entirely after it (none visible).
std::size_t pieces_before(const Pieces& keys, const ShardLayout::Piece& query);

// Sliding window between contiguous shards: the query rows [i0, i1) and key rows [j0, j1)
// that see each other, and the window {left, right} that reproduces the global band on those
// sub-blocks under the kernel's end alignment (query i sits at key i + S_k' - S_q').
struct BandBlock {
  std::int64_t i0 = 0, i1 = 0, j0 = 0, j1 = 0;
  std::int64_t left = 0, right = 0;
};
std::optional<BandBlock> band_block(const ShardLayout::Piece& queries,
                                    const ShardLayout::Piece& keys, std::int64_t left,
                                    std::int64_t right);

}  // namespace seqattn::mpi
