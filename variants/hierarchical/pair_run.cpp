// One (batch, kv head) pair of hierarchical attention, window by window (see pair_run.hpp and
// hierarchical_variant.cpp).
#include "variants/hierarchical/pair_run.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "src/kernel/flash_attention.hpp"
#include "src/kernel/team_loops.hpp"
#include "variants/hierarchical/coarse_tokens.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

template <class T>
T* at_offset(T* base, std::int64_t offset) {
  return base == nullptr ? nullptr : base + offset;
}
template <class T>
T* row_at(const TensorView<T>& t, std::int64_t b, std::int64_t h, std::int64_t i) {
  return t.data == nullptr ? nullptr : t.ptr(b, h, i);
}

const std::int64_t* key_positions(const LevelLayout& layout) {
  return layout.key_position.empty() ? nullptr : layout.key_position.data();
}
const std::int64_t* query_positions(const LevelLayout& layout) {
  return layout.query_position.empty() ? nullptr : layout.query_position.data();
}

RowSource rows_of(const ConstTensor& t, std::int64_t b, std::int64_t h) {
  return {t.ptr(b, h, 0), t.shape[2], t.shape[3], t.strides[2], t.strides[3], nullptr};
}

// Which of a window's rows rotate_window copies: both for level 0 and the coarsening; only the
// queries for the causal levels above the windows, whose keys are coarse rows already.
enum class WindowCopies { kQueriesAndKeys, kQueries };

// Makes w the scratch's current window and, with RoPE, rotates its query rows of every head of
// pair (b, hk) (and its keys) at their positions into s.rope_q (and s.rope_k). Level 0 runs on
// these copies, so the kernel does not rotate each key again for every query tile that packs
// it, and level 1 averages the same rotated vectors.
void rotate_window(const Problem& p, const Level0Window& w, std::int64_t b, std::int64_t hk,
                   WindowCopies copies, PairScratch& s) {
  s.window = &w;
  const RopeTables* rope = rope_of(p.positional.get());
  if (rope == nullptr) return;
  const RopeRows& rows = rope->rows();  // built before any kernel (AttentionPlan::run)
  // Row `item` of the window's copies: the queries of each head, then the keys. Split across
  // the threads when a call is (fewer pairs than threads), as the kernel's rotation was.
  const std::int64_t queries = s.group * w.rows;
  const std::int64_t keys = copies == WindowCopies::kQueriesAndKeys ? w.keys : 0;
  auto rotate_item = [&](std::int64_t item) {
    if (item < queries) {
      const std::int64_t g = item / w.rows, r = item % w.rows;
      rotate_row_at(p.q.ptr(b, hk * s.group + g, w.first_row + r), p.q.strides[3], s.dim, 1.0f,
                    *rope, rows, RopeSide::kQuery, w.first_row + r,
                    s.rope_q.data() + (g * s.window_rows + r) * s.dim);
    } else {
      const std::int64_t r = item - queries;
      rotate_row_at(p.k.ptr(b, hk, w.first_key + r), p.k.strides[3], s.dim, 1.0f, *rope, rows,
                    RopeSide::kKey, w.first_key + r, s.rope_k.data() + r * s.dim);
    }
  };
  RunOnTeam(p.threads, [&](const auto& team) {
    team.for_static(queries + keys, [&](std::int64_t item) { rotate_item(item); });
  });
}

// Rows [first, end) of level 1's source for query head `head` (or, for the keys, kv head
// `head`) of batch b: the caller's rows, or with RoPE their rotations in the current window's
// copies.
RowSource fine_rows(const Problem& p, RopeSide side, std::int64_t b, std::int64_t head,
                    std::int64_t first, std::int64_t end, const PairScratch& s) {
  const ConstTensor& t = side == RopeSide::kQuery ? p.q : p.k;
  if (rope_of(p.positional.get()) == nullptr) return rows_from(rows_of(t, b, head), first, end);
  const float* base =
      side == RopeSide::kQuery
          ? s.rope_q.data() +
                ((head % s.group) * s.window_rows + first - s.window->first_row) * s.dim
          : s.rope_k.data() + (first - s.window->first_key) * s.dim;
  return {base, end - first, s.dim, s.dim, 1, nullptr};
}

// Level l's keys and values of pair (b, hk) from rows [first, end) of level l - 1 (first
// even), in the level's stored order; the keys' last column is ln(count)/scale, -inf where no
// token is.
void coarsen_key_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                      std::int64_t l, std::int64_t first, std::int64_t end, PairScratch& s) {
  const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
  const std::int64_t len = std::min(p.key_length(b), p.seq_k()), ldk = s.dim + 1;
  RowSource keys, values;
  const std::int64_t* counts = nullptr;
  if (l == 1) {
    keys = fine_rows(p, RopeSide::kKey, b, hk, first, end, s);
    values = rows_from(rows_of(p.v, b, hk), first, end);
  } else {
    const LevelLayout& below = h.layouts[static_cast<size_t>(l - 2)];
    const std::int64_t* at = key_positions(below);
    keys = rows_from({s.keys(h, l - 1), below.len, s.dim, ldk, 1, at}, first, end);
    values = rows_from({s.values(h, l - 1), below.len, s.dim_v, s.dim_v, 1, at}, first, end);
    counts = s.key_count.data() + s.natural(l - 1) + first;
  }
  const std::int64_t out_first = first / 2, out_rows = (end - first + 1) / 2;
  const RowTarget k_dst = rows_from(RowTarget{s.keys(h, l), ldk, key_positions(layout)}, out_first);
  const RowTarget v_dst =
      rows_from(RowTarget{s.values(h, l), s.dim_v, key_positions(layout)}, out_first);
  std::int64_t* counts_out = s.key_count.data() + s.natural(l) + out_first;
  halve_rows(keys, counts, len - first, k_dst, counts_out, p.threads);
  halve_rows(values, counts, len - first, v_dst, nullptr, p.threads);
  write_log_counts(counts_out, out_rows, p.scale, k_dst, s.dim);
  for (std::int64_t t = out_first; t < out_first + out_rows; ++t) {
    const std::int64_t mirror = layout.key_mirror(t);
    if (mirror < 0) continue;
    const std::int64_t at = layout.key_at(t);
    std::copy_n(s.keys(h, l) + at * ldk, ldk, s.keys(h, l) + mirror * ldk);
    std::copy_n(s.values(h, l) + at * s.dim_v, s.dim_v, s.values(h, l) + mirror * s.dim_v);
  }
}

// Level l's coarse queries of every head of pair (b, hk) from rows [first, end) of level
// l - 1 (non-causal), stored like the level's keys, with a last column of 1.
void coarsen_query_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                        std::int64_t l, std::int64_t first, std::int64_t end, PairScratch& s) {
  const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
  const std::int64_t ldq = s.dim + 1, out_first = first / 2, out_rows = (end - first + 1) / 2;
  for (std::int64_t g = 0; g < s.group; ++g) {
    const std::int64_t head = hk * s.group + g;
    RowSource src;
    const std::int64_t* counts = nullptr;
    if (l == 1) {
      src = fine_rows(p, RopeSide::kQuery, b, head, first, end, s);
    } else {
      const LevelLayout& below = h.layouts[static_cast<size_t>(l - 2)];
      src = rows_from({s.queries(g) + h.key_base[static_cast<size_t>(l - 2)] * ldq, below.len,
                       s.dim, ldq, 1, query_positions(below)},
                      first, end);
      counts = s.query_count.data() + s.natural(l - 1) + first;
    }
    const RowTarget dst =
        rows_from(RowTarget{s.queries(g) + h.key_base[static_cast<size_t>(l - 1)] * ldq, ldq,
                            query_positions(layout)},
                  out_first);
    halve_rows(src, counts, h.seq - first, dst, s.query_count.data() + s.natural(l) + out_first,
               p.threads);
    write_ones(out_rows, dst, s.dim);
  }
}

// Causal: the queries of the pair's heads are window w's fine rows themselves (rotated with
// RoPE), with a last column of 1.
void copy_query_rows(const Problem& p, std::int64_t b, std::int64_t hk, const Level0Window& w,
                     PairScratch& s) {
  const std::int64_t ldq = s.dim + 1, first = w.first_row, end = w.first_row + w.rows;
  for (std::int64_t g = 0; g < s.group; ++g) {
    const RowSource src = fine_rows(p, RopeSide::kQuery, b, hk * s.group + g, first, end, s);
    float* dst = s.queries(g);
    for (std::int64_t r = 0; r < src.rows; ++r) {
      for (std::int64_t d = 0; d < s.dim; ++d)
        dst[r * ldq + d] = src.base[r * src.row_stride + d * src.col_stride];
    }
    write_ones(end - first, RowTarget{dst, ldq, nullptr}, s.dim);
  }
}

// Level l of the pair from rows [first, end) of level l - 1: keys and values, and the coarse
// queries unless causal.
void coarsen_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                  std::int64_t l, std::int64_t first, std::int64_t end, PairScratch& s) {
  coarsen_key_rows(p, h, b, hk, l, first, end, s);
  if (!h.causal) coarsen_query_rows(p, h, b, hk, l, first, end, s);
}

// Stored key positions of each level that hold no token: zeros scoring -inf (last column).
// They lie in the slot of a level's last block, which earlier blocks may have used (a ring):
// written once the last window has coarsened, before any call reads the last block.
void fill_key_dummies(const Hierarchy& h, PairScratch& s) {
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    for (const std::int64_t d : h.layouts[static_cast<size_t>(l - 1)].key_dummies) {
      float* key = s.keys(h, l) + d * (s.dim + 1);
      std::fill(key, key + s.dim, 0.0f);
      key[s.dim] = kNegInf;
      std::fill_n(s.values(h, l) + d * s.dim_v, s.dim_v, 0.0f);
    }
  }
}

// A run that sees no key (a level of one block) has nothing to add: its rows are left empty
// (lse = -inf), which the merges skip.
void attend_coarse(const Problem& p, const CoarseRun& run, PairScratch& s) {
  if (run.keys == 0) {
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t first = g * s.result_rows + run.first_row;
      std::fill_n(s.lse.data() + first, run.rows, kNegInf);
      std::fill_n(s.out.data() + first * s.dim_v, run.rows * s.dim_v, 0.0f);
    }
    return;
  }
  flash_forward(coarse_call(p, run, s), run.pattern);
}

// Non-causal, after every segment ran: each level's result merged with its parent's, from the
// top down, so that level 1's row holds every coarse level.
void merge_coarse_levels(const Hierarchy& h, PairScratch& s) {
  for (std::int64_t l = h.levels - 1; l >= 1; --l) {
    const std::vector<std::int64_t>& row = h.schedule.row[static_cast<size_t>(l - 1)];
    const std::vector<std::int64_t>& up = h.schedule.row[static_cast<size_t>(l)];
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t base = g * s.result_rows;
      for (size_t t = 0; t < row.size(); ++t) {
        const std::int64_t r = base + row[t], parent = base + up[t / 2];
        merge_partial(s.out.data() + r * s.dim_v, 1, s.lse[static_cast<size_t>(r)],
                      s.out.data() + parent * s.dim_v, s.lse[static_cast<size_t>(parent)], s.dim_v);
      }
    }
  }
}

// Merges each head's coarse results into its fine rows [first, end) (out and the level-0
// lse): level 1's merged row (non-causal), or (causal) the result row i - origin of the
// window's run that just ran.
void merge_into_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                     std::int64_t first, std::int64_t end, std::int64_t origin,
                     const PairScratch& s, float* lse0) {
  const std::int64_t step = p.out.strides[3];
  const bool parallel = p.threads > 1 && end - first >= 256;
  RunOnTeam(parallel ? p.threads : 1, [&](const auto& team) {
    team.for_static(end - first, [&](std::int64_t row) {
      const std::int64_t i = first + row;
      for (std::int64_t g = 0; g < s.group; ++g) {
        const std::int64_t head = hk * s.group + g;
        const std::int64_t r =
            g * s.result_rows + (h.causal ? i - origin : h.schedule.row[0][i / 2]);
        float& lse = lse0[(b * p.heads_q() + head) * h.seq + i];
        merge_partial(p.out.ptr(b, head, i), step, lse, s.out.data() + r * s.dim_v,
                      s.lse[static_cast<size_t>(r)], s.dim_v);
      }
    });
  });
}

void attend_level0(const Problem& p, const Hierarchy& h, const Level0Window& w, std::int64_t b,
                   std::int64_t hk, const PairScratch& s, float* lse0) {
  const std::int64_t key_length =
      std::clamp<std::int64_t>(p.key_length(b) - w.first_key, 0, w.keys);
  flash_forward(level0_call(p, h, w, b, hk, s, lse0, key_length), w.pattern);
}

// Causal: a run of window w's fine rows against a level, merged into out and lse0.
void attend_causal_level(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                         const Level0Window& w, const CoarseRun& run, PairScratch& s, float* lse0) {
  attend_coarse(p, run, s);
  const std::int64_t first = w.first_row + run.first_row;
  merge_into_rows(p, h, b, hk, first, first + run.rows, w.first_row, s, lse0);
}

}  // namespace

Problem coarse_call(const Problem& p, const CoarseRun& run, const PairScratch& s) {
  const std::int64_t ld = s.dim + 1;
  Problem c = p;
  c.workspace = s.flash_workspace();
  const std::array<std::int64_t, 4> q_strides{0, s.query_rows * ld, ld, 1};
  c.q = ConstTensor{
      at_offset(s.q.data(), run.first_query * ld), {1, s.group, run.rows, ld}, q_strides};
  c.k = bhsd<const float>(at_offset(s.k.data(), run.first_key * ld), 1, 1, run.keys, ld);
  c.v = bhsd<const float>(at_offset(s.v.data(), run.first_key * s.dim_v), 1, 1, run.keys, s.dim_v);
  const std::array<std::int64_t, 4> out_strides{0, s.result_rows * s.dim_v, s.dim_v, 1};
  c.out = Tensor{at_offset(s.out.data(), run.first_row * s.dim_v),
                 {1, s.group, run.rows, s.dim_v},
                 out_strides};
  c.lse = Tensor{
      at_offset(s.lse.data(), run.first_row), {1, s.group, run.rows, 1}, {0, s.result_rows, 1, 1}};
  c.mask = {};
  c.weights.reset();
  c.positional.reset();
  return c;
}

Problem level0_call(const Problem& p, const Hierarchy& h, const Level0Window& w, std::int64_t b,
                    std::int64_t hk, const PairScratch& s, float* lse0,
                    const std::int64_t& key_length) {
  const std::int64_t g = p.group();
  Problem c = p;
  c.workspace = s.flash_workspace();
  if (rope_of(p.positional.get()) != nullptr) {
    const std::int64_t d = p.dim();
    c.q = ConstTensor{s.rope_q.data(), {1, g, w.rows, d}, {0, s.window_rows * d, d, 1}};
    c.k = bhsd<const float>(s.rope_k.data(), 1, 1, w.keys, d);
    c.positional.reset();
  } else {
    c.q = ConstTensor{row_at(p.q, b, hk * g, w.first_row), {1, g, w.rows, p.dim()}, p.q.strides};
    c.k = ConstTensor{row_at(p.k, b, hk, w.first_key), {1, 1, w.keys, p.dim()}, p.k.strides};
  }
  c.v = ConstTensor{row_at(p.v, b, hk, w.first_key), {1, 1, w.keys, p.dim_v()}, p.v.strides};
  c.out = Tensor{row_at(p.out, b, hk * g, w.first_row), {1, g, w.rows, p.dim_v()}, p.out.strides};
  c.lse = Tensor{at_offset(lse0, (b * p.heads_q() + hk * g) * h.seq + w.first_row),
                 {1, g, w.rows, 1},
                 {0, h.seq, 1, 1}};
  c.mask = {};
  c.mask.key_lengths = std::span<const std::int64_t>(&key_length, 1);
  return c;
}

// Every level of pair (b, hk), merged into the pair's rows of out and lse0. Level 0 goes
// window by window; after each window its rows coarsen through h.window_levels levels and
// the coarse attention that has its keys by then runs (the window's fine rows when causal;
// the schedule's segment otherwise), while those tokens are in cache. The levels above come
// from the one below, a pass each, and run after the windows.
void run_pair(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk, PairScratch& s,
              float* lse0) {
  for (size_t wi = 0; wi < h.windows.size(); ++wi) {
    const Level0Window& w = h.windows[wi];
    const std::int64_t end = w.first_row + w.rows;
    rotate_window(p, w, b, hk, WindowCopies::kQueriesAndKeys, s);
    attend_level0(p, h, w, b, hk, s, lse0);
    if (h.causal) copy_query_rows(p, b, hk, w, s);
    for (std::int64_t l = 1; l <= h.window_levels; ++l)
      coarsen_rows(p, h, b, hk, l, w.first_row >> (l - 1), level_length(end, l - 1), s);
    if (wi + 1 == h.windows.size()) fill_key_dummies(h, s);
    if (!h.causal) {
      for (const CoarseRun& run : h.schedule.segments[wi]) attend_coarse(p, run, s);
      continue;
    }
    for (const CoarseRun& run : h.causal_windows[wi])
      attend_causal_level(p, h, b, hk, w, run, s, lse0);
  }
  for (std::int64_t l = h.window_levels + 1; l <= h.levels; ++l)
    coarsen_rows(p, h, b, hk, l, 0, h.layouts[static_cast<size_t>(l - 2)].len, s);
  if (h.causal) {
    // The levels above the windows, window by window again: each window's fine queries are
    // copied a second time (with RoPE, rotated again), O(S·D) against the kernel's O(S·b·D).
    for (size_t wi = 0; wi < h.windows.size() && h.levels > h.window_levels; ++wi) {
      const Level0Window& w = h.windows[wi];
      rotate_window(p, w, b, hk, WindowCopies::kQueries, s);
      copy_query_rows(p, b, hk, w, s);
      for (const CoarseRun& run : h.causal_above[wi])
        attend_causal_level(p, h, b, hk, w, run, s, lse0);
    }
    return;
  }
  for (const CoarseRun& run : h.schedule.segments.back()) attend_coarse(p, run, s);
  merge_coarse_levels(h, s);
  merge_into_rows(p, h, b, hk, 0, h.seq, 0, s, lse0);
}

}  // namespace seqattn::detail
