// Kernelised linear attention: the variant object (checks, cost) and the batch × head driver.
#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <variant>

#include "src/kernel/scratch_arena.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "src/runtime/workspace.hpp"
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
    // A literal, not a std::string: check() runs on every run with key lengths.
    const char* no_matrix = "linear attention never forms the S_q x S_k score matrix";
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
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      ScratchArena count;
      carve_scratch(planned, plan_, flops_, count);
      return count.used();
    }

   private:
    LinearPlan plan_;
    double flops_;
  };

  // One segment of one (batch, kv head).
  struct Segment {
    std::int64_t task = 0, first_key = 0, keys = 0;
    bool last = false;
  };

  // A run's scratch, carved in this order by carve_scratch for the count and for the run: per
  // thread a LinearWorkspace and a QueryGroup, then the path's states: run_full one per
  // (batch, kv head); FAVOR+ causal one per thread; elu1/relu causal the segment list (as long
  // as full key lengths make it), a wave's slots and start states, and the carry. Nothing
  // depends on the key lengths, so the plan's count is every run's.
  struct LinearScratch {
    int team = 1;
    LinearWorkspace* ws = nullptr;
    QueryGroup* groups = nullptr;
    HeadState* states = nullptr;
    Segment* segments = nullptr;
    SegmentKeys* slots = nullptr;
    HeadState* starts = nullptr;
    HeadState* carry = nullptr;
  };

  static constexpr std::int64_t kWavePerThread = 4;

  static std::int64_t max_segments(const Problem& p, const LinearPlan& plan) {
    const std::int64_t g = plan.blocking.segment;
    return checked_product(
        {p.batch(), p.heads_kv(), std::max<std::int64_t>(1, (p.seq_k() + g - 1) / g)},
        "B x H_kv x segments (linear attention's causal segments)");
  }

  static LinearScratch carve_scratch(const Problem& p, const LinearPlan& plan, double flops,
                                     ScratchArena& arena) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    const bool causal = p.mask.causal, favor = plan.map == FeatureMap::kFavor;
    // Below ~1 MFLOP a thread team costs more than it saves.
    std::int64_t team = flops >= kMinParallelFlops ? p.threads : 1;
    if (causal) team = std::min(team, favor ? tasks : max_segments(p, plan));
    LinearScratch s;
    s.team = static_cast<int>(team);
    s.ws = carve_objects<LinearWorkspace>(arena, team, plan);
    s.groups = carve_objects<QueryGroup>(arena, team, p.group());
    if (!causal || favor) {
      const std::int64_t states = causal ? team : tasks;
      checked_product({states, plan.features, plan.dim_v}, "states x m x D_v (linear attention)");
      s.states = carve_objects<HeadState>(arena, states, plan);
    } else {
      const std::int64_t count = max_segments(p, plan);
      const std::int64_t width = std::min(count, kWavePerThread * team);
      s.segments = arena.take<Segment>(count);
      s.slots = carve_objects<SegmentKeys>(arena, width, plan);
      s.starts = carve_objects<HeadState>(arena, width, plan);
      s.carry = carve_objects<HeadState>(arena, 1, plan);
    }
    return s;
  }

  static void run_plan(const Problem& p, const LinearPlan& prepared, double flops) {
    // The rotation tables belong to the plan's problem, not to the prepared feature map.
    LinearPlan plan = prepared;
    plan.rope = rope_of(p.positional.get());
    // The caller's workspace (checked whole before anything is written), or one allocation.
    ScratchArena count;
    carve_scratch(p, plan, flops, count);
    const RunScratch scratch(p.workspace, count.used(), count.used(),
                             "AttentionPlan::qkv_workspace_bytes() (linear attention: each "
                             "thread's buffers and the heads' states)");
    ScratchArena arena(scratch.data(), scratch.size());
    const LinearScratch s = carve_scratch(p, plan, flops, arena);
    if (p.mask.causal && plan.map == FeatureMap::kFavor) {
      run_causal_heads(p, plan, s);
    } else if (p.mask.causal) {
      run_causal_segments(p, plan, s);
    } else {
      run_full(p, plan, s);
    }
  }

  static ConstRows visible_rows(const ConstTensor& t, const Problem& p, std::int64_t b,
                                std::int64_t hk) {
    ConstRows rows = head_rows(t, b, hk);
    rows.rows = p.key_length(b);  // padded keys contribute nothing
    return rows;
  }

  // The query heads of kv head hk (and their outputs) into a group carved for p.group().
  static const QueryGroup& query_group(const Problem& p, std::int64_t b, std::int64_t hk,
                                       QueryGroup& group) {
    for (std::int64_t i = 0; i < p.group(); ++i) {
      group.q[static_cast<std::size_t>(i)] = head_rows(p.q, b, hk * p.group() + i);
      group.out[static_cast<std::size_t>(i)] = head_rows(p.out, b, hk * p.group() + i);
    }
    return group;
  }

  // FAVOR+ (whose running key stabilisers make segments depend on each other): one (batch,
  // kv head) per task, its chunks in order. Every output element is computed by one thread in
  // a fixed order, so the result is bitwise the same for any thread count.
  static void run_causal_heads(const Problem& p, const LinearPlan& plan, const LinearScratch& s) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    const std::int64_t offset = p.seq_k() - p.seq_q();
    RunOnTeam(s.team, [&](const auto& team) {
      const auto thread = static_cast<std::size_t>(team.thread());
      HeadState& state = s.states[thread];
      team.for_dynamic(tasks, [&](std::int64_t t) {
        const std::int64_t b = t / p.heads_kv(), hk = t % p.heads_kv();
        state.reset(plan);
        linear_causal_head(plan, state, visible_rows(p.k, p, b, hk), visible_rows(p.v, p, b, hk),
                           query_group(p, b, hk, s.groups[thread]), offset, s.ws[thread]);
      });
    });
  }

  // The segments of every (batch, kv head) into s.segments; returns their count.
  static std::int64_t causal_segments(const Problem& p, const LinearPlan& plan,
                                      const LinearScratch& s) {
    std::int64_t count = 0;
    const std::int64_t g = plan.blocking.segment;
    for (std::int64_t t = 0; t < p.batch() * p.heads_kv(); ++t) {
      const std::int64_t len = p.key_length(t / p.heads_kv());
      for (std::int64_t k0 = 0; k0 == 0 || k0 < len; k0 += g) {  // one empty segment if len = 0
        s.segments[count++] = {t, k0, std::min(g, len - k0), k0 + g >= len};
      }
    }
    return count;
  }

  // elu1/relu: segments of every (batch, kv head) in waves of up to kWavePerThread × team:
  // the threads sum the wave's segments' keys, one thread chains their prefix states in order,
  // then the threads finish the segments' queries. Segments are fixed by the plan and the
  // prefix order is fixed, so the result is bitwise the same for any thread count, and one kv
  // head keeps every thread busy. Several segments per thread, taken dynamically, absorb cores
  // of unequal speed (one per thread lost 20% of two threads' time to the barriers).
  static void run_causal_segments(const Problem& p, const LinearPlan& plan,
                                  const LinearScratch& s) {
    const std::int64_t count = causal_segments(p, plan, s);
    const int team = static_cast<int>(std::min<std::int64_t>(s.team, count));
    const std::int64_t width = std::min(count, kWavePerThread * team);
    const std::int64_t offset = p.seq_k() - p.seq_q();
    for (std::int64_t i = 0; i < width; ++i) s.starts[i].reset(plan);
    s.carry->reset(plan);  // the keys of the wave's last task before its next segment
    RunOnTeam(team, [&](const auto& crew) {
      const auto thread = static_cast<std::size_t>(crew.thread());
      for (std::int64_t w = 0; w < count; w += width) {
        const std::int64_t wave = std::min(width, count - w);
        crew.for_dynamic(wave, [&](std::int64_t i) {
          const Segment& seg = s.segments[w + i];
          const std::int64_t b = seg.task / p.heads_kv(), hk = seg.task % p.heads_kv();
          linear_segment_keys(plan, head_rows(p.k, b, hk), head_rows(p.v, b, hk), seg.first_key,
                              seg.keys, s.slots[i], s.ws[thread]);
        });
        crew.single([&] {
          for (std::int64_t i = 0; i < wave; ++i) {
            if (s.segments[w + i].first_key == 0) s.carry->reset(plan);
            s.starts[i].copy_from(*s.carry);
            linear_add_state(*s.carry, s.slots[i].total);
          }
        });
        crew.for_dynamic(wave, [&](std::int64_t i) {
          const Segment& seg = s.segments[w + i];
          const std::int64_t b = seg.task / p.heads_kv(), hk = seg.task % p.heads_kv();
          linear_segment_queries(plan, s.starts[i], s.slots[i],
                                 query_group(p, b, hk, s.groups[thread]), offset, seg.last,
                                 s.ws[thread]);
        });
      }
    });
  }

  // The states of every (batch, kv head) first, then query blocks from the finished states:
  // the second phase keeps every thread busy even with a single kv head (MQA, B = 1), and
  // each output element is still computed by one thread in a fixed order.
  static void run_full(const Problem& p, const LinearPlan& plan, const LinearScratch& s) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    const std::int64_t block = plan.blocking.query_block;
    const std::int64_t blocks = (p.seq_q() + block - 1) / block;  // per query head
    const std::int64_t items = p.batch() * p.heads_q() * blocks;
    RunOnTeam(s.team, [&](const auto& team) {
      LinearWorkspace& ws = s.ws[team.thread()];
      team.for_dynamic(tasks, [&](std::int64_t t) {
        const std::int64_t b = t / p.heads_kv(), hk = t % p.heads_kv();
        HeadState& state = s.states[t];
        state.reset(plan);
        linear_absorb_all(plan, state, visible_rows(p.k, p, b, hk), visible_rows(p.v, p, b, hk),
                          ws);
      });
      team.for_dynamic(items, [&](std::int64_t item) {
        const std::int64_t b = item / (p.heads_q() * blocks);
        const std::int64_t h = item / blocks % p.heads_q();
        const std::int64_t row0 = item % blocks * block;
        const HeadState& state = s.states[b * p.heads_kv() + h / p.group()];
        linear_emit_rows(plan, state, head_rows(p.q, b, h), head_rows(p.out, b, h), row0,
                         std::min(block, p.seq_q() - row0), ws);
      });
    });
  }
};

}  // namespace

const AttentionVariant& linear_variant() {
  static const LinearVariant instance;
  return instance;
}

}  // namespace seqattn::detail
