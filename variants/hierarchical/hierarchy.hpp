// The block structure of hierarchical attention (HierarchicalSpec in seqattn/options.hpp):
// how many levels a length needs, and which keys each row of each level sees, as the one
// contiguous key range per row (KeyPattern::row_ranges) that the flash kernel visits.
//
// At level l >= 1 a coarse query t sees coarse keys u with |t/b - u/b| <= 1 that no finer
// level covers, |t/(b/2) - u/(b/2)| >= 2. In half-blocks of b/2 (h = t/(b/2), I = t/b) that is
// the half-blocks {2I-2} ∪ {2I+2, 2I+3} for an even h and {2I-2, 2I-1} ∪ {2I+3} for an odd
// one: a left range inside block I-1 and a right range inside block I+1, so each level is two
// kernel calls of one range per row.
#pragma once

#include <cstdint>
#include <vector>

#include "variants/dense/key_pattern.hpp"

namespace seqattn::detail {

struct KeyRangeOfRow {
  std::int64_t lo = 0, hi = 0;  // [lo, hi), clipped to [0, len); empty when hi <= lo
};

enum class LevelSide { kLeft, kRight };

// Coarse levels (above level 0) that cover every pair of a length-`seq` sequence in blocks of
// `block`: the smallest L with at most two level-L blocks.
std::int64_t levels_needed(std::int64_t seq, std::int64_t block);

// Tokens of a level-l sequence: ceil(seq / 2^l).
inline std::int64_t level_length(std::int64_t seq, std::int64_t level) {
  return (seq + (std::int64_t{1} << level) - 1) >> level;
}

// Level 0: row i sees blocks i/b - 1 .. i/b + 1 of a length-len sequence.
KeyRangeOfRow level0_range(std::int64_t i, std::int64_t block, std::int64_t len);

// Level l >= 1: the keys coarse row t sees on one side, in coarse positions of a level of
// length `len`.
KeyRangeOfRow coarse_range(std::int64_t t, std::int64_t block, LevelSide side, std::int64_t len);

// The kernel's patterns: level 0 over `seq` rows; one side of level l over `rows` query rows
// whose coarse position is row >> shift (shift = 0: coarse queries; shift = l: the fine
// queries of the causal form).
KeyPattern level0_pattern(std::int64_t seq, std::int64_t block);
KeyPattern coarse_pattern(std::int64_t rows, std::int64_t shift, std::int64_t level_len,
                          std::int64_t block, LevelSide side);

// Visited (query, key) pairs of one (batch, query head), counted in the units each level
// attends in (fine rows at level 0, coarse or fine rows above), for Cost.
double hierarchy_pairs(std::int64_t seq, std::int64_t block, std::int64_t levels, bool causal);

}  // namespace seqattn::detail
