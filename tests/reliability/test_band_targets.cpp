// The segmented sliding-window band (FlashRun::RunBanded in
// src/kernel/flash_run_paths_body.inc) on every compiled Highway target, not only the
// best one (tests/test_sliding_window_long.cpp runs it on the dispatched target only).
//
// What triggers it: FlashRun takes the banded path when the pattern is a band and one
// (batch, kv head) pair's packed K/V exceeds kPackedBudgetFloats = 2^19 floats; a pair packs
// key_tiles·key_tile·(D + dv_pad) >= S_k·(D + D_v) floats, so S_k = 1100, D = D_v = 256 packs
// more than 2^19 on every target (key tiles: 64 AVX-512, 16 AVX2, 8 SSE4/SSSE3/SCALAR).
// Segments are clamp(2^18 / ((D + dv_pad)·query_tile), 1, query_tiles) query tiles = 5 tiles
// of 96 rows (8 of 64 on SCALAR), so 1100 queries run as 3 segments through the key ring.
//
// Each compiled target is one test instance: the library's dispatch is restricted to it
// (hwy::SetSupportedTargetsForTest, as tests/variants/target_loop.hpp does); a target the CPU
// lacks is skipped by name. The reference of each case is computed once and shared.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>

#include <map>
#include <string>
#include <vector>

#include "reliability_support.hpp"
#include "tests/support/sanitizers.hpp"

namespace seqattn::reliability {
namespace {

// Under AddressSanitizer one target instance takes about 110 s (the O(S^2 D) reference and the
// kernel at sanitizer speed), six of them most of the flavour's budget; the segmented path's
// memory accesses are the same C++ on every target and are checked under ASan on the
// dispatched one by tests/test_sliding_window_long.cpp. So the per-target numerics run in the
// release flavour (its xsimd twin skips them: that flash kernel is xsimd's).
using seqattn::testing::kAddressSanitizer;

constexpr std::int64_t kSk = 1100, kDim = 256;
constexpr std::int64_t kPackedBudgetFloats = std::int64_t{1} << 19;  // flash_driver_body.inc
static_assert(kSk * (kDim + kDim) > kPackedBudgetFloats, "the band must exceed the budget");

struct BandCase {
  std::string name;
  std::int64_t batch, heads_q, heads_kv, seq_q;
  SlidingWindowSpec window;
  bool causal;
  std::vector<std::int64_t> key_lengths;
};

std::vector<BandCase> band_cases() {
  return {
      {"GQA, two batches, key lengths", 2, 2, 1, kSk, {100, 50, {}}, false, {kSk, 900}},
      {"causal band (right = 0)", 1, 1, 1, kSk, {300, 0, {}}, true, {}},
      {"global tokens (rows take the full-packing pass, columns fixed ring slots)",
       1,
       2,
       2,
       kSk,
       {64, 64, {0, 511, 512, kSk - 1}},
       false,
       {}},
      {"cross attention S_q = 500 < S_k", 1, 1, 1, 500, {80, 80, {3}}, false, {}},
  };
}

struct BandProblem {
  Buffer<float> q, k, v;
  reference::Result ref;
  Mask mask;
};

// Inputs and reference of case n, built on first use (the reference is O(S^2 D) per head).
const BandProblem& problem(std::size_t n) {
  static std::map<std::size_t, BandProblem> cache;
  auto it = cache.find(n);
  if (it != cache.end()) return it->second;
  const BandCase c = band_cases()[n];
  BandProblem p{random_tensor({c.batch, c.heads_q, c.seq_q, kDim}, 300 + 3 * n),
                random_tensor({c.batch, c.heads_kv, kSk, kDim}, 301 + 3 * n),
                random_tensor({c.batch, c.heads_kv, kSk, kDim}, 302 + 3 * n),
                {},
                {}};
  p.mask.causal = c.causal;
  p.mask.key_lengths = c.key_lengths;
  p.ref = reference_for(c.window, p.q.cview(), p.k.cview(), p.v.cview(), p.mask);
  return cache.emplace(n, std::move(p)).first->second;
}

// The targets compiled into the library: this file is compiled with the library's target
// list (HWY_WANT_AVX3_DL=1, see CMakeLists.txt), so HWY_TARGETS is the same mask.
std::vector<std::int64_t> compiled_targets() {
  std::vector<std::int64_t> targets;
  for (std::int64_t bits = HWY_TARGETS; bits != 0; bits &= bits - 1) {
    targets.push_back(bits & -bits);
  }
  return targets;
}

class SegmentedBand : public ::testing::TestWithParam<std::int64_t> {
 protected:
  void SetUp() override {
    hwy::SetSupportedTargetsForTest(0);
    const std::int64_t target = GetParam();
    const std::string name = hwy::TargetName(target);
    if ((hwy::SupportedTargets() & target) == 0) {
      GTEST_SKIP() << "this CPU lacks Highway target " << name;
    }
    hwy::SetSupportedTargetsForTest(target);
    const std::string reported = simd_target();
    if (reported.rfind("xsimd:", 0) == 0) {
      GTEST_SKIP() << "the flash kernel is xsimd's in this build (" << reported
                   << "); Highway target " << name << " does not reach it";
    }
    ASSERT_EQ(reported, "highway:" + name);
  }
  void TearDown() override { hwy::SetSupportedTargetsForTest(0); }
};

TEST_P(SegmentedBand, MatchesTheReferenceAndIsIdenticalForOneAndTwoThreads) {
  if (kAddressSanitizer) {
    GTEST_SKIP() << "per-target band numerics run in the release flavour (see kAddressSanitizer)";
  }
  const std::vector<BandCase> cases = band_cases();
  for (std::size_t n = 0; n < cases.size(); ++n) {
    const BandCase& c = cases[n];
    SCOPED_TRACE(c.name);
    const BandProblem& p = problem(n);
    std::vector<std::vector<std::uint32_t>> runs;
    for (const int threads : {1, 2}) {
      const Extents os{c.batch, c.heads_q, c.seq_q, kDim}, ls{c.batch, c.heads_q, c.seq_q, 1};
      Buffer<float> out = make_buffer<float>(os, strides_for(os, 1), 0, kOutSentinel);
      Buffer<float> lse = make_buffer<float>(ls, strides_for(ls, 1), 0, kOutSentinel);
      AttentionOptions options;
      options.variant = c.window;
      options.mask = p.mask;
      options.threads = threads;
      options.lse = lse.view;
      const RunRecord record = attend(p.q.cview(), p.k.cview(), p.v.cview(), out.view, options);
      EXPECT_EQ(record.variant, Variant::kSlidingWindow);
      EXPECT_EQ(record.simd_target, "highway:" + std::string(hwy::TargetName(GetParam())));
      EXPECT_LE(reference::max_relative_error(out.view, p.ref), kTolerance) << threads;
      EXPECT_LE(lse_error(lse.cview(), p.ref), kTolerance) << threads;
      runs.push_back(bits_of(out.view));
    }
    EXPECT_EQ(bit_differences(runs[0], runs[1]), 0) << "1 and 2 threads differ";
  }
}

INSTANTIATE_TEST_SUITE_P(CompiledTargets, SegmentedBand, ::testing::ValuesIn(compiled_targets()),
                         [](const ::testing::TestParamInfo<std::int64_t>& info) {
                           return std::string(hwy::TargetName(info.param));
                         });

}  // namespace
}  // namespace seqattn::reliability
