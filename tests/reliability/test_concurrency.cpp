// attend() and shared plans called from many std::threads at once with threads = 0 (the
// default): every result equals the single-threaded result bit for bit (each output row is
// computed by one thread in a fixed order, whatever the team: docs/architecture.md), and
// RunRecord::threads follows the documented rule in each calling thread.
#include <gtest/gtest.h>
#include <omp.h>

#include <latch>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/sanitizers.hpp"
#include "threads_support.hpp"

namespace seqattn::reliability {
namespace {

constexpr int kCallers = 8;
// Rounds of every job per caller. Under the sanitizers one (the three took 50 s of each tsan
// test's 2-core minute, 29 s run alone), with the callers starting in two groups of four on
// the same job, so that one round still runs each job (and one plan) from four threads at
// once; otherwise caller t starts at job t.
constexpr int kRounds = testing::kSanitized ? 1 : 3;
std::size_t first_job(int caller) {
  return static_cast<std::size_t>(testing::kSanitized ? caller % 2 : caller);
}

// Runs every job kRounds times from each of kCallers std::threads started together (each
// starting at first_job: different variants, or the same job from four threads, overlap).
std::vector<std::vector<Observed>> run_concurrently(const std::vector<Job>& jobs,
                                                    bool through_plan) {
  std::vector<std::vector<Observed>> seen(kCallers);
  std::latch start(kCallers);
  std::vector<std::thread> callers;
  for (int t = 0; t < kCallers; ++t) {
    callers.emplace_back([&, t] {
      start.arrive_and_wait();
      for (int round = 0; round < kRounds; ++round) {
        for (std::size_t n = 0; n < jobs.size(); ++n) {
          const Job& j = jobs[(n + first_job(t)) % jobs.size()];
          seen[static_cast<std::size_t>(t)].push_back(run_job(j, through_plan, 0));
        }
      }
    });
  }
  for (std::thread& c : callers) c.join();
  return seen;
}

void expect_all_equal(const std::vector<Job>& jobs,
                      const std::vector<std::vector<Observed>>& seen) {
  for (int t = 0; t < kCallers; ++t) {
    for (std::size_t call = 0; call < seen[static_cast<std::size_t>(t)].size(); ++call) {
      const Job& j = jobs[(call % jobs.size() + first_job(t)) % jobs.size()];
      const Observed& o = seen[static_cast<std::size_t>(t)][call];
      SCOPED_TRACE(j.name + ", caller " + std::to_string(t) + ", call " + std::to_string(call));
      EXPECT_EQ(bit_differences(o.out, j.expected), 0);
      EXPECT_EQ(o.threads, o.documented);
    }
  }
}

TEST(Concurrency, AttendFromEightThreadsEqualsTheSingleThreadedResult) {
  std::vector<Job> jobs = make_jobs();
  compute_expected(jobs);
  // The default team from the main thread first (bitwise equal to one thread, documented).
  for (const Job& j : jobs) {
    SCOPED_TRACE(j.name);
    const Observed o = run_job(j, false, 0);
    EXPECT_EQ(bit_differences(o.out, j.expected), 0);
    EXPECT_EQ(o.threads, documented_threads(0));
    EXPECT_EQ(o.threads, o.team_here);  // outside any region a team of that size forms
  }
  expect_all_equal(jobs, run_concurrently(jobs, false));
}

TEST(Concurrency, OnePlanRunFromEightThreadsEqualsTheSingleThreadedResult) {
  std::vector<Job> jobs = make_jobs();
  compute_expected(jobs);
  expect_all_equal(jobs, run_concurrently(jobs, true));
}

// The rule itself, checked at the values where it changes: 0 → omp_get_max_threads(), a
// positive count as given up to min(4 × processors, OMP_THREAD_LIMIT), clamped above,
// negative refused with an Error naming `threads`. Under the sanitizers one count below the
// cap and one above it: with the seven counts the test took 14.5 s alone under ThreadSanitizer
// (three of them run 8 threads on 2 cores), with these four 8.4 s.
TEST(Concurrency, RecordedThreadsFollowTheDocumentedRule) {
  const std::vector<Job> jobs = make_jobs();
  const int cap = std::min(std::max(1, omp_get_thread_limit()), 4 * omp_get_num_procs());
  const std::vector<int> counts = testing::kSanitized
                                      ? std::vector<int>{0, 1, 3, cap + 1}
                                      : std::vector<int>{0, 1, 2, 3, cap, cap + 1, 100000};
  for (const Job& j : jobs) {
    SCOPED_TRACE(j.name);
    for (const int requested : counts) {
      const Observed o = run_job(j, false, requested);
      EXPECT_EQ(o.threads, documented_threads(requested)) << requested;
      EXPECT_EQ(o.threads,
                requested == 0 ? std::min(omp_get_max_threads(), cap) : std::min(requested, cap))
          << requested;
    }
    expect_error([&] { run_job(j, false, -1); }, "threads");
  }
}

}  // namespace
}  // namespace seqattn::reliability
