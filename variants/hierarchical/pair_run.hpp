// One (batch, kv head) pair of hierarchical attention: its scratch (PairScratch, carved from
// the run's) and its work, window by window (run_pair); the kernel calls it makes, as problems
// (coarse_call, level0_call), so the variant can count their workspace. Internal to
// variants/hierarchical.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "src/core/problem.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/positional.hpp"
#include "variants/hierarchical/hierarchy.hpp"

namespace seqattn::detail {

// One (batch, kv head)'s coarse tokens and partial results, reused from pair to pair, carved
// from the run's scratch (left uninitialised: every element is written before it is read,
// dummy rows included). Keys and values (D + 1 and D_v columns) of level l from row
// h.key_base[l - 1], in its stored order (LevelLayout); counts in natural order from row
// natural(l). Per head of the group: query_rows rows of queries, the coarse ones stored like
// the keys (query_at), or (causal) the current window's fine queries, shared by every level;
// result_rows rows of results and lse, in schedule order (causal: the window's fine rows,
// merged into out as each run ends). With RoPE, the current window's rows rotated. `flash`:
// the kernel calls' workspace (the largest any call of the pair needs).
struct PairScratch {
  std::int64_t group = 0, dim = 0, dim_v = 0, query_rows = 0, result_rows = 0;
  Carved<std::int64_t> natural_at, key_count, query_count;
  Carved<float> k, v, q, out, lse;
  // With RoPE: window `window`'s query rows of every head of the group ([group, window_rows,
  // D]) and its keys ([keys, D]), rotated at their positions (rotate_window).
  Carved<float> rope_q, rope_k;
  Carved<std::byte> flash;
  std::int64_t window_rows = 0;  // the most rows of any window
  const Level0Window* window = nullptr;

  PairScratch(const Problem& p, const Hierarchy& h, std::size_t flash_bytes, ScratchArena& arena)
      : group(p.group()), dim(p.dim()), dim_v(p.dim_v()) {
    std::int64_t coarse = 0;  // natural(levels + 1): every level's coarse tokens
    for (std::int64_t l = 1; l <= h.levels; ++l)
      coarse += h.layouts[static_cast<size_t>(l - 1)].len;
    natural_at = Carved<std::int64_t>(arena, h.levels + 2);
    if (natural_at.data() != nullptr) {
      natural_at[0] = natural_at[1] = 0;
      for (std::int64_t l = 1; l <= h.levels; ++l) {
        natural_at[static_cast<size_t>(l + 1)] =
            natural(l) + h.layouts[static_cast<size_t>(l - 1)].len;
      }
    }
    const std::int64_t slots = h.key_base[static_cast<size_t>(h.levels)];
    std::int64_t window_keys = 0;
    for (const Level0Window& w : h.windows) {
      window_rows = std::max(window_rows, w.rows);
      window_keys = std::max(window_keys, w.keys);
    }
    query_rows = h.causal ? window_rows : slots;
    result_rows = h.causal ? window_rows : h.schedule.rows;
    key_count = Carved<std::int64_t>(arena, coarse);
    query_count = Carved<std::int64_t>(arena, coarse);
    k = Carved<float>(arena, checked_product({slots, dim + 1}, "coarse keys"));
    v = Carved<float>(arena, checked_product({slots, dim_v}, "coarse values"));
    q = Carved<float>(arena, checked_product({group, query_rows, dim + 1}, "coarse queries"));
    out = Carved<float>(arena, checked_product({group, result_rows, dim_v}, "coarse results"));
    lse = Carved<float>(arena, group * result_rows);
    flash = Carved<std::byte>(arena, static_cast<std::int64_t>(flash_bytes));
    if (rope_of(p.positional.get()) == nullptr) return;
    rope_q = Carved<float>(arena, checked_product({group, window_rows, dim}, "rotated queries"));
    rope_k = Carved<float>(arena, checked_product({window_keys, dim}, "rotated keys"));
  }
  std::int64_t natural(std::int64_t l) const { return natural_at[static_cast<size_t>(l)]; }
  float* keys(const Hierarchy& h, std::int64_t l) {
    return k.data() + h.key_base[static_cast<size_t>(l - 1)] * (dim + 1);
  }
  float* values(const Hierarchy& h, std::int64_t l) {
    return v.data() + h.key_base[static_cast<size_t>(l - 1)] * dim_v;
  }
  float* queries(std::int64_t g) { return q.data() + g * query_rows * (dim + 1); }
  std::span<std::byte> flash_workspace() const { return {flash.data(), flash.size()}; }
};

// The kernel's call over one run of rows of s.q (every head of the group) against its keys, in
// the pair's kernel workspace. Keys standing for no token (past the key length, or dummies)
// score -inf through their last column, so no key length is set. Built for the run and, with
// null data, for the workspace count.
Problem coarse_call(const Problem& p, const CoarseRun& run, const PairScratch& s);

// Level 0 of pair (b, hk) over window w's query rows: the group's query heads against their
// kv head, out into the caller's rows, lse into lse0, in the pair's kernel workspace. The
// window's pattern holds the causal cut; the key length (which must outlive the call) counts
// from the window's first key. With RoPE, q and k are the window's rotated copies. Null data
// while counting, as coarse_call.
Problem level0_call(const Problem& p, const Hierarchy& h, const Level0Window& w, std::int64_t b,
                    std::int64_t hk, const PairScratch& s, float* lse0,
                    const std::int64_t& key_length);

// Every level of pair (b, hk), merged into the pair's rows of out and lse0 ([B, H_q, S]).
void run_pair(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk, PairScratch& s,
              float* lse0);

}  // namespace seqattn::detail
