// Sliding window past the packing budget: at D = 64 a (batch, kv-head) pair with S_k > 4096
// no longer fits the packed-tile budget, and the driver packs the band in segments through a
// ring of key tiles (flash_run_paths_body.inc). These shapes reach that path; the shorter
// per-target cases in tests/dense/ do not.
#include <gtest/gtest.h>

#include <cmath>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;

void expect_matches_reference(const SlidingWindowSpec& spec, bool causal, int threads) {
  const std::int64_t s = 4500, d = 64;
  auto q = make_tensor(1, 2, s, d, Layout::kBSHD, 31);
  auto k = make_tensor(1, 1, s, d, Layout::kBSHD, 32);
  auto v = make_tensor(1, 1, s, d, Layout::kBSHD, 33);
  auto out = make_zeros(1, 2, s, d);
  AttentionOptions options;
  options.variant = spec;
  options.mask.causal = causal;
  options.threads = threads;
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  const auto ref = reference::sliding_window(q.cview(), k.cview(), v.cview(), spec, options.mask,
                                             1.0 / std::sqrt(double(d)));
  EXPECT_LE(reference::max_relative_error(out.view, ref), 1e-5);
}

TEST(SlidingWindowLongOracle, SegmentedBandMatchesReference) {
  expect_matches_reference({100, 50, {}}, false, 2);
}

TEST(SlidingWindowLongOracle, SegmentedCausalBandMatchesReference) {
  expect_matches_reference({300, 0, {}}, true, 1);
}

TEST(SlidingWindowLongOracle, SegmentedBandWithGlobalTokensMatchesReference) {
  // Global query rows take the final full-packing pass; global keys take fixed ring slots.
  expect_matches_reference({64, 64, {0, 2047, 2048, 4499}}, false, 2);
}

TEST(SlidingWindowLong, SegmentedBandIsBitwiseIdenticalAcrossThreadCounts) {
  const std::int64_t s = 4500, d = 64;
  auto q = make_tensor(1, 2, s, d, Layout::kBHSD, 41);
  auto k = make_tensor(1, 2, s, d, Layout::kBHSD, 42);
  auto v = make_tensor(1, 2, s, d, Layout::kBHSD, 43);
  auto out = make_zeros(1, 2, s, d);
  AttentionOptions options;
  options.variant = SlidingWindowSpec{128, 128, {5}};
  options.threads = 1;
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  const std::vector<float> one = out.storage;
  for (int t : {2, 3}) {
    options.threads = t;
    attend(q.cview(), k.cview(), v.cview(), out.view, options);
    ASSERT_EQ(out.storage, one) << t << " threads";
  }
}

}  // namespace
}  // namespace seqattn
