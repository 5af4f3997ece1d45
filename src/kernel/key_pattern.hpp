// The structural part of visibility, before the Mask parts: every pair (dense), a band
// around the aligned diagonal plus global rows and columns (sliding window), or one key
// range per query row given by the variant (hierarchical levels). The flash kernel asks it
// for each query row's contiguous key range, which drives tile skipping.
#pragma once

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "src/core/problem.hpp"

namespace seqattn::detail {

struct KeyPattern {
  bool banded = false;
  std::int64_t left = 0, right = 0;        // band [i' - left, i' + right], i' = i + S_k - S_q
  std::vector<std::uint8_t> global_query;  // [S_q] for a sliding window: row sees every key
  std::vector<std::uint8_t> global_key;    // [S_k] for a sliding window: column seen by all
  std::vector<std::int64_t> global_keys;   // sorted global key positions < S_k
  // When non-empty ([S_q] each): row i sees keys [row_lo[i], row_hi[i]) instead of the band.
  std::vector<std::int64_t> row_lo, row_hi;

  static KeyPattern dense() { return {}; }

  // One contiguous key range per query row, [lo[i], hi[i]) (empty when hi <= lo); the mask's
  // causal rule and key lengths still apply on top.
  static KeyPattern row_ranges(std::vector<std::int64_t> lo, std::vector<std::int64_t> hi) {
    KeyPattern k;
    k.banded = true;  // no global tokens: their tables stay empty
    k.row_lo = std::move(lo);
    k.row_hi = std::move(hi);
    return k;
  }
  bool explicit_rows() const { return !row_lo.empty(); }

  // Band plus global tokens; `globals` must be sorted, unique and non-negative. Positions index
  // query rows (raw i) and key columns (j), as reference::sliding_window does.
  static KeyPattern sliding_window(const Problem& p, std::int64_t left, std::int64_t right,
                                   const std::vector<std::int64_t>& globals) {
    KeyPattern k;
    k.banded = true;
    // Wider than both sequences is the same as unbounded; clamping keeps i' ± w from overflowing.
    const std::int64_t widest = p.seq_q() + p.seq_k();
    k.left = std::min(left, widest);
    k.right = std::min(right, widest);
    k.global_query.assign(static_cast<size_t>(p.seq_q()), 0);
    k.global_key.assign(static_cast<size_t>(p.seq_k()), 0);
    for (std::int64_t g : globals) {
      if (g < p.seq_q()) k.global_query[static_cast<size_t>(g)] = 1;
      if (g < p.seq_k()) {
        k.global_key[static_cast<size_t>(g)] = 1;
        k.global_keys.push_back(g);
      }
    }
    return k;
  }

  bool is_global_query(std::int64_t i) const {
    return !global_query.empty() && global_query[static_cast<size_t>(i)] != 0;
  }
  bool is_global_key(std::int64_t j) const {
    return !global_key.empty() && global_key[static_cast<size_t>(j)] != 0;
  }
  // Whether the pattern (alone) lets query i see key j; offset = S_k - S_q.
  bool allows(std::int64_t i, std::int64_t j, std::int64_t offset) const {
    if (!banded || is_global_query(i) || is_global_key(j)) return true;
    if (explicit_rows())
      return j >= row_lo[static_cast<size_t>(i)] && j < row_hi[static_cast<size_t>(i)];
    return j >= i + offset - left && j <= i + offset + right;
  }
};

}  // namespace seqattn::detail
