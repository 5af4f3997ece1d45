// The cache path of AttentionPlan::run: checks against the cache, the kernel problem, cost.
#include <algorithm>
#include <limits>
#include <span>
#include <string>

#include "src/api/kv_cache_access.hpp"
#include "src/api/plan_state.hpp"
#include "src/kernel/decode/prefetch_level.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "variants/variant_row.hpp"

namespace seqattn::detail {
namespace {

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  throw Error(ErrorKind::kUnsupported, option, "an option attention over a KvCache honours",
              option + " is set", why);
}

// The rows of the table that run over a cache, e.g. "dense, sliding-window".
std::string variants_over_cache() {
  std::string names;
  for (const Variant v : concrete_variants()) {
    if (row_of(v).over_cache == nullptr) continue;
    names += (names.empty() ? "" : ", ") + std::string(to_string(v));
  }
  return names;
}

void expect_cache_extent(const char* name, std::int64_t actual, std::int64_t planned) {
  if (actual != planned) {
    fail(std::string("cache.shape().") + name, str(planned) + " (as planned)", str(actual),
         "make the plan with cache_shape(cache.shape(), H_q, S_q)");
  }
}

// The cache's keys were rotated when appended: the plan must rotate its queries the same way.
void check_cache_rope(const PlanState& st, const std::optional<RotaryEmbedding>& cache_rope,
                      std::int64_t dim) {
  check_positional_over_cache(st.planned.positional.get());
  const std::optional<RotaryEmbedding>& planned = st.options.rope;
  if (planned.has_value() != cache_rope.has_value()) {
    fail("options.rope", cache_rope ? "the cache's rope (its keys are rotated)" : "unset",
         planned ? "a RotaryEmbedding over a cache without rope" : "unset",
         "give the plan and the cache's shape the same RotaryEmbedding");
  }
  if (planned && !same_rotation(*planned, *cache_rope, dim)) {
    fail("options.rope",
         "the cache's rope: theta " + std::to_string(cache_rope->theta) + ", dims " +
             str(cache_rope->dims) + ", offset " + str(cache_rope->offset),
         "theta " + std::to_string(planned->theta) + ", dims " + str(planned->dims) + ", offset " +
             str(planned->offset) + " (or another layout or scaling)",
         "give the plan and the cache's shape the same RotaryEmbedding");
  }
}

// The new queries are the last S_q (or query_lengths[b]) tokens of every sequence: a shorter
// sequence would put rows at negative positions (they used to come out as zeros).
// `before` b `after` names sequence b's length, e.g. "cache.length(" b ")".
void check_lengths_cover_queries(const char* before, const char* after, const std::int64_t* lengths,
                                 std::int64_t batch, std::int64_t seq_q,
                                 std::span<const std::int64_t> query_lengths) {
  if (!query_lengths.empty() && static_cast<std::int64_t>(query_lengths.size()) != batch) {
    fail("query_lengths.size()", str(batch) + " (one per sequence)",
         str(static_cast<std::int64_t>(query_lengths.size())));
  }
  for (std::int64_t b = 0; b < batch; ++b) {
    std::int64_t n = seq_q;
    if (!query_lengths.empty()) {
      n = query_lengths[static_cast<std::size_t>(b)];
      if (n < 1 || n > seq_q) {
        fail("query_lengths[" + str(b) + "]", "in [1, S_q = " + str(seq_q) + "]", str(n));
      }
    }
    if (lengths[b] < n) {
      const std::string name =
          query_lengths.empty() ? "q.shape[2] (S_q)" : "query_lengths[" + str(b) + "]";
      fail(name,
           "<= " + std::string(before) + str(b) + after + " = " + str(lengths[b]) +
               " (the queries are the last tokens of each sequence)",
           str(n), "append the new tokens' keys and values to the cache before the run");
    }
  }
}

// What every run over a cache refuses: a row without a cache rule, masks the cache replaces,
// attention weights.
void check_cache_options(const PlanState& st, const RunArgs& args) {
  if (!st.cache_rule) {
    unsupported("variant", std::string(to_string(st.id)) +
                               " does not run over a KvCache: use one of " + variants_over_cache() +
                               " (linear attention's recurrent state is LinearAttentionState)");
  }
  if (!args.key_lengths.empty()) {
    unsupported("mask.key_lengths", "the cache's own per-sequence lengths are the key lengths");
  }
  if (args.keep) unsupported("mask.keep", "masks over a cache are not built; use key lengths");
  if (args.bias) unsupported("mask.bias", "biases over a cache are not built");
  if (args.weights) unsupported("weights", "the cache path never forms attention weights");
}

// Sequence b of a paged batch has dropped the positions before `first` (drop_front): its
// queries, the last n of `length` positions, may not reach them. A dense row reaches every
// key, a row at a global position too, and every row sees a global key.
void check_dropped_positions(const CacheRule& rule, std::int64_t b, std::int64_t first,
                             std::int64_t length, std::int64_t n) {
  const std::string name = "sequences[" + str(b) + "]";
  const std::string dropped = "positions 0.." + str(first - 1) + " dropped (drop_front)";
  if (!rule.banded) {
    fail(name, "every position stored, for attention without a window", dropped,
         "drop positions only under a sliding window, before every query's band");
  }
  for (const std::int64_t g : rule.globals) {
    if (g < first) {
      fail(name, "global token " + str(g) + " stored (every query sees it)", dropped,
           "drop positions only after the global tokens");
    }
    if (g >= length - n && g < length) {
      fail(name,
           "every position stored: the query at global position " + str(g) + " sees every key",
           dropped, "drop positions only for sequences whose new queries are not global tokens");
    }
  }
  const std::int64_t reach = std::max<std::int64_t>(length - n - rule.left, 0);
  if (reach < first) {
    fail(name,
         "positions from " + str(reach) + " on stored (the first query, at position " +
             str(length - n) + ", sees " + str(rule.left) + " keys back)",
         dropped, "drop only positions before every later query's window");
  }
}

}  // namespace

void check_paged_run(const PlanState& st, const PagedKvCache& cache,
                     std::span<const PagedKvCache::SequenceId> sequences, const PackedKv& kv,
                     const RunArgs& args) {
  check_cache_options(st, args);
  const PagedKvCacheShape& c = cache.shape();
  const AttentionShape& s = st.shape;
  check_cache_rope(st, c.rope, c.dim);
  if (kv.batch != s.batch) {
    fail("sequences.size()", str(s.batch) + " (the plan's batch)", str(kv.batch),
         "make the plan with paged_shape(cache.shape(), sequences.size(), H_q, S_q, max_length)");
  }
  expect_cache_extent("heads_kv", c.heads_kv, s.heads_kv);
  expect_cache_extent("dim", c.dim, s.dim);
  expect_cache_extent("dim_v", c.dim_v, s.dim_v);
  check_lengths_cover_queries("cache.length(sequences[", "])", kv.lengths, kv.batch, s.seq_q,
                              args.query_lengths);
  for (std::int64_t b = 0; b < kv.batch; ++b) {
    const std::int64_t first = cache.first_stored(sequences[static_cast<std::size_t>(b)]);
    if (first == 0) continue;
    const std::int64_t n =
        args.query_lengths.empty() ? s.seq_q : args.query_lengths[static_cast<std::size_t>(b)];
    check_dropped_positions(*st.cache_rule, b, first, kv.lengths[b], n);
  }
}

void check_cache_run(const PlanState& st, const KvCache& cache, const RunArgs& args) {
  check_cache_options(st, args);
  const CacheRule& rule = *st.cache_rule;
  const KvCacheShape& c = cache.shape();
  const AttentionShape& s = st.shape;
  check_cache_rope(st, c.rope, c.dim);
  expect_cache_extent("batch", c.batch, s.batch);
  expect_cache_extent("heads_kv", c.heads_kv, s.heads_kv);
  expect_cache_extent("capacity", c.capacity, s.seq_k);
  expect_cache_extent("dim", c.dim, s.dim);
  expect_cache_extent("dim_v", c.dim_v, s.dim_v);
  check_lengths_cover_queries("cache.length(", ")", KvCacheAccess::packed(cache).lengths, c.batch,
                              s.seq_q, args.query_lengths);
  if (cache.mode() != KvCacheMode::kRing) return;
  if (!rule.banded) {
    for (std::int64_t b = 0; b < c.batch; ++b) {
      if (cache.length(b) > c.capacity) {
        fail("cache.length(" + str(b) + ")",
             "<= capacity = " + str(c.capacity) + " for dense attention over a ring",
             str(cache.length(b)),
             "the ring has dropped tokens dense attention needs: use a sliding window");
      }
    }
    return;
  }
  if (!rule.globals.empty()) {
    unsupported("sliding_window.global_tokens",
                "a ring drops old tokens, global ones too: use KvCacheMode::kLinear");
  }
  if (rule.left > c.capacity - s.seq_q) {
    fail("sliding_window.left",
         "<= capacity - S_q = " + str(c.capacity) + " - " + str(s.seq_q) + " for a ring cache",
         str(rule.left),
         "every key the new queries see must still be in the ring: enlarge the ring");
  }
}

CacheProblem cache_problem(const PlanState& st, const Problem& bound, const PackedKv& kv,
                           std::span<const std::int64_t> query_lengths) {
  CacheProblem p;
  p.query_lengths = query_lengths.empty() ? nullptr : query_lengths.data();
  p.q = bound.q;
  p.out = bound.out;
  p.lse = bound.lse;
  p.kv = kv;
  p.scale = bound.scale;
  p.causal = st.options.mask.causal;
  p.banded = st.cache_rule->banded;
  p.left = st.cache_rule->left;
  p.right = st.cache_rule->right;
  p.globals = &st.cache_rule->globals;
  p.group = bound.group();
  p.split = st.split;
  p.threads = bound.threads;
  p.positional = st.planned.positional.get();
  p.prefetch = decode_prefetch();  // may throw (a bad SEQATTN_DECODE_PREFETCH)
  return p;
}

Cost cache_cost(const CacheProblem& p) {
  double pairs = 0, keys_read = 0, queries = 0;
  for (std::int64_t b = 0; b < p.kv.batch; ++b) {
    std::int64_t lo = p.kv.length(b), hi = 0;  // the union of the rows' ranges
    queries += static_cast<double>(p.seq_q(b));
    for (std::int64_t i = 0; i < p.seq_q(b); ++i) {
      const std::int64_t pos = p.position(b, i);
      const CacheKeyRange r = VisibleKeys(p, b, pos);
      std::int64_t seen = std::max<std::int64_t>(r.hi - r.lo, 0);
      for (const std::int64_t g : *p.globals) {
        if ((g < r.lo || g >= r.hi) && SeesGlobalKey(p, b, pos, g)) ++seen;
      }
      pairs += static_cast<double>(seen);
      if (!r.empty()) {
        lo = std::min(lo, r.lo);
        hi = std::max(hi, r.hi);
      }
    }
    std::int64_t keys = std::max<std::int64_t>(hi - lo, 0);
    for (const std::int64_t g : *p.globals) {
      if ((g < lo || g >= hi) && g >= p.kv.base(b) && g < p.kv.length(b)) ++keys;
    }
    keys_read += static_cast<double>(keys);
  }
  const double d = static_cast<double>(p.kv.dim), dv = static_cast<double>(p.kv.dim_v);
  const double heads_q = static_cast<double>(p.q.shape[1]);
  Cost c;
  c.flops = 2.0 * (d + dv) * pairs * heads_q;
  // K/V in the cache's dtype (int8: plus a 4-byte scale per token for each); q and out as the
  // kernel reads and writes them (fp32).
  const double kv_bytes = static_cast<double>(dtype_size(p.kv.dtype));
  const double scales = p.kv.dtype == DType::kI8 ? 8.0 : 0.0;
  c.bytes = keys_read * static_cast<double>(p.kv.heads_kv) * (kv_bytes * (d + dv) + scales) +
            4.0 * queries * heads_q * (d + dv);
  return c;
}

void clear_padding_rows(const CacheProblem& p) {
  if (p.query_lengths == nullptr) return;
  const std::int64_t heads = p.out.shape[1], dim_v = p.out.shape[3];
  for (std::int64_t b = 0; b < p.kv.batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t i = p.seq_q(b); i < p.seq_q(); ++i) {
        for (std::int64_t d = 0; d < dim_v; ++d) p.out.at(b, h, i, d) = 0.0f;
        if (p.lse) p.lse->at(b, h, i, 0) = -std::numeric_limits<float>::infinity();
      }
    }
  }
}

int cache_team(const CacheProblem& p) {
  const std::int64_t items = p.kv.batch * p.kv.heads_kv * p.split.row_tiles * p.split.chunks;
  return static_cast<int>(std::min<std::int64_t>(p.threads, items));
}

}  // namespace seqattn::detail
