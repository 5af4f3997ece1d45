// The jobs the concurrency and nested-OpenMP tests run, and the documented thread rule.
#pragma once

#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "reliability_support.hpp"

namespace seqattn::reliability {

// Whether a parallel region started here runs on this thread alone: inside an active region
// when nesting is off (omp_get_max_active_levels() reached).
inline bool serialised_here() { return omp_get_active_level() >= omp_get_max_active_levels(); }

// The team size RunRecord::threads reports, by the rule of docs/architecture.md ("Threads")
// and src/runtime/threads.hpp, evaluated in the calling thread: 0 means omp_get_max_threads(),
// and a count above min(4 × omp_get_num_procs(), OMP_THREAD_LIMIT) is clamped to it; 1 where
// a region would be serialised.
inline int documented_threads(int requested) {
  if (serialised_here()) return 1;
  const int wanted = requested == 0 ? omp_get_max_threads() : requested;
  const int cap =
      std::min(std::max(1, omp_get_thread_limit()), 4 * std::max(1, omp_get_num_procs()));
  return std::clamp(wanted, 1, cap);
}

// The team a `#pragma omp parallel num_threads(n)` started here gets (1 inside an active
// region when nested parallelism is off, which is the default).
inline int team_of_a_region_started_here(int n) {
  int team = 0;
#pragma omp parallel num_threads(n)
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  return team;
}

// The jobs every row of the variant table declares (its test_cases.json "jobs"), big enough
// that every kernel starts a thread team (linear needs 1 MFLOP, Linformer's projection too),
// shared read-only by every thread of a test.
struct Job {
  std::string name;
  AttentionOptions options;
  Buffer<float> q, k, v;
  Extents out_shape;
  std::unique_ptr<AttentionPlan> plan;  // planned with threads = 0 in the test's main thread
  int plan_documented = 0;              // documented_threads(0) where the plan was made
  std::vector<std::uint32_t> expected;  // out bits of a single-threaded attend()
};

struct JobShape {
  std::int64_t batch, heads_q, heads_kv, seq, dim;
};
inline constexpr JobShape kUsualJob{2, 4, 2, 300, 32};
// One (batch, kv head) pair, fewer than the threads: a variant may split each of its calls
// and passes across the team instead of giving each thread whole pairs (hierarchical does,
// over three of its windows).
inline constexpr JobShape kOnePairJob{1, 2, 1, 2100, 64};

inline std::vector<Job> make_jobs() {
  std::vector<Job> jobs;
  for (const testing::VariantTestRow& row : testing::variant_test_rows()) {
    for (const testing::VariantJob& declared : row.jobs) {
      const JobShape& s = declared.shape == testing::JobShape::kOnePair ? kOnePairJob : kUsualJob;
      Job j;
      j.name = declared.name;
      j.options.variant = as_variant_spec(declared.spec);
      j.options.mask.causal = declared.causal;
      if (declared.rope) j.options.rope = RotaryEmbedding{};
      const std::uint32_t seed = 600 + 10 * static_cast<std::uint32_t>(jobs.size());
      j.q = random_tensor({s.batch, s.heads_q, s.seq, s.dim}, seed);
      j.k = random_tensor({s.batch, s.heads_kv, s.seq, s.dim}, seed + 1);
      j.v = random_tensor({s.batch, s.heads_kv, s.seq, s.dim}, seed + 2);
      j.out_shape = {s.batch, s.heads_q, s.seq, s.dim};
      j.plan = std::make_unique<AttentionPlan>(
          make_plan({s.batch, s.heads_q, s.heads_kv, s.seq, s.seq, s.dim, s.dim}, j.options));
      j.plan_documented = documented_threads(0);
      jobs.push_back(std::move(j));
    }
  }
  return jobs;
}

// What one run gave: its out bits and RunRecord::threads, the count the documented rule gives
// (evaluated where the count is resolved: at the call for attend(), where the plan was made
// for a plan), and the team a region of RunRecord::threads threads gets at the call site.
struct Observed {
  std::vector<std::uint32_t> out;
  int threads = 0;
  int documented = 0;
  int team_here = 0;
};

inline Observed run_job(const Job& j, bool through_plan, int threads) {
  Buffer<float> out = make_buffer<float>(j.out_shape, strides_for(j.out_shape, 1), 0, 0.0f);
  AttentionOptions options = j.options;
  options.threads = threads;
  Observed o;
  RunRecord record;
  if (through_plan) {
    record = j.plan->run(j.q.cview(), j.k.cview(), j.v.cview(), out.view);
  } else {
    record = attend(j.q.cview(), j.k.cview(), j.v.cview(), out.view, options);
  }
  o.out = bits_of(out.view);
  o.threads = record.threads;
  // A plan resolves its count where it is made; the run reports 1 where regions serialise.
  o.documented =
      through_plan ? (serialised_here() ? 1 : j.plan_documented) : documented_threads(threads);
  o.team_here = team_of_a_region_started_here(o.threads);
  return o;
}

// Fills every job's expected bits from a single-threaded call.
inline void compute_expected(std::vector<Job>& jobs) {
  for (Job& j : jobs) j.expected = run_job(j, false, 1).out;
}

}  // namespace seqattn::reliability
