#include "variants/hierarchical/hierarchy.hpp"

#include <algorithm>
#include <limits>
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

// The block slots level l keeps (LevelLayout::ring; 0 = every block). A level the windows
// coarsen needs a block only until its neighbours' attention has run, at most a window later,
// so it keeps a ring of the blocks a window makes plus a margin, and its keys and values stay
// in cache instead of streaming through memory (kept whole, every level together was ~17 MB
// per (batch, kv head) at S = 65536, D = 64, written and read back once each). With `span`
// the level-l blocks a window covers, rounded up (each 2^l·b fine rows):
//  - causal: block j is last read by the rows of block j + 1 (fine rows below (j + 2)·2^l·b)
//    and its slot next written for block j + ring (from fine row (j + ring)·2^l·b), in a later
//    window when (ring - 2)·2^l·b >= the window: ring >= span + 2;
//  - paired: block j is last read by the run of block j + 1, after the window that completes
//    block j + 2, and its slot next written for block j + 2·ring: (2·ring - 3)·2^l·b >= the
//    window, ring >= (span + 3) / 2 rounded up.
// One slot more than that minimum each (the tests fail with one slot less than it). The level
// that the levels above the windows coarsen from keeps every block.
std::int64_t ring_blocks(const Hierarchy& h, std::int64_t l, std::int64_t window_rows) {
  if (l > h.window_levels || (l == h.window_levels && h.levels > h.window_levels)) return 0;
  const std::int64_t span = window_rows / (h.block << l) + 1;
  return h.causal ? span + 3 : (span + 4) / 2 + 1;
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

std::vector<Level0Window> level0_windows(std::int64_t seq, std::int64_t block,
                                         std::int64_t window_rows, bool causal) {
  std::vector<Level0Window> windows;
  for (std::int64_t first = 0; first < seq; first += window_rows) {
    Level0Window w;
    w.first_row = first;
    w.rows = std::min(window_rows, seq - first);
    w.first_key = level0_range(first, block, seq).lo;
    w.keys = level0_range(first + w.rows - 1, block, seq).hi - w.first_key;
    w.pattern = pattern_of_rows(w.rows, [&](std::int64_t r) {
      const std::int64_t i = first + r;
      KeyRangeOfRow range = level0_range(i, block, seq);
      if (causal) range.hi = std::min(range.hi, i + 1);
      return KeyRangeOfRow{range.lo - w.first_key, range.hi - w.first_key};
    });
    windows.push_back(std::move(w));
  }
  return windows;
}

LevelLayout make_level_layout(std::int64_t len, std::int64_t block, bool paired,
                              std::int64_t ring) {
  LevelLayout l;
  l.len = len;
  l.block = block;
  l.blocks = (len + block - 1) / block;
  l.paired = paired;
  const std::int64_t per_region = paired ? (l.blocks + 1) / 2 : l.blocks;
  l.ring = ring > 0 && ring < per_region ? ring : 0;
  if (l.ring == 0) {
    l.key_rows = paired ? l.blocks * block : len;
  } else {
    l.key_rows = paired ? 2 * (l.ring + 1) * block : l.ring * block;
  }
  if (!paired && l.ring == 0) return l;
  const std::int64_t half = block / 2;
  const auto at = [&](std::int64_t u) {
    const std::int64_t within = u % block;
    if (!paired) return l.slot_of(u / block) + within;
    return l.slot_of(u / block) + (within < half ? within + half : within - half);
  };
  l.key_position.resize(static_cast<size_t>(len));
  for (std::int64_t u = 0; u < len; ++u) l.key_position[static_cast<size_t>(u)] = at(u);
  if (!paired) return l;
  l.query_position.resize(static_cast<size_t>(len));
  for (std::int64_t t = 0; t < len; ++t)
    l.query_position[static_cast<size_t>(t)] = l.slot_of(t / block) + t % block;
  // The last block's positions past the last token (and their mirror): dummies.
  for (std::int64_t u = len; u < l.blocks * block; ++u) {
    l.key_dummies.push_back(at(u));
    const std::int64_t j = u / block;
    if (l.ring_wraps_at(j)) l.key_dummies.push_back(at(u) + l.ring * block);
  }
  return l;
}

std::int64_t LevelLayout::slot_of(std::int64_t j) const {
  if (!paired) return (ring == 0 ? j : j % ring) * block;
  const std::int64_t k = j / 2;
  if (ring == 0) return (j % 2 == 0 ? k : (blocks + 1) / 2 + k) * block;
  return ((j % 2) * (ring + 1) + k % ring) * block;
}

bool LevelLayout::ring_wraps_at(std::int64_t j) const {
  return ring != 0 && (paired ? j / 2 : j) % ring == 0;
}

std::int64_t LevelLayout::key_mirror(std::int64_t u) const {
  const std::int64_t j = u / block;
  if (!paired || !ring_wraps_at(j)) return -1;
  return key_at(u) + ring * block;
}

KeyRangeOfRow LevelLayout::row_keys(std::int64_t t) const {
  if (!paired) {
    const KeyRangeOfRow r = coarse_range(t, block, LevelSide::kLeft, len);
    if (r.hi <= r.lo) return {0, 0};
    const std::int64_t j = r.lo / block;  // the left range lies inside one block
    return {slot_of(j) + r.lo - j * block, slot_of(j) + r.hi - j * block};
  }
  const std::int64_t half = block / 2, I = t / block, odd = (t / half) % 2;
  const bool left = I >= 1, right = I + 1 < blocks;
  // Left: half 2I-2 (stored second) for an even half, both halves for an odd one.
  // Right: both halves for an even half, half 2I+3 (stored first) for an odd one.
  // With both sides block I + 1 sits right after block I - 1 (in the mirror if it wrapped to
  // slot 0): one range.
  const std::int64_t right_base = left ? slot_of(I - 1) + block : slot_of(I + 1);
  const std::int64_t lo = left ? slot_of(I - 1) + (odd != 0 ? 0 : half) : right ? right_base : 0;
  const std::int64_t hi = right  ? right_base + (odd != 0 ? half : block)
                          : left ? slot_of(I - 1) + block
                                 : 0;
  return {lo, hi};
}

namespace {

// A call over rows [first_row, first_row + lo.size()) whose key ranges are [lo, hi) (hi <= lo:
// none) in the levels' common key rows; lo and hi are rewritten relative to its first key.
CoarseRun run_of(std::int64_t first_row, std::int64_t first_query, std::vector<std::int64_t>& lo,
                 std::vector<std::int64_t>& hi) {
  CoarseRun run;
  run.first_row = first_row;
  run.first_query = first_query;
  run.rows = static_cast<std::int64_t>(lo.size());
  std::int64_t first = std::numeric_limits<std::int64_t>::max(), last = 0;
  for (size_t r = 0; r < lo.size(); ++r) {
    if (hi[r] <= lo[r]) continue;
    first = std::min(first, lo[r]);
    last = std::max(last, hi[r]);
  }
  if (last == 0) first = 0;
  run.first_key = first;
  run.keys = last - first;
  for (size_t r = 0; r < lo.size(); ++r) {
    const bool empty = hi[r] <= lo[r];
    lo[r] = empty ? 0 : lo[r] - first;
    hi[r] = empty ? 0 : hi[r] - first;
  }
  run.pattern = RowKeyRanges(lo, hi);
  return run;
}

}  // namespace

std::vector<std::int64_t> level_key_bases(const std::vector<LevelLayout>& layouts) {
  std::vector<std::int64_t> base(layouts.size() + 1, 0);
  for (size_t l = 0; l < layouts.size(); ++l) base[l + 1] = base[l] + layouts[l].key_rows;
  return base;
}

CoarseSchedule coarse_schedule(const std::vector<LevelLayout>& layouts,
                               const std::vector<Level0Window>& windows,
                               std::int64_t window_levels) {
  CoarseSchedule s;
  const std::vector<std::int64_t> key_base = level_key_bases(layouts);
  for (const LevelLayout& layout : layouts) s.row.emplace_back(layout.len, -1);
  std::vector<CoarseRun> segment;
  const auto add_blocks = [&](size_t level, std::int64_t from, std::int64_t to) {
    const LevelLayout& layout = layouts[level];
    for (const std::int64_t parity : {1, 0}) {
      std::vector<std::int64_t> lo, hi;
      std::int64_t first = s.rows, first_query = 0;
      for (std::int64_t block = from; block < to; ++block) {
        if (block % 2 != parity) continue;
        // Its keys (block - 1 first) or its queries restart at slot 0: a new run.
        const bool wraps =
            (block >= 1 && layout.ring_wraps_at(block - 1)) || layout.ring_wraps_at(block);
        if (wraps && !lo.empty()) {
          segment.push_back(run_of(first, first_query, lo, hi));
          lo.clear();
          hi.clear();
        }
        if (lo.empty()) {
          first = s.rows;
          first_query = key_base[level] + layout.query_at(block * layout.block);
        }
        const std::int64_t end = std::min((block + 1) * layout.block, layout.len);
        for (std::int64_t t = block * layout.block; t < end; ++t) {
          s.row[level][static_cast<size_t>(t)] = s.rows++;
          const KeyRangeOfRow keys = layout.row_keys(t);
          lo.push_back(key_base[level] + keys.lo);
          hi.push_back(key_base[level] + keys.hi);
        }
      }
      if (!lo.empty()) segment.push_back(run_of(first, first_query, lo, hi));
    }
  };
  const auto close_segment = [&] {
    s.segments.push_back(std::move(segment));
    segment = {};
  };
  std::vector<std::int64_t> next(layouts.size(), 0);  // per level, the first block not listed
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::int64_t end = windows[w].first_row + windows[w].rows;
    for (std::int64_t l = 1; l <= window_levels; ++l) {
      const auto level = static_cast<size_t>(l - 1);
      const LevelLayout& layout = layouts[level];
      // Block I is ready once block I + 1 is: the window ends on a multiple of 2^l (or the
      // sequence), so its coarse tokens of level l are [0, end >> l).
      const bool last = w + 1 == windows.size();
      const std::int64_t ready =
          last ? layout.blocks : std::max(next[level], (end >> l) / layout.block - 1);
      add_blocks(level, next[level], ready);
      next[level] = ready;
    }
    close_segment();
  }
  for (size_t level = static_cast<size_t>(window_levels); level < layouts.size(); ++level)
    add_blocks(level, 0, layouts[level].blocks);
  close_segment();
  return s;
}

std::vector<CoarseRun> causal_runs(const LevelLayout& layout, std::int64_t key_base,
                                   std::int64_t first, std::int64_t end, std::int64_t level) {
  std::vector<CoarseRun> runs;
  std::vector<std::int64_t> lo, hi;
  std::int64_t run_first = first, last_block = -1;
  for (std::int64_t i = first; i < end; ++i) {
    const std::int64_t t = i >> level, left = t / layout.block - 1;  // the block it sees
    if (left != last_block && left >= 0 && layout.ring_wraps_at(left) && !lo.empty()) {
      runs.push_back(run_of(run_first - first, run_first - first, lo, hi));
      lo.clear();
      hi.clear();
      run_first = i;
    }
    last_block = left;
    const KeyRangeOfRow keys = layout.row_keys(t);
    lo.push_back(key_base + keys.lo);
    hi.push_back(key_base + keys.hi);
  }
  if (!lo.empty()) runs.push_back(run_of(run_first - first, run_first - first, lo, hi));
  return runs;
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

Hierarchy build_hierarchy(std::int64_t seq, std::int64_t block, std::int64_t levels, bool causal) {
  Hierarchy h;
  h.block = block;
  h.seq = seq;
  h.levels = levels;
  h.causal = causal;
  if (h.levels == 0) {
    h.level0 = level0_pattern(h.seq, h.block);
    return h;
  }
  h.windows = level0_windows(h.seq, h.block, kWindowRows, h.causal);
  h.window_levels = std::min(h.levels, kWindowLevels);
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    h.layouts.push_back(make_level_layout(level_length(h.seq, l), h.block, !h.causal,
                                          ring_blocks(h, l, h.windows[0].rows)));
  }
  h.key_base = level_key_bases(h.layouts);
  if (!h.causal) {
    h.schedule = coarse_schedule(h.layouts, h.windows, h.window_levels);
    return h;
  }
  const auto runs_of = [&](const Level0Window& w, std::int64_t first_level,
                           std::int64_t last_level) {
    std::vector<CoarseRun> runs;
    for (std::int64_t l = first_level; l <= last_level; ++l) {
      for (CoarseRun& run : causal_runs(h.layouts[static_cast<size_t>(l - 1)],
                                        h.key_base[static_cast<size_t>(l - 1)], w.first_row,
                                        w.first_row + w.rows, l))
        runs.push_back(std::move(run));
    }
    return runs;
  };
  for (const Level0Window& w : h.windows) {
    h.causal_windows.push_back(runs_of(w, 1, h.window_levels));
    h.causal_above.push_back(runs_of(w, h.window_levels + 1, h.levels));
  }
  return h;
}

}  // namespace seqattn::detail
