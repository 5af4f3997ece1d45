#include "variants/hierarchical/hierarchy.hpp"

#include <algorithm>
#include <utility>

namespace seqattn::detail {
namespace {

KeyRangeOfRow clipped(std::int64_t lo, std::int64_t hi, std::int64_t len) {
  return {std::clamp<std::int64_t>(lo, 0, len), std::clamp<std::int64_t>(hi, 0, len)};
}

std::int64_t width(KeyRangeOfRow r) { return std::max<std::int64_t>(r.hi - r.lo, 0); }

KeyPattern pattern_of_rows(std::int64_t rows, std::int64_t seq_k,
                           const auto& range_of_row) {  // row -> KeyRangeOfRow
  std::vector<std::int64_t> lo(static_cast<size_t>(rows)), hi(static_cast<size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const KeyRangeOfRow range = range_of_row(r);
    lo[static_cast<size_t>(r)] = range.lo;
    hi[static_cast<size_t>(r)] = range.hi;
  }
  return KeyPattern::row_ranges(std::move(lo), std::move(hi), seq_k);
}

}  // namespace

std::int64_t levels_needed(std::int64_t seq, std::int64_t block) {
  std::int64_t levels = 0;
  // ceil(seq / (block·2^L)) <= 2  <=>  seq <= 2·block·2^L
  while (seq > 2 * (block << levels)) ++levels;
  return levels;
}

KeyRangeOfRow level0_range(std::int64_t i, std::int64_t block, std::int64_t len) {
  const std::int64_t first = (i / block - 1) * block;
  return clipped(first, first + 3 * block, len);
}

KeyRangeOfRow coarse_range(std::int64_t t, std::int64_t block, LevelSide side, std::int64_t len) {
  const std::int64_t half = block / 2, odd = (t / half) % 2, I = t / block;
  if (side == LevelSide::kLeft) {
    if (I == 0) return {0, 0};
    const std::int64_t lo = (I - 1) * block;
    return clipped(lo, lo + (odd != 0 ? block : half), len);
  }
  const std::int64_t hi = (I + 2) * block;
  return clipped((I + 1) * block + (odd != 0 ? half : 0), hi, len);
}

KeyPattern level0_pattern(std::int64_t seq, std::int64_t block) {
  return pattern_of_rows(seq, seq, [&](std::int64_t i) { return level0_range(i, block, seq); });
}

KeyPattern coarse_pattern(std::int64_t rows, std::int64_t shift, std::int64_t level_len,
                          std::int64_t block, LevelSide side) {
  return pattern_of_rows(rows, level_len, [&](std::int64_t r) {
    return coarse_range(r >> shift, block, side, level_len);
  });
}

double hierarchy_pairs(std::int64_t seq, std::int64_t block, std::int64_t levels, bool causal) {
  double pairs = 0;
  for (std::int64_t i = 0; i < seq; ++i) {
    KeyRangeOfRow r = level0_range(i, block, seq);
    if (causal) r.hi = std::min(r.hi, i + 1);
    pairs += static_cast<double>(width(r));
  }
  for (std::int64_t l = 1; l <= levels; ++l) {
    const std::int64_t len = level_length(seq, l);
    if (causal) {  // fine query rows, left side only
      for (std::int64_t i = 0; i < seq; ++i)
        pairs += static_cast<double>(width(coarse_range(i >> l, block, LevelSide::kLeft, len)));
      continue;
    }
    for (std::int64_t t = 0; t < len; ++t) {
      pairs += static_cast<double>(width(coarse_range(t, block, LevelSide::kLeft, len)) +
                                   width(coarse_range(t, block, LevelSide::kRight, len)));
    }
  }
  return pairs;
}

}  // namespace seqattn::detail
