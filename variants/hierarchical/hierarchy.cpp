#include "variants/hierarchical/hierarchy.hpp"

#include <algorithm>
#include <utility>

namespace seqattn::detail {
namespace {

KeyRangeOfRow clipped(std::int64_t lo, std::int64_t hi, std::int64_t len) {
  return {std::clamp<std::int64_t>(lo, 0, len), std::clamp<std::int64_t>(hi, 0, len)};
}

std::int64_t width(KeyRangeOfRow r) { return std::max<std::int64_t>(r.hi - r.lo, 0); }

RowKeyRanges pattern_of_rows(std::int64_t rows,
                             const auto& range_of_row) {  // row -> KeyRangeOfRow
  std::vector<std::int64_t> lo(static_cast<size_t>(rows)), hi(static_cast<size_t>(rows));
  for (std::int64_t r = 0; r < rows; ++r) {
    const KeyRangeOfRow range = range_of_row(r);
    lo[static_cast<size_t>(r)] = range.lo;
    hi[static_cast<size_t>(r)] = range.hi;
  }
  return RowKeyRanges(lo, hi);
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

RowKeyRanges level0_pattern(std::int64_t seq, std::int64_t block) {
  return pattern_of_rows(seq, [&](std::int64_t i) { return level0_range(i, block, seq); });
}

namespace {

// Paired keys: even blocks first, each block's second half before its first.
std::int64_t paired_key_slot(std::int64_t j, std::int64_t blocks) {
  return j % 2 == 0 ? j / 2 : (blocks + 1) / 2 + j / 2;
}

// Paired queries: odd blocks first (their keys sit in the even slots), then even blocks.
std::int64_t paired_query_slot(std::int64_t i, std::int64_t blocks) {
  return i % 2 == 1 ? i / 2 : blocks / 2 + i / 2;
}

// Positions [0, count) not in `used`.
std::vector<std::int64_t> unused_of(const std::vector<std::int64_t>& used, std::int64_t count) {
  std::vector<std::uint8_t> taken(static_cast<size_t>(count), 0);
  for (const std::int64_t p : used) taken[static_cast<size_t>(p)] = 1;
  std::vector<std::int64_t> free;
  for (std::int64_t p = 0; p < count; ++p) {
    if (taken[static_cast<size_t>(p)] == 0) free.push_back(p);
  }
  return free;
}

}  // namespace

LevelLayout make_level_layout(std::int64_t len, std::int64_t block, bool paired) {
  LevelLayout l;
  l.len = len;
  l.block = block;
  l.blocks = (len + block - 1) / block;
  l.paired = paired;
  l.key_rows = l.query_rows = paired ? l.blocks * block : len;
  if (!paired) return l;
  const std::int64_t half = block / 2;
  l.key_position.resize(static_cast<size_t>(len));
  l.query_position.resize(static_cast<size_t>(len));
  l.query_token.assign(static_cast<size_t>(l.query_rows), -1);
  for (std::int64_t u = 0; u < len; ++u) {
    const std::int64_t j = u / block, within = u % block;
    const std::int64_t swapped = within < half ? within + half : within - half;
    l.key_position[static_cast<size_t>(u)] = paired_key_slot(j, l.blocks) * block + swapped;
    const std::int64_t q = paired_query_slot(j, l.blocks) * block + within;
    l.query_position[static_cast<size_t>(u)] = q;
    l.query_token[static_cast<size_t>(q)] = u;
  }
  l.key_dummies = unused_of(l.key_position, l.key_rows);
  l.query_dummies = unused_of(l.query_position, l.query_rows);
  return l;
}

KeyRangeOfRow LevelLayout::row_keys(std::int64_t t) const {
  if (!paired) return coarse_range(t, block, LevelSide::kLeft, len);
  const std::int64_t half = block / 2, I = t / block, odd = (t / half) % 2;
  const auto base = [&](std::int64_t j) { return paired_key_slot(j, blocks) * block; };
  const bool left = I >= 1, right = I + 1 < blocks;
  // Left: half 2I-2 (stored second) for an even half, both halves for an odd one.
  // Right: both halves for an even half, half 2I+3 (stored first) for an odd one.
  // With both sides, base(I + 1) = base(I - 1) + block: one range.
  const std::int64_t lo = left ? base(I - 1) + (odd != 0 ? 0 : half) : right ? base(I + 1) : 0;
  const std::int64_t hi = right  ? base(I + 1) + (odd != 0 ? half : block)
                          : left ? base(I - 1) + block
                                 : 0;
  return {lo, hi};
}

RowKeyRanges paired_pattern(const LevelLayout& layout) {
  return pattern_of_rows(layout.query_rows, [&](std::int64_t r) {
    const std::int64_t t = layout.query_token[static_cast<size_t>(r)];
    return t < 0 ? KeyRangeOfRow{0, 0} : layout.row_keys(t);
  });
}

RowKeyRanges causal_pattern(const LevelLayout& layout, std::int64_t seq, std::int64_t level) {
  return pattern_of_rows(seq, [&](std::int64_t i) { return layout.row_keys(i >> level); });
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
