// Hierarchical attention (H-Transformer-1D; HierarchicalSpec in seqattn/options.hpp) on the
// flash kernel: level 0 is one call with a block-aligned range per row; each coarser level is
// a call over coarse tokens whose keys carry one extra column, ln(count)/scale, against a
// query column of 1, so the kernel's scaled score gains ln(count) and a coarse key counts for
// the tokens it stands for. The levels join through the exact log-sum-exp merge, which is one
// shared normaliser (and one maximum) per row. Work goes (batch, kv head) by (batch, kv head),
// level 0 included, so the coarse copies stay the size of one head group and the coarsening
// reads keys and values soon after the level-0 packing did.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <new>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "src/kernel/flash_attention.hpp"
#include "src/kernel/softmax_attention_cost.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/scratch_floats.hpp"
#include "src/runtime/validate.hpp"
#include "variants/hierarchical/coarse_tokens.hpp"
#include "variants/hierarchical/hierarchy.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

constexpr std::int64_t kMaxBlock = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLevels = 40;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::string str(std::int64_t x) { return std::to_string(x); }

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, option, "an option variant 'hierarchical' can honour",
              option + " is set",
              "variant 'hierarchical' cannot honour option '" + option + "': " + why +
                  "; use variant=dense or sliding-window");
}

std::int64_t resolved_levels(const HierarchicalSpec& s, std::int64_t seq) {
  const std::int64_t needed = levels_needed(seq, s.block);
  return s.levels == 0 ? needed : std::min(s.levels, needed);
}

// Everything that depends on the shape and the spec: the level count, level 0's rows, and per
// coarse level (index l - 1) the stored order of its keys and the rows the kernel visits:
// coarse query rows, or (causal) the fine query rows.
struct Hierarchy {
  std::int64_t block = 0, levels = 0, seq = 0;
  bool causal = false;
  RowKeyRanges level0;
  std::vector<LevelLayout> layouts;
  std::vector<RowKeyRanges> patterns;
};

Hierarchy build_hierarchy(const Problem& p, const HierarchicalSpec& s) {
  Hierarchy h;
  h.block = s.block;
  h.seq = p.seq_k();
  h.levels = resolved_levels(s, h.seq);
  h.causal = p.mask->causal;
  h.level0 = level0_pattern(h.seq, h.block);
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    h.layouts.push_back(make_level_layout(level_length(h.seq, l), h.block, !h.causal));
    const LevelLayout& layout = h.layouts.back();
    h.patterns.push_back(h.causal ? causal_pattern(layout, h.seq, l) : paired_pattern(layout));
  }
  return h;
}

// The structure is O(S) integers per level: a length too large for memory is an Error, not
// std::bad_alloc.
Hierarchy make_hierarchy(const Problem& p, const HierarchicalSpec& s) {
  try {
    return build_hierarchy(p, s);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  fail_allocation("hierarchical attention's block structure (S = " + str(p.seq_k()) + ")",
                  16.0 * static_cast<double>(p.seq_k()) *
                      static_cast<double>(resolved_levels(s, p.seq_k()) + 2));
}

// Scratch floats (ScratchFloats, scratch_floats) are left uninitialised: every element is
// written before it is read (dummy rows included), and value-initialising them cost a memset
// and its page faults on every call. Large blocks are huge-page mappings.
using Floats = ScratchFloats;

// One (batch, kv head)'s coarse tokens and partial results, reused from pair to pair. Per
// level l >= 1: keys and values (D + 1 and D_v columns) in the level's stored order from row
// stored(l), counts in natural order from row natural(l), coarse queries and their results in
// stored order from row queries(l) of each head's block of query_rows rows (causal: the fine
// queries, rows [0, S), shared by every level).
struct PairScratch {
  std::int64_t group = 0, dim = 0, dim_v = 0, query_rows = 0;
  std::vector<std::int64_t> natural_at, stored_at, queries_at, key_count, query_count;
  Floats k, v, q, out, lse;
  Floats rotated;  // with RoPE: one head's rotated keys or queries [S, D], the level-1 source

  PairScratch(const Problem& p, const Hierarchy& h)
      : group(p.group()), dim(p.dim()), dim_v(p.dim_v()) {
    natural_at.assign(static_cast<size_t>(h.levels + 2), 0);
    stored_at.assign(static_cast<size_t>(h.levels + 2), 0);
    queries_at.assign(static_cast<size_t>(h.levels + 2), 0);
    for (std::int64_t l = 1; l <= h.levels; ++l) {
      const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
      natural_at[static_cast<size_t>(l + 1)] = natural(l) + layout.len;
      stored_at[static_cast<size_t>(l + 1)] = stored(l) + layout.key_rows;
      queries_at[static_cast<size_t>(l + 1)] = queries(l) + (h.causal ? 0 : layout.query_rows);
    }
    const std::int64_t coarse = natural(h.levels + 1), slots = stored(h.levels + 1);
    query_rows = h.causal ? h.seq : queries(h.levels + 1);
    const std::string what = "hierarchical attention's coarse tokens";
    key_count = checked_vector<std::int64_t>(coarse, what);
    query_count = checked_vector<std::int64_t>(coarse, what);
    k = scratch_floats(checked_product({slots, dim + 1}, "coarse keys"), what);
    v = scratch_floats(checked_product({slots, dim_v}, "coarse values"), what);
    q = scratch_floats(checked_product({group, query_rows, dim + 1}, "coarse queries"), what);
    out = scratch_floats(checked_product({group, query_rows, dim_v}, "coarse results"), what);
    lse = scratch_floats(group * query_rows, what);
    if (rope_of(p.positional.get()) != nullptr)
      rotated = scratch_floats(checked_product({h.seq, dim}, "rotated rows"), what);
  }
  std::int64_t natural(std::int64_t l) const { return natural_at[static_cast<size_t>(l)]; }
  std::int64_t stored(std::int64_t l) const { return stored_at[static_cast<size_t>(l)]; }
  std::int64_t queries(std::int64_t l) const { return queries_at[static_cast<size_t>(l)]; }
};

const std::int64_t* key_positions(const LevelLayout& layout) {
  return layout.paired ? layout.key_position.data() : nullptr;
}
const std::int64_t* query_positions(const LevelLayout& layout) {
  return layout.paired ? layout.query_position.data() : nullptr;
}

RowSource rows_of(const ConstTensor& t, std::int64_t b, std::int64_t h) {
  return {t.ptr(b, h, 0), t.shape[2], t.shape[3], t.strides[2], t.strides[3], nullptr};
}

// Rows of t(b, h) into dst (leading dimension ld), rotated at their positions with RoPE.
void copy_rows(const Problem& p, const ConstTensor& t, RopeSide side, std::int64_t b,
               std::int64_t h, float* dst, std::int64_t ld) {
  const RopeTables* rope = rope_of(p.positional.get());
  const std::int64_t dim = t.shape[3];
  for (std::int64_t r = 0; r < t.shape[2]; ++r) {
    if (rope != nullptr) {
      rotate_row_at(t.ptr(b, h, r), t.strides[3], dim, 1.0f, *rope, rope->rows(), side, r,
                    dst + r * ld);
    } else {
      for (std::int64_t d = 0; d < dim; ++d) dst[r * ld + d] = t.at(b, h, r, d);
    }
  }
}

// Level 1's source rows of (b, h): the caller's, or with RoPE their rotations at their
// positions (into s.rotated), so that a coarse query or key is the mean of rotated vectors.
RowSource fine_rows(const Problem& p, const ConstTensor& t, RopeSide side, std::int64_t b,
                    std::int64_t h, PairScratch& s) {
  if (rope_of(p.positional.get()) == nullptr) return rows_of(t, b, h);
  copy_rows(p, t, side, b, h, s.rotated.data(), s.dim);
  return {s.rotated.data(), t.shape[2], s.dim, s.dim, 1, nullptr};
}

// Coarse keys and values of levels 1..L of pair (b, hk), each from the level below, written in
// the level's stored order; the keys' last column is ln(count)/scale, -inf where no token is.
void coarsen_keys(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                  PairScratch& s) {
  const std::int64_t len = std::min(p.key_length(b), p.seq_k()), ldk = s.dim + 1;
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
    const std::int64_t* counts = l == 1 ? nullptr : s.key_count.data() + s.natural(l - 1);
    RowSource keys = l == 1 ? fine_rows(p, p.k, RopeSide::kKey, b, hk, s) : RowSource{};
    RowSource values = rows_of(p.v, b, hk);
    if (l > 1) {
      const LevelLayout& below = h.layouts[static_cast<size_t>(l - 2)];
      keys = {s.k.data() + s.stored(l - 1) * ldk, below.len, s.dim, ldk, 1, key_positions(below)};
      values = {s.v.data() + s.stored(l - 1) * s.dim_v,
                below.len,
                s.dim_v,
                s.dim_v,
                1,
                key_positions(below)};
    }
    const RowTarget k_dst{s.k.data() + s.stored(l) * ldk, ldk, key_positions(layout)};
    const RowTarget v_dst{s.v.data() + s.stored(l) * s.dim_v, s.dim_v, key_positions(layout)};
    halve_rows(keys, counts, len, k_dst, s.key_count.data() + s.natural(l), p.threads);
    halve_rows(values, counts, len, v_dst, nullptr, p.threads);
    write_log_counts(s.key_count.data() + s.natural(l), layout.len, p.scale, k_dst, s.dim);
    for (const std::int64_t d : layout.key_dummies) {  // stored positions holding no token
      float* key = s.k.data() + (s.stored(l) + d) * ldk;
      std::fill(key, key + s.dim, 0.0f);
      key[s.dim] = kNegInf;
      std::fill_n(s.v.data() + (s.stored(l) + d) * s.dim_v, s.dim_v, 0.0f);
    }
  }
}

// The queries of the pair's heads with a last column of 1: coarse means per level, or (causal)
// the fine queries themselves.
void prepare_queries(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                     PairScratch& s) {
  const std::int64_t ldq = s.dim + 1;
  for (std::int64_t g = 0; g < s.group; ++g) {
    const std::int64_t head = hk * s.group + g;
    float* q = s.q.data() + g * s.query_rows * ldq;
    if (h.causal) {
      copy_rows(p, p.q, RopeSide::kQuery, b, head, q, ldq);
      write_ones(h.seq, q, ldq, s.dim);
      continue;
    }
    for (std::int64_t l = 1; l <= h.levels; ++l) {
      const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
      float* level = q + s.queries(l) * ldq;
      RowSource src = l == 1 ? fine_rows(p, p.q, RopeSide::kQuery, b, head, s) : RowSource{};
      if (l > 1) {
        const LevelLayout& below = h.layouts[static_cast<size_t>(l - 2)];
        src = {q + s.queries(l - 1) * ldq, below.len, s.dim, ldq, 1, query_positions(below)};
      }
      halve_rows(src, l == 1 ? nullptr : s.query_count.data() + s.natural(l - 1), h.seq,
                 RowTarget{level, ldq, query_positions(layout)},
                 s.query_count.data() + s.natural(l), p.threads);
      for (const std::int64_t d : layout.query_dummies) std::fill_n(level + d * ldq, s.dim, 0.0f);
      write_ones(layout.query_rows, level, ldq, s.dim);
    }
  }
}

// The flash kernel over level l of one pair: `rows` query rows of every head of the group
// (from row `first` of s.q) against the level's stored keys. Keys standing for no token (past
// the key length, or dummies) score -inf through their last column, so no key length is set.
void attend_level(const Problem& p, const Hierarchy& h, std::int64_t l, std::int64_t first,
                  std::int64_t rows, PairScratch& s) {
  const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
  const std::int64_t ld = s.dim + 1;
  static const Mask kNoMask;
  Problem c = p;
  const std::array<std::int64_t, 4> q_strides{0, s.query_rows * ld, ld, 1};
  c.q = ConstTensor{s.q.data() + first * ld, {1, s.group, rows, ld}, q_strides};
  c.k = bhsd<const float>(s.k.data() + s.stored(l) * ld, 1, 1, layout.key_rows, ld);
  c.v = bhsd<const float>(s.v.data() + s.stored(l) * s.dim_v, 1, 1, layout.key_rows, s.dim_v);
  const std::array<std::int64_t, 4> out_strides{0, s.query_rows * s.dim_v, s.dim_v, 1};
  c.out = Tensor{s.out.data() + first * s.dim_v, {1, s.group, rows, s.dim_v}, out_strides};
  c.lse = Tensor{s.lse.data() + first, {1, s.group, rows, 1}, {0, s.query_rows, 1, 1}};
  c.mask = &kNoMask;
  c.weights.reset();
  c.positional.reset();
  flash_forward(c, h.patterns[static_cast<size_t>(l - 1)]);
}

// Non-causal: every level over its coarse rows, from the top down, each merged with the
// coarser result of its parent row, so that level 1's row holds every coarse level.
void coarse_levels(const Problem& p, const Hierarchy& h, PairScratch& s) {
  for (std::int64_t l = h.levels; l >= 1; --l) {
    const LevelLayout& layout = h.layouts[static_cast<size_t>(l - 1)];
    attend_level(p, h, l, s.queries(l), layout.query_rows, s);
    if (l == h.levels) continue;
    const LevelLayout& up = h.layouts[static_cast<size_t>(l)];
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t base = g * s.query_rows;
      for (std::int64_t t = 0; t < layout.len; ++t) {
        const std::int64_t r = base + s.queries(l) + layout.query_at(t);
        const std::int64_t parent = base + s.queries(l + 1) + up.query_at(t / 2);
        merge_partial(s.out.data() + r * s.dim_v, 1, s.lse[static_cast<size_t>(r)],
                      s.out.data() + parent * s.dim_v, s.lse[static_cast<size_t>(parent)], s.dim_v);
      }
    }
  }
}

// Merges each head's coarse results into its fine rows (out and the level-0 lse).
void merge_into_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                     const PairScratch& s, const Floats& lse0) {
  const std::int64_t step = p.out.strides[3];
#pragma omp parallel for schedule(static) num_threads(p.threads) if (p.threads > 1)
  for (std::int64_t i = 0; i < h.seq; ++i) {
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t head = hk * s.group + g;
      // Causal: row i of this level's fine-query call; otherwise level 1's coarse row i/2.
      const std::int64_t r =
          g * s.query_rows + (h.causal ? i : s.queries(1) + h.layouts[0].query_at(i / 2));
      float& lse = lse0[static_cast<size_t>((b * p.heads_q() + head) * h.seq + i)];
      merge_partial(p.out.ptr(b, head, i), step, lse, s.out.data() + r * s.dim_v,
                    s.lse[static_cast<size_t>(r)], s.dim_v);
    }
  }
}

// Level 0 of pair (b, hk): the group's query heads against their kv head, out into the
// caller's rows, lse into lse0. Run pair by pair, right before the pair's coarse levels, so
// that while a pair's K, V (and out) fit in the L3 (S <= ~16k at D = 64) the coarsening and
// the merge find them there. At S = 65536 neither order measured faster than the other (both
// ~1.2x slower per token than at S = 4096; see docs/architecture.md).
void attend_level0(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                   const Floats& lse0) {
  const std::int64_t g = p.group();
  Mask mask;
  mask.causal = p.mask->causal;
  mask.key_lengths = {p.key_length(b)};
  Problem c = p;
  c.q = ConstTensor{p.q.ptr(b, hk * g, 0), {1, g, h.seq, p.dim()}, p.q.strides};
  c.k = ConstTensor{p.k.ptr(b, hk, 0), {1, 1, h.seq, p.dim()}, p.k.strides};
  c.v = ConstTensor{p.v.ptr(b, hk, 0), {1, 1, h.seq, p.dim_v()}, p.v.strides};
  c.out = Tensor{p.out.ptr(b, hk * g, 0), {1, g, h.seq, p.dim_v()}, p.out.strides};
  c.lse =
      Tensor{lse0.data() + (b * p.heads_q() + hk * g) * h.seq, {1, g, h.seq, 1}, {0, h.seq, 1, 1}};
  c.mask = &mask;
  flash_forward(c, h.level0);
}

// Every level of pair (b, hk), level 0 first, merged into the pair's rows of out and lse0.
void run_pair(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk, PairScratch& s,
              const Floats& lse0) {
  attend_level0(p, h, b, hk, lse0);
  coarsen_keys(p, h, b, hk, s);
  prepare_queries(p, h, b, hk, s);
  if (!h.causal) {
    coarse_levels(p, h, s);
    merge_into_rows(p, h, b, hk, s, lse0);
    return;
  }
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    attend_level(p, h, l, 0, h.seq, s);
    merge_into_rows(p, h, b, hk, s, lse0);
  }
}

// With at least as many (batch, kv head) pairs as threads, each thread runs whole pairs on its
// own scratch: splitting every call of a pair across the threads instead opened a thread team
// per kernel call and per merge, and at S <= 2048 two threads were slower than one (the
// scaling report of 499f4da). With fewer pairs than threads, each call is split. Either way a
// pair's result is the same bits (the kernel's and the passes' results do not depend on the
// thread count).
void run_pairs(const Problem& p, const Hierarchy& h, const Floats& lse0) {
  const std::int64_t pairs = p.batch() * p.heads_kv();
  if (p.threads <= 1 || pairs < p.threads) {
    PairScratch s(p, h);
    for (std::int64_t pair = 0; pair < pairs; ++pair)
      run_pair(p, h, pair / p.heads_kv(), pair % p.heads_kv(), s, lse0);
    return;
  }
  Problem serial = p;
  serial.threads = 1;
  std::vector<PairScratch> scratch;  // allocated here: nothing may throw inside the region
  scratch.reserve(static_cast<size_t>(p.threads));
  for (int t = 0; t < p.threads; ++t) scratch.emplace_back(serial, h);
#pragma omp parallel for schedule(dynamic, 1) num_threads(p.threads)
  for (std::int64_t pair = 0; pair < pairs; ++pair) {
    run_pair(serial, h, pair / p.heads_kv(), pair % p.heads_kv(),
             scratch[static_cast<size_t>(omp_get_thread_num())], lse0);
  }
}

void run_hierarchy(const Problem& p, const Hierarchy& h) {
  if (h.levels == 0) {  // level 0 covers every pair: exact attention
    flash_forward(p, h.level0);
    return;
  }
  const Floats lse0 = scratch_floats(
      checked_product({p.batch(), p.heads_q(), h.seq}, "B x H_q x S (level-0 lse)"), "lse");
  run_pairs(p, h, lse0);
  if (!p.lse) return;
  for (std::int64_t b = 0; b < p.batch(); ++b) {
    for (std::int64_t hq = 0; hq < p.heads_q(); ++hq) {
      for (std::int64_t i = 0; i < h.seq; ++i)
        p.lse->at(b, hq, i, 0) = lse0[static_cast<size_t>((b * p.heads_q() + hq) * h.seq + i)];
    }
  }
}

class HierarchicalVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kHierarchical; }

  void check(const Problem& p, const VariantSpec& spec) const override {
    const auto& s = std::get<HierarchicalSpec>(spec);
    if (s.block < 2 || s.block > kMaxBlock || s.block % 2 != 0) {
      fail("hierarchical.block", "an even number in [2, " + str(kMaxBlock) + "]", str(s.block),
           "levels split blocks into halves, so the block size must be even (e.g. 64)");
    }
    if (s.levels < 0 || s.levels > kMaxLevels) {
      fail("hierarchical.levels", "in [0, " + str(kMaxLevels) + "] (0 = as many as needed)",
           str(s.levels));
    }
    if (p.seq_q() != p.seq_k()) {
      unsupported("S_q != S_k",
                  "it coarsens queries and keys along the same positions "
                  "(self-attention); S_q = " +
                      str(p.seq_q()) + ", S_k = " + str(p.seq_k()));
    }
    if (p.mask->keep) unsupported("mask.keep", "coarse keys stand for groups of keys");
    if (p.mask->bias) unsupported("mask.bias", "coarse keys stand for groups of keys");
    if (p.weights) {
      unsupported("weights", "coarse levels give one weight per group of keys, not per key");
    }
    refuse_alibi(p, "hierarchical", "a coarse key stands for many distances");
  }

  // FLOPs: 2·(D + D_v) per visited (query, key) pair of every level (coarse rows and keys
  // count once each), times B·H_q; the coarsening passes are O(S·D) and not counted.
  Cost cost(const Problem& p, const VariantSpec& spec) const override {
    const auto& s = std::get<HierarchicalSpec>(spec);
    const double pairs =
        hierarchy_pairs(p.seq_k(), s.block, resolved_levels(s, p.seq_k()), p.mask->causal) *
        static_cast<double>(p.batch() * p.heads_q());
    return softmax_attention_cost(p, pairs);
  }

  void run(const Problem& p, const VariantSpec& spec) const override {
    run_hierarchy(p, make_hierarchy(p, std::get<HierarchicalSpec>(spec)));
  }

  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(make_hierarchy(p, std::get<HierarchicalSpec>(spec)));
  }

 private:
  class Prepared final : public PreparedVariant {
   public:
    explicit Prepared(Hierarchy h) : h_(std::move(h)) {}
    void run(const Problem& p) const override { run_hierarchy(p, h_); }

   private:
    Hierarchy h_;
  };
};

}  // namespace

const AttentionVariant& hierarchical_variant() {
  static const HierarchicalVariant instance;
  return instance;
}

}  // namespace seqattn::detail
