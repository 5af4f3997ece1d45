// Hierarchical attention (H-Transformer-1D; HierarchicalSpec in seqattn/options.hpp) on the
// flash kernel: level 0 is one call with a block-aligned range per row; each coarser level is
// a call over coarse tokens whose keys carry one extra column, ln(count)/scale, against a
// query column of 1, so the kernel's scaled score gains ln(count) and a coarse key counts for
// the tokens it stands for. The levels join through the exact log-sum-exp merge, which is one
// shared normaliser (and one maximum) per row. Work goes (batch, kv head) by (batch, kv head)
// after level 0, so the coarse copies stay the size of one head group.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "runtime/checked_size.hpp"
#include "runtime/positional.hpp"
#include "runtime/validate.hpp"
#include "variants/dense/flash_attention.hpp"
#include "variants/hierarchical/coarse_tokens.hpp"
#include "variants/hierarchical/hierarchy.hpp"
#include "variants/registry.hpp"
#include "variants/softmax_attention_cost.hpp"

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

// Everything that depends on the shape and the spec: the level count and every level's rows.
struct Hierarchy {
  std::int64_t block = 0, levels = 0, seq = 0;
  bool causal = false;
  KeyPattern level0;
  // Per level l >= 1 (index l - 1): coarse query rows, left and right sides; causal: the
  // fine query rows, left side only (right stays empty).
  std::vector<KeyPattern> left, right;
};

Hierarchy make_hierarchy(const Problem& p, const HierarchicalSpec& s) {
  Hierarchy h;
  h.block = s.block;
  h.seq = p.seq_k();
  h.levels = resolved_levels(s, h.seq);
  h.causal = p.mask->causal;
  h.level0 = level0_pattern(h.seq, h.block);
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    const std::int64_t len = level_length(h.seq, l);
    if (h.causal) {
      h.left.push_back(coarse_pattern(h.seq, l, len, h.block, LevelSide::kLeft));
    } else {
      h.left.push_back(coarse_pattern(len, 0, len, h.block, LevelSide::kLeft));
      h.right.push_back(coarse_pattern(len, 0, len, h.block, LevelSide::kRight));
    }
  }
  return h;
}

// One (batch, kv head)'s coarse tokens and partial results, reused from pair to pair. Level l
// (>= 1) starts at row offset[l] of the per-level arrays; k and q rows have D + 1 columns.
struct PairScratch {
  std::int64_t group = 0, dim = 0, dim_v = 0, query_rows = 0;  // query_rows: Σ levels, or S
  std::vector<std::int64_t> offset, key_count, value_count, query_count;
  std::vector<float> k, v, q, out_left, lse_left, out_right, lse_right;

  PairScratch(const Problem& p, const Hierarchy& h)
      : group(p.group()), dim(p.dim()), dim_v(p.dim_v()) {
    offset.assign(static_cast<size_t>(h.levels + 2), 0);
    for (std::int64_t l = 1; l <= h.levels; ++l)
      offset[static_cast<size_t>(l + 1)] = offset[static_cast<size_t>(l)] + level_length(h.seq, l);
    const std::int64_t coarse = offset[static_cast<size_t>(h.levels + 1)];
    query_rows = h.causal ? h.seq : coarse;
    const std::string what = "hierarchical attention's coarse tokens";
    key_count = checked_vector<std::int64_t>(coarse, what);
    value_count = checked_vector<std::int64_t>(coarse, what);
    query_count = checked_vector<std::int64_t>(coarse, what);
    k = checked_vector<float>(checked_product({coarse, dim + 1}, "coarse keys"), what);
    v = checked_vector<float>(checked_product({coarse, dim_v}, "coarse values"), what);
    q = checked_vector<float>(checked_product({group, query_rows, dim + 1}, "coarse queries"),
                              what);
    const std::int64_t results = checked_product({group, query_rows, dim_v}, "coarse results");
    out_left = checked_vector<float>(results, what);
    lse_left = checked_vector<float>(group * query_rows, what);
    if (!h.causal) {
      out_right = checked_vector<float>(results, what);
      lse_right = checked_vector<float>(group * query_rows, what);
    }
  }
  std::int64_t at(std::int64_t l) const { return offset[static_cast<size_t>(l)]; }
};

RowSource rows_of(const ConstTensor& t, std::int64_t b, std::int64_t h) {
  return {t.ptr(b, h, 0), t.shape[2], t.shape[3], t.strides[2], t.strides[3]};
}

RowSource rows_of(const float* base, std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  return {base, rows, cols, ld, 1};
}

// Coarse keys and values of levels 1..L of pair (b, hk), each from the level below; the keys'
// last column is ln(count)/scale.
void coarsen_keys(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                  PairScratch& s) {
  const std::int64_t len = std::min(p.key_length(b), p.seq_k()), ldk = s.dim + 1;
  for (std::int64_t l = 1; l <= h.levels; ++l) {
    const std::int64_t o = s.at(l), below = s.at(l - 1), rows_below = level_length(h.seq, l - 1);
    const bool fine = l == 1;
    const std::int64_t* counts = fine ? nullptr : s.key_count.data() + below;
    halve_rows(
        fine ? rows_of(p.k, b, hk) : rows_of(s.k.data() + below * ldk, rows_below, s.dim, ldk),
        counts, len, s.k.data() + o * ldk, ldk, s.key_count.data() + o, p.threads);
    halve_rows(fine ? rows_of(p.v, b, hk)
                    : rows_of(s.v.data() + below * s.dim_v, rows_below, s.dim_v, s.dim_v),
               counts, len, s.v.data() + o * s.dim_v, s.dim_v, s.value_count.data() + o, p.threads);
    write_log_counts(s.key_count.data() + o, level_length(h.seq, l), p.scale, s.k.data() + o * ldk,
                     ldk, s.dim);
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
      for (std::int64_t i = 0; i < h.seq; ++i) {
        for (std::int64_t d = 0; d < s.dim; ++d) q[i * ldq + d] = p.q.at(b, head, i, d);
      }
      write_ones(h.seq, q, ldq, s.dim);
      continue;
    }
    for (std::int64_t l = 1; l <= h.levels; ++l) {
      const std::int64_t o = s.at(l), below = s.at(l - 1);
      const bool fine = l == 1;
      halve_rows(fine ? rows_of(p.q, b, head)
                      : rows_of(q + below * ldq, level_length(h.seq, l - 1), s.dim, ldq),
                 fine ? nullptr : s.query_count.data() + below, h.seq, q + o * ldq, ldq,
                 s.query_count.data() + o, p.threads);
      write_ones(level_length(h.seq, l), q + o * ldq, ldq, s.dim);
    }
  }
}

// The flash kernel over one level of one pair: `rows` query rows of every head of the group
// (starting at row `first` of s.q) against level l's coarse keys.
void attend_level(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t l,
                  std::int64_t first, std::int64_t rows, const KeyPattern& pattern, PairScratch& s,
                  std::vector<float>& out, std::vector<float>& lse) {
  const std::int64_t len = level_length(h.seq, l), ld = s.dim + 1;
  Mask mask;
  mask.key_lengths = {level_length(std::min(p.key_length(b), p.seq_k()), l)};
  Problem c = p;
  const std::array<std::int64_t, 4> q_strides{0, s.query_rows * ld, ld, 1};
  c.q = ConstTensor{s.q.data() + first * ld, {1, s.group, rows, ld}, q_strides};
  c.k = bhsd<const float>(s.k.data() + s.at(l) * ld, 1, 1, len, ld);
  c.v = bhsd<const float>(s.v.data() + s.at(l) * s.dim_v, 1, 1, len, s.dim_v);
  const std::array<std::int64_t, 4> out_strides{0, s.query_rows * s.dim_v, s.dim_v, 1};
  c.out = Tensor{out.data() + first * s.dim_v, {1, s.group, rows, s.dim_v}, out_strides};
  c.lse = Tensor{lse.data() + first, {1, s.group, rows, 1}, {0, s.query_rows, 1, 1}};
  c.mask = &mask;
  c.weights.reset();
  c.positional.reset();
  flash_forward(c, pattern);
}

// Non-causal: each level's left and right halves, then the levels from the top down, so that
// level l's result per coarse row holds every coarser level as well.
void coarse_levels(const Problem& p, const Hierarchy& h, std::int64_t b, PairScratch& s) {
  for (std::int64_t l = h.levels; l >= 1; --l) {
    const std::int64_t o = s.at(l), rows = level_length(h.seq, l);
    const auto idx = static_cast<size_t>(l - 1);
    attend_level(p, h, b, l, o, rows, h.left[idx], s, s.out_left, s.lse_left);
    attend_level(p, h, b, l, o, rows, h.right[idx], s, s.out_right, s.lse_right);
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t base = g * s.query_rows;
      for (std::int64_t t = 0; t < rows; ++t) {
        const std::int64_t r = base + o + t;
        float* out = s.out_left.data() + r * s.dim_v;
        float& lse = s.lse_left[static_cast<size_t>(r)];
        merge_partial(out, 1, lse, s.out_right.data() + r * s.dim_v,
                      s.lse_right[static_cast<size_t>(r)], s.dim_v);
        if (l == h.levels) continue;
        const std::int64_t parent = base + s.at(l + 1) + t / 2;
        merge_partial(out, 1, lse, s.out_left.data() + parent * s.dim_v,
                      s.lse_left[static_cast<size_t>(parent)], s.dim_v);
      }
    }
  }
}

// Merges each head's coarse results into its fine rows (out and the level-0 lse).
void merge_into_rows(const Problem& p, const Hierarchy& h, std::int64_t b, std::int64_t hk,
                     const PairScratch& s, std::vector<float>& lse0) {
  const std::int64_t step = p.out.strides[3];
#pragma omp parallel for schedule(static) num_threads(p.threads) if (p.threads > 1)
  for (std::int64_t i = 0; i < h.seq; ++i) {
    for (std::int64_t g = 0; g < s.group; ++g) {
      const std::int64_t head = hk * s.group + g;
      // Causal: row i of this level's fine-query call; otherwise level 1's coarse row i/2.
      const std::int64_t r = g * s.query_rows + (h.causal ? i : s.at(1) + i / 2);
      float& lse = lse0[static_cast<size_t>((b * p.heads_q() + head) * h.seq + i)];
      merge_partial(p.out.ptr(b, head, i), step, lse, s.out_left.data() + r * s.dim_v,
                    s.lse_left[static_cast<size_t>(r)], s.dim_v);
    }
  }
}

void run_hierarchy(const Problem& p, const Hierarchy& h) {
  if (h.levels == 0) {  // level 0 covers every pair: exact attention
    flash_forward(p, h.level0);
    return;
  }
  std::vector<float> lse0 = checked_vector<float>(
      checked_product({p.batch(), p.heads_q(), h.seq}, "B x H_q x S (level-0 lse)"), "lse");
  Problem level0 = p;
  level0.lse = bhsd(lse0.data(), p.batch(), p.heads_q(), h.seq, 1);
  flash_forward(level0, h.level0);
  PairScratch s(p, h);
  for (std::int64_t b = 0; b < p.batch(); ++b) {
    for (std::int64_t hk = 0; hk < p.heads_kv(); ++hk) {
      coarsen_keys(p, h, b, hk, s);
      prepare_queries(p, h, b, hk, s);
      if (!h.causal) {
        coarse_levels(p, h, b, s);
        merge_into_rows(p, h, b, hk, s, lse0);
        continue;
      }
      for (std::int64_t l = 1; l <= h.levels; ++l) {
        attend_level(p, h, b, l, 0, h.seq, h.left[static_cast<size_t>(l - 1)], s, s.out_left,
                     s.lse_left);
        merge_into_rows(p, h, b, hk, s, lse0);
      }
    }
  }
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
    if (rope_of(p.positional.get()) != nullptr) {
      throw Error(ErrorKind::kNotImplemented, "options.rope", "unset for variant 'hierarchical'",
                  "a RotaryEmbedding",
                  "RoPE is not built for hierarchical attention yet; rotate q and k first or use "
                  "dense or sliding-window attention");
    }
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
