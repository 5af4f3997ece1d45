// Hierarchical attention (H-Transformer-1D; HierarchicalSpec in seqattn/options.hpp) on the
// flash kernel: level 0 is a block-aligned range per row; the coarser levels are calls over
// coarse tokens whose keys carry one extra column, ln(count)/scale, against a query column of
// 1, so the kernel's scaled score gains ln(count) and a coarse key counts for the tokens it
// stands for. The levels join through the exact log-sum-exp merge, which is one shared
// normaliser (and one maximum) per row. Work goes (batch, kv head) by (batch, kv head), and
// within a pair window by window: level 0 over the window's rows, their coarsening, and the
// coarse attention whose keys are then complete, so each step reads what the one before left
// in cache (see docs/architecture.md, "Order of work: windows").
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "src/kernel/flash_attention.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/kernel/softmax_attention_cost.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/path_counts.hpp"
#include "src/runtime/scratch_floats.hpp"
#include "src/runtime/validate.hpp"
#include "src/runtime/workspace.hpp"
#include "variants/hierarchical/hierarchy.hpp"
#include "variants/hierarchical/pair_run.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

constexpr std::int64_t kMaxBlock = std::int64_t{1} << 20;
constexpr std::int64_t kMaxLevels = 40;

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  refuse_option("hierarchical", option, why, "dense or sliding-window");
}

std::int64_t resolved_levels(const HierarchicalSpec& s, std::int64_t seq) {
  const std::int64_t needed = levels_needed(seq, s.block);
  return s.levels == 0 ? needed : std::min(s.levels, needed);
}

// The structure is O(S) integers per level: a length too large for memory is an Error, not
// std::bad_alloc.
Hierarchy make_hierarchy(const Problem& p, const HierarchicalSpec& s) {
  try {
    return build_hierarchy(p.seq_k(), s.block, resolved_levels(s, p.seq_k()), p.mask.causal);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  fail_allocation("hierarchical attention's block structure (S = " + str(p.seq_k()) + ")",
                  16.0 * static_cast<double>(p.seq_k()) *
                      static_cast<double>(resolved_levels(s, p.seq_k()) + 2));
}
// With at least as many (batch, kv head) pairs as threads, each thread runs whole pairs on its
// own scratch: splitting every call of a pair across the threads instead opened a thread team
// per kernel call and per merge, and at S <= 2048 two threads were slower than one (the
// scaling report of 499f4da). With fewer pairs than threads, each call is split. Either way a
// pair's result is the same bits (the kernel's and the passes' results do not depend on the
// thread count). The problem a pair's calls see: p, or p on one thread.
int pair_team(const Problem& p) {
  const std::int64_t pairs = p.batch() * p.heads_kv();
  return p.threads <= 1 || pairs < p.threads ? 1 : p.threads;
}
Problem calls_problem(const Problem& p) {
  Problem calls = p;
  if (pair_team(p) > 1) calls.threads = 1;
  return calls;
}

// The largest workspace any kernel call of a pair needs (calls: calls_problem): every level-0
// window and every coarse run, counted at full key lengths on the calls' compute path. A plan
// counts it once per target and path (its structures keep the kernel's tables).
std::size_t calls_flash_bytes(const Problem& calls, const Hierarchy& h) {
  ScratchArena shape;  // counts only: the scratch's extents, no data
  const PairScratch s(calls, h, 0, shape);
  std::size_t most = 0;
  for (const Level0Window& w : h.windows) {
    most = std::max(most, softmax_workspace_bytes(
                              level0_call(calls, h, w, 0, 0, s, nullptr, w.keys), w.pattern));
  }
  auto runs = [&](const std::vector<CoarseRun>& list) {
    for (const CoarseRun& run : list) {
      if (run.keys > 0) {
        most = std::max(most, softmax_workspace_bytes(coarse_call(calls, run, s), run.pattern));
      }
    }
  };
  for (const auto& list : h.schedule.segments) runs(list);
  for (const auto& list : h.causal_windows) runs(list);
  for (const auto& list : h.causal_above) runs(list);
  return most;
}

// What run_hierarchy takes for p: calls_flash_bytes of its calls, or 0 when level 0 covers
// every pair (one kernel call over p, whose workspace is p's own).
std::size_t run_flash_bytes(const Problem& p, const Hierarchy& h) {
  return h.levels == 0 ? 0 : calls_flash_bytes(calls_problem(p), h);
}

// A run's scratch, carved in this order for the count and the run: the level-0 lse of every
// row, then one PairScratch per pair thread (each with its calls' kernel workspace).
struct HierarchyScratch {
  float* lse0 = nullptr;
  PairScratch* pairs = nullptr;
};
HierarchyScratch carve_scratch(const Problem& p, const Hierarchy& h, std::size_t flash_bytes,
                               ScratchArena& arena) {
  HierarchyScratch s;
  s.lse0 = arena.take<float>(
      checked_product({p.batch(), p.heads_q(), h.seq}, "B x H_q x S (level-0 lse)"));
  s.pairs = carve_objects<PairScratch>(arena, pair_team(p), calls_problem(p), h, flash_bytes);
  return s;
}

void run_pairs(const Problem& p, const Hierarchy& h, const HierarchyScratch& s) {
  const std::int64_t pairs = p.batch() * p.heads_kv();
  const Problem calls = calls_problem(p);
  RunOnTeam(pair_team(p), [&](const auto& team) {
    team.for_dynamic(pairs, [&](std::int64_t pair) {
      run_pair(calls, h, pair / p.heads_kv(), pair % p.heads_kv(), s.pairs[team.thread()], s.lse0);
    });
  });
}

// flash_bytes: run_flash_bytes(p, h) (on p's target and compute path; a plan counts it once per
// pair of them).
void run_hierarchy(const Problem& p, const Hierarchy& h, std::size_t flash_bytes) {
  if (h.levels == 0) {  // level 0 covers every pair: exact attention (in p's workspace)
    flash_forward(p, h.level0);
    return;
  }
  ScratchArena count;
  carve_scratch(p, h, flash_bytes, count);
  // Without a caller's workspace: one block, huge pages from 2 MiB (scratch_floats), 64 bytes
  // more so that the carving starts on a line (the kernel's workspace must).
  ScratchFloats owned;
  std::span<std::byte> range = p.workspace;
  if (!range.empty()) {
    check_workspace(range, count.used(),
                    "AttentionPlan::qkv_workspace_bytes() (hierarchical attention: the level-0 "
                    "lse, each pair thread's coarse tokens and kernel workspace)");
  } else {
    const std::size_t floats = count.used() / 4 + 16;
    owned = scratch_floats(static_cast<std::int64_t>(floats), "hierarchical attention's scratch");
    auto* base = reinterpret_cast<std::byte*>(owned.data());
    const std::size_t skip = (64 - reinterpret_cast<std::uintptr_t>(base) % 64) % 64;
    range = {base + skip, count.used()};
  }
  ScratchArena arena(range.data(), range.size());
  const HierarchyScratch s = carve_scratch(p, h, flash_bytes, arena);
  run_pairs(p, h, s);
  if (!p.lse) return;
  for (std::int64_t b = 0; b < p.batch(); ++b) {
    for (std::int64_t hq = 0; hq < p.heads_q(); ++hq) {
      for (std::int64_t i = 0; i < h.seq; ++i)
        p.lse->at(b, hq, i, 0) = s.lse0[(b * p.heads_q() + hq) * h.seq + i];
    }
  }
}

// What a run in a workspace needs: level 0 alone is one kernel call over the caller's
// problem; otherwise the carved scratch.
std::size_t hierarchy_workspace_bytes(const Problem& p, const Hierarchy& h,
                                      std::size_t flash_bytes) {
  if (h.levels == 0) return softmax_workspace_bytes(p, h.level0);
  ScratchArena count;
  carve_scratch(p, h, flash_bytes, count);
  return count.used();
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
    if (p.mask.keep) unsupported("mask.keep", "coarse keys stand for groups of keys");
    if (p.mask.bias) unsupported("mask.bias", "coarse keys stand for groups of keys");
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
        hierarchy_pairs(p.seq_k(), s.block, resolved_levels(s, p.seq_k()), p.mask.causal) *
        static_cast<double>(p.batch() * p.heads_q());
    return softmax_attention_cost(p, pairs);
  }

  void run(const Problem& p, const VariantSpec& spec) const override {
    const Hierarchy h = make_hierarchy(p, std::get<HierarchicalSpec>(spec));
    run_hierarchy(p, h, run_flash_bytes(p, h));
  }

  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(p, make_hierarchy(p, std::get<HierarchicalSpec>(spec)));
  }

 private:
  // The plan keeps the structure and its calls' workspace size, counted for the SIMD target
  // and compute path of the plan (the count builds each call's kernel tables, which the
  // structures keep), and on first need for another (a test forcing a target, bf16 products
  // forced onto the tile path): a call short of its workspace would throw inside the pairs'
  // thread team.
  class Prepared final : public PreparedVariant {
   public:
    Prepared(const Problem& planned, Hierarchy h) : h_(std::move(h)) { flash_bytes(planned); }
    void run(const Problem& p) const override { run_hierarchy(p, h_, flash_bytes(p)); }
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      return hierarchy_workspace_bytes(planned, h_, flash_bytes(planned));
    }

   private:
    std::size_t flash_bytes(const Problem& p) const {
      return flash_counts_.get(p.compute_path, [&] { return run_flash_bytes(p, h_); });
    }

    Hierarchy h_;
    PathCounts<std::size_t> flash_counts_;
  };
};

}  // namespace

const AttentionVariant& hierarchical_variant() {
  static const HierarchicalVariant instance;
  return instance;
}

}  // namespace seqattn::detail
