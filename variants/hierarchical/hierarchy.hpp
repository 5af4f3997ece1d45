// The block structure of hierarchical attention (HierarchicalSpec in seqattn/options.hpp):
// how many levels a length needs, and which keys each row of each level sees, as the one
// contiguous key range per row (RowKeyRanges, a KeyStructure) that the flash kernel visits;
// and, built from them for a shape (Hierarchy), the windows, rings and kernel calls of a run.
//
// At level l >= 1 a coarse query t sees coarse keys u with |t/b - u/b| <= 1 that no finer
// level covers, |t/(b/2) - u/(b/2)| >= 2. In half-blocks of b/2 (h = t/(b/2), I = t/b) that is
// the half-blocks {2I-2} ∪ {2I+2, 2I+3} for an even h and {2I-2, 2I-1} ∪ {2I+3} for an odd
// one: a left range inside block I-1 and a right range inside block I+1.
//
// The kernel visits one contiguous key range per row, so each level stores its coarse keys in
// an order that makes both ranges one: blocks by parity (even blocks, then odd ones), so that
// blocks I-1 and I+1 sit side by side for every I, and the two halves of each block swapped
// (half 2J+1 first, then 2J). Block I's rows then see [2I-1 | 2I-2, 2I+3 | 2I+2]: positions
// b/2 .. 2b of the pair of slots for an even half (2I-2, 2I+3, 2I+2) and 0 .. 1.5b for an odd
// one (2I-1, 2I-2, 2I+3), one kernel call per level with 1.5·b keys per row. Positions of a
// partial last block that hold no token are dummies the variant gives a score of -inf.
#pragma once

#include <cstdint>
#include <vector>

#include "src/kernel/block_mask.hpp"

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

// Level 0 in windows of query rows (so that the coarsening that follows each window finds its
// rows in cache): rows [first_row, first_row + rows) against keys [first_key, first_key +
// keys), the pattern's ranges relative to first_key. A causal window cuts each range at the
// row's own position (the kernel's causal flag would align the window's corners instead).
struct Level0Window {
  std::int64_t first_row = 0, rows = 0, first_key = 0, keys = 0;
  RowKeyRanges pattern;
};
std::vector<Level0Window> level0_windows(std::int64_t seq, std::int64_t block,
                                         std::int64_t window_rows, bool causal);

// Level l >= 1: the keys coarse row t sees on one side, in coarse positions of a level of
// length `len`.
KeyRangeOfRow coarse_range(std::int64_t t, std::int64_t block, LevelSide side, std::int64_t len);

// Where a level's coarse keys are stored. Causal levels keep the natural order (a row sees
// only its left range, already contiguous) and their queries are the fine rows. Non-causal
// levels are `paired` (see the top of this file): keys by block parity with halves swapped.
// Positions of a partial last block that hold no token are dummies, keys scoring -inf.
//
// A level may keep only its last few blocks, in a ring of block slots (per parity when
// paired): block j takes slot (j / 2) mod ring of its parity (j mod ring unpaired), so a slot
// is reused `ring` blocks of that parity later. A paired ring has one more slot per parity
// that mirrors slot 0, so that blocks I-1 and I+1 are adjacent even when I+1 wraps to slot 0;
// a kernel call whose keys would run on past the mirror starts a new call (slot_of says where
// each block is, and ring_wraps_at whether a call must break before a block).
struct LevelLayout {
  std::int64_t len = 0, block = 0, blocks = 0;
  bool paired = false;
  std::int64_t ring = 0;                   // slots per parity (paired) or in all; 0: every block
  std::int64_t key_rows = 0;               // stored positions, dummies and mirrors included
  std::vector<std::int64_t> key_position;  // [len] where token u's key is (empty: at u)
  std::vector<std::int64_t> key_dummies;   // positions of the last block's slot with no token

  std::int64_t key_at(std::int64_t u) const {
    return key_position.empty() ? u : key_position[static_cast<size_t>(u)];
  }
  // Coarse queries (paired levels) take the same slots as keys, without the halves swapped:
  // a run of blocks of one parity is then consecutive rows until the ring wraps.
  std::vector<std::int64_t> query_position;  // [len] where query t is (empty: at t)
  std::int64_t query_at(std::int64_t t) const {
    return query_position.empty() ? t : query_position[static_cast<size_t>(t)];
  }
  // The mirror of token u's key (a paired ring's copy of slot 0), or -1.
  std::int64_t key_mirror(std::int64_t u) const;
  // The stored position of block j's first row (slot start).
  std::int64_t slot_of(std::int64_t j) const;
  // Whether block j sits in slot 0 of a ring that wraps (a call reading keys in order cannot
  // go from the block before it to block j).
  bool ring_wraps_at(std::int64_t j) const;
  // The stored key positions coarse token t sees: both sides when paired, else the left side.
  KeyRangeOfRow row_keys(std::int64_t t) const;
};
// ring = 0, or at least as many slots as the level has blocks (of a parity): every block.
LevelLayout make_level_layout(std::int64_t len, std::int64_t block, bool paired,
                              std::int64_t ring = 0);

// One kernel call over coarse keys: query rows [first_row, first_row + rows) against key rows
// [first_key, first_key + keys) of the levels' common key rows, the pattern's ranges relative
// to first_key. A call's keys are only those its rows visit: the kernel packs what lies
// between a query tile's first and last key, and sizes its ring by that span.
struct CoarseRun {
  std::int64_t first_row = 0, rows = 0, first_key = 0, keys = 0;
  std::int64_t first_query = 0;  // the run's queries are rows from here (a level's layout)
  RowKeyRanges pattern;
};

// Level 0's pattern over `seq` rows.
RowKeyRanges level0_pattern(std::int64_t seq, std::int64_t block);
// Causal: fine query rows [first, end) against level `level`, whose keys start at row
// key_base; row i sees coarse token (i >> level)'s left keys. The runs number their rows (and
// queries) from `first`: they read a window's copy of its fine queries. More than one call
// where the keys wrap around the level's ring.
std::vector<CoarseRun> causal_runs(const LevelLayout& layout, std::int64_t key_base,
                                   std::int64_t first, std::int64_t end, std::int64_t level);

// Non-causal coarse queries in the order level 0's windows make them ready, so that each
// level's attention runs while its coarse tokens are still in cache instead of in a pass of
// its own over the level. Levels store their keys one after another (level l from key_base[l -
// 1]); after window w, whose rows coarsened levels 1..window_levels, segment w holds the query
// blocks of those levels whose neighbour blocks are complete (every remaining one after the
// last window); one more segment holds the levels above window_levels, coarsened after the
// windows. Within a segment each level lists its odd blocks, then its even ones, so that
// consecutive rows see consecutive key slots (see the top of this file); each level's odd and
// even blocks are a kernel call (a run) of their own.
struct CoarseSchedule {
  std::vector<std::vector<std::int64_t>> row;    // [l - 1][t]: where level l's query t is
  std::vector<std::vector<CoarseRun>> segments;  // one per window, then the levels above
  std::int64_t rows = 0;
};
std::vector<std::int64_t> level_key_bases(const std::vector<LevelLayout>& layouts);
CoarseSchedule coarse_schedule(const std::vector<LevelLayout>& layouts,
                               const std::vector<Level0Window>& windows,
                               std::int64_t window_levels);

// Level 0 runs in windows of this many query rows, each followed by the coarsening of its
// rows through every level a window holds whole groups of (log2 of it), while they are in
// cache: at D = 64 a window's q, k, v and out are 1 MiB together, inside a 2 MiB L2. With a
// pass per level over the whole sequence instead, the coarsening re-read q, k and v from
// memory and every level from the one below: at S = 65536 it took twice as long per token as
// at S = 4096 (0.5 -> 1.0 us per token for the keys, 0.21 -> 0.54 for the queries; H = 8, one
// thread, Sapphire Rapids). Windows of 256 and 512 rows measured within noise of 1024.
inline constexpr std::int64_t kWindowLevels = 10;
inline constexpr std::int64_t kWindowRows = std::int64_t{1} << kWindowLevels;

// Everything that depends on the shape and the spec: the level count, level 0's windows, per
// coarse level (index l - 1) the stored order of its keys, and the rows the kernel visits at
// each level: the coarse query schedule, or (causal) fine query rows, window by window for
// every level (those above the windows' reach after all the windows).
struct Hierarchy {
  std::int64_t block = 0, levels = 0, seq = 0;
  bool causal = false;
  RowKeyRanges level0;                // without coarse levels: the one call
  std::vector<Level0Window> windows;  // with them: level 0 window by window
  std::int64_t window_levels = 0;     // the levels each window coarsens (whole groups)
  std::vector<LevelLayout> layouts;
  std::vector<std::int64_t> key_base;  // [l - 1]: level l's first key row; [levels]: all rows
  CoarseSchedule schedule;             // non-causal
  // Causal: [w] the calls of window w's fine rows (numbered from the window's first row)
  // against each level <= window_levels, more than one for a level whose ring wraps inside
  // the window; and against the levels above, which run after the windows.
  std::vector<std::vector<CoarseRun>> causal_windows, causal_above;
};
// The structure for a length-`seq` sequence in blocks of `block` with `levels` coarse levels
// (resolved: 0 means level 0 alone, exact attention).
Hierarchy build_hierarchy(std::int64_t seq, std::int64_t block, std::int64_t levels, bool causal);

// Visited (query, key) pairs of one (batch, query head), counted in the units each level
// attends in (fine rows at level 0, coarse or fine rows above), for Cost.
double hierarchy_pairs(std::int64_t seq, std::int64_t block, std::int64_t levels, bool causal);

}  // namespace seqattn::detail
