// attend(), a shared AttentionPlan and a KvCache run called from inside a caller's
// `#pragma omp parallel` region: results equal to a call outside any region, bit for bit.
//
// What the documents say about nested regions: nothing specific. threads = 0 resolves to
// omp_get_max_threads() where the count is resolved (src/runtime/threads.cpp), which inside a
// region is still the outer nthreads-var (e.g. 2), while the kernel's own
// `#pragma omp parallel num_threads(n)` gets a team of 1 there as long as nested parallelism
// is off (max-active-levels = 1, the runtime's default); RunRecord::threads is documented as
// "threads the kernel ran with" / "the team" (attention.hpp, docs/architecture.md).
#include <gtest/gtest.h>
#include <omp.h>

#include <string>
#include <vector>

#include "threads_support.hpp"

namespace seqattn::reliability {
namespace {

constexpr int kOuter = 4;

struct CacheJob {
  KvCache cache{{2, 2, 300, 32, 32}};
  Buffer<float> q = random_tensor({2, 4, 5, 32}, 701);
  std::vector<std::uint32_t> expected;

  CacheJob() {
    const Buffer<float> k = random_tensor({2, 2, 300, 32}, 702),
                        v = random_tensor({2, 2, 300, 32}, 703);
    cache.append(k.cview(), v.cview());
    expected = run(1).out;
  }
  Observed run(int threads) const {
    const Extents shape{2, 4, 5, 32};
    Buffer<float> out = make_buffer<float>(shape, strides_for(shape, 1), 0, 0.0f);
    AttentionOptions options;
    options.mask.causal = true;
    options.threads = threads;
    const RunRecord record = attend(q.cview(), cache, out.view, options);
    Observed o;
    o.out = bits_of(out.view);
    o.threads = record.threads;
    o.documented = documented_threads(threads);
    o.team_here = team_of_a_region_started_here(record.threads);
    return o;
  }
};

// Every job through attend() and its plan, plus the cache run, from each thread of an outer
// region of kOuter threads, with the given requested count.
struct NestedRuns {
  std::vector<std::vector<Observed>> attend, plan, cache;  // [outer thread][job]
  int outer_team = 0;
};

NestedRuns run_nested(const std::vector<Job>& jobs, const CacheJob& cache, int threads) {
  NestedRuns r;
  r.attend.resize(kOuter);
  r.plan.resize(kOuter);
  r.cache.resize(kOuter);
#pragma omp parallel num_threads(kOuter)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
#pragma omp single
    r.outer_team = omp_get_num_threads();
    for (const Job& j : jobs) {
      r.attend[t].push_back(run_job(j, false, threads));
      r.plan[t].push_back(run_job(j, true, threads));
    }
    r.cache[t].push_back(cache.run(threads));
  }
  return r;
}

// Results equal to the single-threaded call outside any region; RunRecord::threads as the
// documented rule gives it at the call site.
void expect_correct(const std::vector<Job>& jobs, const CacheJob& cache, const NestedRuns& r) {
  ASSERT_EQ(r.outer_team, kOuter);
  for (int t = 0; t < kOuter; ++t) {
    const auto tt = static_cast<std::size_t>(t);
    for (std::size_t n = 0; n < jobs.size(); ++n) {
      SCOPED_TRACE(jobs[n].name + ", outer thread " + std::to_string(t));
      EXPECT_EQ(bit_differences(r.attend[tt][n].out, jobs[n].expected), 0) << "attend()";
      EXPECT_EQ(bit_differences(r.plan[tt][n].out, jobs[n].expected), 0) << "plan";
      EXPECT_EQ(r.attend[tt][n].threads, r.attend[tt][n].documented) << "attend()";
      EXPECT_EQ(r.plan[tt][n].threads, r.plan[tt][n].documented) << "plan";
    }
    EXPECT_EQ(bit_differences(r.cache[tt][0].out, cache.expected), 0) << "cache, thread " << t;
  }
}

TEST(NestedOpenMP, CallsInsideAParallelRegionEqualACallOutside) {
  std::vector<Job> jobs = make_jobs();
  compute_expected(jobs);
  const CacheJob cache;
  for (const int threads : {0, 2}) {
    SCOPED_TRACE("threads = " + std::to_string(threads));
    expect_correct(jobs, cache, run_nested(jobs, cache, threads));
  }
}

// With nested parallelism switched on (max-active-levels 2) the kernels' regions really
// start their own teams inside the caller's; results must not change, and the recorded
// count is then the team that ran.
TEST(NestedOpenMP, CallsInsideANestedActiveRegionEqualACallOutside) {
  std::vector<Job> jobs = make_jobs();
  compute_expected(jobs);
  const CacheJob cache;
  const int levels = omp_get_max_active_levels();
  omp_set_max_active_levels(2);
  const NestedRuns r = run_nested(jobs, cache, 0);
  omp_set_max_active_levels(levels);
  expect_correct(jobs, cache, r);
  for (int t = 0; t < kOuter; ++t) {
    for (const Observed& o : r.attend[static_cast<std::size_t>(t)])
      EXPECT_EQ(o.threads, o.team_here);
  }
}

// Inside an active region with nested parallelism off (the default) every kernel region runs
// with a team of 1, and RunRecord::threads must say so. This found a bug: the record used to
// report the resolved count (omp_get_max_threads(), e.g. 2) there, for attend(), plans and the
// cache path alike.
TEST(NestedOpenMP, RecordedThreadsAreTheTeamThatRanInsideARegion) {
  std::vector<Job> jobs = make_jobs();
  const CacheJob cache;
  if (omp_get_max_active_levels() != 1) {
    GTEST_SKIP() << "nested parallelism is on here (max-active-levels "
                 << omp_get_max_active_levels() << "); this test is about the default, 1";
  }
  const NestedRuns r = run_nested(jobs, cache, 0);
  for (int t = 0; t < kOuter; ++t) {
    const auto tt = static_cast<std::size_t>(t);
    for (std::size_t n = 0; n < jobs.size(); ++n) {
      SCOPED_TRACE(jobs[n].name + ", outer thread " + std::to_string(t));
      EXPECT_EQ(r.attend[tt][n].team_here, 1);
      EXPECT_EQ(r.attend[tt][n].threads, r.attend[tt][n].team_here) << "attend()";
      EXPECT_EQ(r.plan[tt][n].threads, r.plan[tt][n].team_here) << "plan";
    }
    EXPECT_EQ(r.cache[tt][0].threads, r.cache[tt][0].team_here) << "cache";
  }
}

}  // namespace
}  // namespace seqattn::reliability
