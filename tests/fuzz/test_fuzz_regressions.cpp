// What the fuzzers found, as named tests. Each finding was once a raw input in the fuzz corpus
// (regression-*); the fuzzers' decoding of bytes follows the variant table and changes with it,
// so those inputs stopped reproducing their findings. These tests state each call instead,
// with the fix it checks. The command line's finding (--out=-xnpy) is
// CliTool.OptionEqualsValueNamesTheFileItWrites in tests/cli/test_cli_tool.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/plan_call.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {
namespace {

// fuzz_attend, f7f74a1: a KvCache whose dim_v is near 2^63 overflowed the rounding of D_v up
// to the column alignment. Every extent above 2^40 is refused, naming it, and nothing is built.
TEST(FuzzRegression, KvCacheExtentsNear2To63AreRefused) {
  const std::int64_t huge = std::numeric_limits<std::int64_t>::max();
  for (const auto& [shape, argument] : std::vector<std::pair<KvCacheShape, std::string>>{
           {{1, 1, 24, 1, huge}, "shape.dim_v"},
           {{1, 1, 24, huge, 9}, "shape.dim"},
           {{1, 1, huge, 1, 9}, "shape.capacity"},
           {{1, 1, 24, 1, (std::int64_t{1} << 40) + 1}, "shape.dim_v"}}) {
    try {
      KvCache cache(shape);
      ADD_FAILURE() << argument << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
  }
}

// fuzz_attend, f7f74a1: with weights requested at scale 1e30 the weights were computed as
// exp(s - lse), which fails when s and lse are ~1e30 apart in rounding; each weights row is now
// its own softmax. At such a scale every row is one-hot at its largest score.
TEST(FuzzRegression, WeightsAtScale1e30AreEachRowsSoftmax) {
  const OwnedTensor q = make_tensor(1, 2, 11, 4, Layout::kBHSD, 7);
  const OwnedTensor k = make_tensor(1, 2, 38, 4, Layout::kBHSD, 8);
  const OwnedTensor v = make_tensor(1, 2, 38, 15, Layout::kBHSD, 9);
  OwnedTensor out = make_zeros(1, 2, 11, 15), weights = make_zeros(1, 2, 11, 38);
  AttentionOptions options;
  options.scale = 1e30f;
  options.mask.causal = true;
  options.weights = weights.view;
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  const reference::Result ref =
      reference::dense(q.cview(), k.cview(), v.cview(), options.mask, 1e30);
  EXPECT_LE(reference::max_relative_error(out.view, ref), 1e-5);
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 11; ++i) {
      double sum = 0;
      for (std::int64_t j = 0; j < 38; ++j) {
        const float w = weights.view.at(0, h, i, j);
        ASSERT_TRUE(std::isfinite(w));
        EXPECT_NEAR(w, ref.weight_at(0, h, i, j), 1e-6);
        sum += w;
      }
      EXPECT_NEAR(sum, 1.0, 1e-6);
    }
}

// fuzz_attend, b0e2f05: linear elu1 with epsilon = 1e30 gives rows of ~1e-30, which an f16
// out stores as 0 (below its resolution 2^-24 near zero). The library was right; the fuzz
// oracle now allows an f16 out its own resolution. The call, for the record: a plan run,
// key lengths, a strided f16 out, and every element of out 0.
TEST(FuzzRegression, LinearEpsilon1e30IntoF16OutIsBelowItsResolution) {
  const OwnedTensor q = make_tensor(3, 3, 8, 9, Layout::kBHSD, 11);
  const OwnedTensor k = make_tensor(3, 3, 22, 9, Layout::kBHSD, 12);
  const OwnedTensor v = make_tensor(3, 3, 22, 12, Layout::kBHSD, 13);
  LinearSpec spec;
  spec.epsilon = 1e30f;
  AttentionOptions options;
  options.variant = spec;
  options.mask.key_lengths = {22, 5, 0};
  std::vector<float16> storage(2 * 888 + 2 * 37 + 7 * 111 + 11 * 3 + 1, float16(7.0f));
  const TensorView<float16> out{storage.data(), {3, 3, 8, 12}, {888, 37, 111, 3}};
  const testing::PlanCall call = testing::split_for_plan(options);
  make_plan({3, 3, 3, 8, 22, 9, 12}, call.planned)
      .run(q.cview(), k.cview(), v.cview(), out, call.args);
  const reference::Result ref =
      reference::variant(q.cview(), k.cview(), v.cview(), spec, options.mask, std::nullopt);
  double largest = 0;
  for (const double x : ref.out) largest = std::max(largest, std::abs(x));
  EXPECT_LT(largest, 1e-25);
  for (std::int64_t b = 0; b < 3; ++b)
    for (std::int64_t h = 0; h < 3; ++h)
      for (std::int64_t i = 0; i < 8; ++i)
        for (std::int64_t d = 0; d < 12; ++d) EXPECT_EQ(float(out.at(b, h, i, d)), 0.0f);
}

// fuzz_attend, 0b23d32: a call whose views were all perturbed to D = 21 (the case said 20) was
// valid, and the harness's reference scaled it by 1/sqrt(20). The default scale is 1/sqrt of
// the views' own D.
TEST(FuzzRegression, DefaultScaleIsOfTheViewsHeadDim) {
  const OwnedTensor q = make_tensor(2, 3, 9, 21, Layout::kBSHD, 21, 2);
  const OwnedTensor k = make_tensor(2, 3, 33, 21, Layout::kBSHD, 22, 2);
  const OwnedTensor v = make_tensor(2, 3, 33, 11, Layout::kBSHD, 23);
  OwnedTensor out = make_zeros(2, 3, 9, 11);
  attend(q.cview(), k.cview(), v.cview(), out.view);
  const auto ref = [&](double scale) {
    return reference::dense(q.cview(), k.cview(), v.cview(), {}, scale);
  };
  EXPECT_LE(reference::max_relative_error(out.view, ref(1 / std::sqrt(21.0))), 1e-5);
  EXPECT_GT(reference::max_relative_error(out.view, ref(1 / std::sqrt(20.0))), 1e-4);
}

}  // namespace
}  // namespace seqattn::testing
