// Kernelised linear attention: the variant object (checks, cost) and the batch × head driver.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "variants/linear/linear_core.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

constexpr double kMinParallelFlops = 1 << 20;

std::optional<float> given_scale(const Problem& p) {
  return p.scale_given ? std::optional<float>(p.scale) : std::nullopt;
}

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  refuse_option("linear", option, why, "dense");
}

class LinearVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kLinear; }

  void check(const Problem& p, const VariantSpec& spec) const override {
    refuse_alibi(p, "linear", "it never forms the scores ALiBi biases");
    const std::string no_matrix = "linear attention never forms the S_q x S_k score matrix";
    if (p.mask.keep) unsupported("mask.keep", no_matrix);
    if (p.mask.bias) unsupported("mask.bias", no_matrix);
    if (p.weights) unsupported("weights", no_matrix);
    if (p.lse) unsupported("lse", "its normaliser is not a softmax log-sum-exp");
    validate_linear_spec(std::get<LinearSpec>(spec), p.dim());
  }

  // FLOPs, with m features and the chunk length C of the dispatched target (exp counted as
  // one FLOP):
  //   feature maps: elu1/relu 1 per element (S·D); FAVOR+ 2·D·m per row for w·x plus
  //     2·D for |x|² and 2·m for shift and exp;
  //   non-causal: 2·m·(D_v + 1) per visible key (summary and normaliser) and per query
  //     (numerator and denominator), plus D_v per query for the division;
  //   causal adds the intra-chunk part actually executed: 2·C·(m + D_v + 1) per query.
  // Bytes: q, k, v read once, out written once, plus the FAVOR+ matrix.
  Cost cost(const Problem& p, const VariantSpec& spec) const override {
    const auto& linear = std::get<LinearSpec>(spec);
    const double m = static_cast<double>(validate_linear_spec(linear, p.dim()));
    const double d = static_cast<double>(p.dim()), dv = static_cast<double>(p.dim_v());
    const bool favor = linear.feature_map == FeatureMap::kFavor;
    const double feature_flops = favor ? 2.0 * d * m + 2.0 * d + 2.0 * m : d;
    double keys = 0;
    for (std::int64_t b = 0; b < p.batch(); ++b) keys += static_cast<double>(p.key_length(b));
    keys *= static_cast<double>(p.heads_kv());
    const double queries = static_cast<double>(p.batch() * p.heads_q() * p.seq_q());
    double per_query = feature_flops + 2.0 * m * (dv + 1.0) + dv;
    if (p.mask.causal) {
      const double chunk = static_cast<double>(
          std::min(linear_simd::blocking().causal_chunk, std::max<std::int64_t>(p.seq_k(), 1)));
      per_query += 2.0 * chunk * (m + dv + 1.0);
    }
    Cost c;
    c.flops = keys * (feature_flops + 2.0 * m * (dv + 1.0)) + queries * per_query;
    c.bytes = 4.0 * (queries * (d + dv) +
                     static_cast<double>(p.batch() * p.heads_kv() * p.seq_k()) * (d + dv));
    if (favor) c.bytes += 4.0 * m * d;
    return c;
  }

  void run(const Problem& p, const VariantSpec& spec) const override {
    run_plan(p, make_linear_plan(std::get<LinearSpec>(spec), p.dim(), p.dim_v(), given_scale(p)),
             cost(p, spec).flops);
  }

  // The feature-map plan (FAVOR+'s random matrix) depends on the spec and shape only.
  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(
        make_linear_plan(std::get<LinearSpec>(spec), p.dim(), p.dim_v(), given_scale(p)),
        cost(p, spec).flops);
  }

 private:
  class Prepared final : public PreparedVariant {
   public:
    Prepared(LinearPlan plan, double flops) : plan_(std::move(plan)), flops_(flops) {}
    void run(const Problem& p) const override { run_plan(p, plan_, flops_); }

   private:
    LinearPlan plan_;
    double flops_;
  };

  static void run_plan(const Problem& p, const LinearPlan& prepared, double flops) {
    // The rotation tables belong to the plan's problem, not to the prepared feature map.
    LinearPlan plan = prepared;
    plan.rope = rope_of(p.positional.get());
    // Below ~1 MFLOP a thread team costs more than it saves.
    const int team = flops >= kMinParallelFlops ? p.threads : 1;
    if (p.mask.causal && plan.map == FeatureMap::kFavor) {
      run_causal_heads(p, plan, team);
    } else if (p.mask.causal) {
      run_causal_segments(p, plan, team);
    } else {
      run_full(p, plan, team);
    }
  }

  static ConstRows visible_rows(const ConstTensor& t, const Problem& p, std::int64_t b,
                                std::int64_t hk) {
    ConstRows rows = head_rows(t, b, hk);
    rows.rows = p.key_length(b);  // padded keys contribute nothing
    return rows;
  }

  static QueryGroup query_group(const Problem& p, std::int64_t b, std::int64_t hk) {
    QueryGroup group;
    for (std::int64_t h = hk * p.group(); h < (hk + 1) * p.group(); ++h) {
      group.q.push_back(head_rows(p.q, b, h));
      group.out.push_back(head_rows(p.out, b, h));
    }
    return group;
  }

  // FAVOR+ (whose running key stabilisers make segments depend on each other): one (batch,
  // kv head) per task, its chunks in order. Every output element is computed by one thread in
  // a fixed order, so the result is bitwise the same for any thread count.
  static void run_causal_heads(const Problem& p, const LinearPlan& plan, int team) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    const std::int64_t offset = p.seq_k() - p.seq_q();
    team = static_cast<int>(std::min<std::int64_t>(team, tasks));
#pragma omp parallel num_threads(team)
    {
      LinearWorkspace ws(plan);
      HeadState state;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t t = 0; t < tasks; ++t) {
        const std::int64_t b = t / p.heads_kv(), hk = t % p.heads_kv();
        const QueryGroup group = query_group(p, b, hk);
        state.reset(plan);
        linear_causal_head(plan, state, visible_rows(p.k, p, b, hk), visible_rows(p.v, p, b, hk),
                           group, offset, ws);
      }
    }
  }

  // One segment of one (batch, kv head).
  struct Segment {
    std::int64_t task = 0, first_key = 0, keys = 0;
    bool last = false;
  };

  static std::vector<Segment> causal_segments(const Problem& p, const LinearPlan& plan) {
    std::vector<Segment> list;
    const std::int64_t g = plan.blocking.segment;
    for (std::int64_t t = 0; t < p.batch() * p.heads_kv(); ++t) {
      const std::int64_t len = p.key_length(t / p.heads_kv());
      for (std::int64_t k0 = 0; k0 == 0 || k0 < len; k0 += g) {  // one empty segment if len = 0
        list.push_back({t, k0, std::min(g, len - k0), k0 + g >= len});
      }
    }
    return list;
  }

  // elu1/relu: segments of every (batch, kv head) in waves of up to kWavePerThread × team:
  // the threads sum the wave's segments' keys, one thread chains their prefix states in order,
  // then the threads finish the segments' queries. Segments are fixed by the plan and the
  // prefix order is fixed, so the result is bitwise the same for any thread count, and one kv
  // head keeps every thread busy. Several segments per thread, taken dynamically, absorb cores
  // of unequal speed (one per thread lost 20% of two threads' time to the barriers).
  static void run_causal_segments(const Problem& p, const LinearPlan& plan, int team) {
    constexpr std::int64_t kWavePerThread = 4;
    const std::vector<Segment> segments = causal_segments(p, plan);
    const std::int64_t count = static_cast<std::int64_t>(segments.size());
    team = static_cast<int>(std::min<std::int64_t>(team, count));
    const std::int64_t width = std::min(count, kWavePerThread * team);
    const std::int64_t offset = p.seq_k() - p.seq_q();
    std::vector<SegmentKeys> slots(static_cast<std::size_t>(width), SegmentKeys(plan));
    std::vector<HeadState> starts(static_cast<std::size_t>(width));
    for (HeadState& s : starts) s.reset(plan);
    HeadState carry;  // the keys of the wave's last task before its next segment
    carry.reset(plan);
#pragma omp parallel num_threads(team)
    {
      LinearWorkspace ws(plan);
      for (std::int64_t w = 0; w < count; w += width) {
        const std::int64_t wave = std::min(width, count - w);
#pragma omp for schedule(runtime)
        for (std::int64_t s = 0; s < wave; ++s) {
          const Segment& seg = segments[static_cast<std::size_t>(w + s)];
          const std::int64_t b = seg.task / p.heads_kv(), hk = seg.task % p.heads_kv();
          linear_segment_keys(plan, head_rows(p.k, b, hk), head_rows(p.v, b, hk), seg.first_key,
                              seg.keys, slots[static_cast<std::size_t>(s)], ws);
        }
#pragma omp single
        for (std::int64_t s = 0; s < wave; ++s) {
          const Segment& seg = segments[static_cast<std::size_t>(w + s)];
          HeadState& start = starts[static_cast<std::size_t>(s)];
          if (seg.first_key == 0) carry.reset(plan);
          start = carry;
          linear_add_state(carry, slots[static_cast<std::size_t>(s)].total);
        }
#pragma omp for schedule(runtime)
        for (std::int64_t s = 0; s < wave; ++s) {
          const Segment& seg = segments[static_cast<std::size_t>(w + s)];
          const std::int64_t b = seg.task / p.heads_kv(), hk = seg.task % p.heads_kv();
          linear_segment_queries(plan, starts[static_cast<std::size_t>(s)],
                                 slots[static_cast<std::size_t>(s)], query_group(p, b, hk), offset,
                                 seg.last, ws);
        }
      }
    }
  }

  // The states of every (batch, kv head) first, then query blocks from the finished states:
  // the second phase keeps every thread busy even with a single kv head (MQA, B = 1), and
  // each output element is still computed by one thread in a fixed order.
  static void run_full(const Problem& p, const LinearPlan& plan, int team) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    const std::int64_t block = plan.blocking.query_block;
    const std::int64_t blocks = (p.seq_q() + block - 1) / block;  // per query head
    const std::int64_t items = p.batch() * p.heads_q() * blocks;
    std::vector<HeadState> states(static_cast<std::size_t>(tasks));
#pragma omp parallel num_threads(team)
    {
      LinearWorkspace ws(plan);
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t t = 0; t < tasks; ++t) {
        const std::int64_t b = t / p.heads_kv(), hk = t % p.heads_kv();
        HeadState& state = states[static_cast<std::size_t>(t)];
        state.reset(plan);
        linear_absorb_all(plan, state, visible_rows(p.k, p, b, hk), visible_rows(p.v, p, b, hk),
                          ws);
      }
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t item = 0; item < items; ++item) {
        const std::int64_t b = item / (p.heads_q() * blocks);
        const std::int64_t h = item / blocks % p.heads_q();
        const std::int64_t row0 = item % blocks * block;
        const HeadState& state = states[static_cast<std::size_t>(b * p.heads_kv() + h / p.group())];
        linear_emit_rows(plan, state, head_rows(p.q, b, h), head_rows(p.out, b, h), row0,
                         std::min(block, p.seq_q() - row0), ws);
      }
    }
  }
};

}  // namespace

const AttentionVariant& linear_variant() {
  static const LinearVariant instance;
  return instance;
}

}  // namespace seqattn::detail
