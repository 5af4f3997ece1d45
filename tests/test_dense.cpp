// Dense attention through the public attend() against the double reference: shapes, layouts,
// GQA, cross attention, every mask kind, weights, lse and the exact merge of partial results.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <sstream>
#include <tuple>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

constexpr double kTolerance = 1e-5;

struct Shape {
  std::int64_t b, hq, hkv, sq, sk, d, dv;
};

struct Inputs {
  OwnedTensor q, k, v, out;
};

Inputs make_inputs(const Shape& s, Layout layout, std::int64_t pad, std::uint32_t seed) {
  return {make_tensor(s.b, s.hq, s.sq, s.d, layout, seed, pad),
          make_tensor(s.b, s.hkv, s.sk, s.d, layout, seed + 1, pad),
          make_tensor(s.b, s.hkv, s.sk, s.dv, layout, seed + 2, pad),
          make_zeros(s.b, s.hq, s.sq, s.dv, layout, pad)};
}

double run_and_compare(Inputs& in, const AttentionOptions& options) {
  attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view, options);
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(double(in.q.view.dim()));
  const auto ref = reference::dense(in.q.cview(), in.k.cview(), in.v.cview(), options.mask, scale);
  return reference::max_relative_error(in.out.view, ref);
}

// (Built with a stream: GCC 12's -Wrestrict misfires on long chains of std::string +.)
std::string shape_name(const ::testing::TestParamInfo<std::tuple<Shape, Layout, bool>>& info) {
  const Shape& s = std::get<0>(info.param);
  std::ostringstream n;
  n << "B" << s.b << "Hq" << s.hq << "Hkv" << s.hkv << "Sq" << s.sq << "Sk" << s.sk << "D" << s.d
    << "Dv" << s.dv << (std::get<1>(info.param) == Layout::kBHSD ? "_bhsd" : "_bshd")
    << (std::get<2>(info.param) ? "_causal" : "");
  return n.str();
}

class DenseShapes : public ::testing::TestWithParam<std::tuple<Shape, Layout, bool>> {};

TEST_P(DenseShapes, MatchesReference) {
  const auto& [shape, layout, causal] = GetParam();
  for (std::int64_t pad : {0, 5}) {
    Inputs in = make_inputs(shape, layout, pad, 7);
    AttentionOptions options;
    options.mask.causal = causal;
    EXPECT_LE(run_and_compare(in, options), kTolerance) << "pad=" << pad;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DenseShapes,
    ::testing::Combine(::testing::Values(Shape{1, 1, 1, 1, 1, 1, 1}, Shape{1, 1, 1, 3, 3, 3, 3},
                                         Shape{2, 3, 3, 17, 17, 17, 5},
                                         Shape{1, 2, 1, 80, 80, 80, 80},    // MQA
                                         Shape{2, 4, 2, 33, 65, 128, 128},  // GQA, cross
                                         Shape{1, 2, 2, 65, 20, 64, 32},    // S_q > S_k
                                         Shape{1, 1, 1, 130, 130, 1, 3}),
                       ::testing::Values(Layout::kBHSD, Layout::kBSHD), ::testing::Bool()),
    shape_name);

TEST(Dense, KeyLengthsIncludingZero) {
  Inputs in = make_inputs({3, 2, 2, 9, 12, 16, 16}, Layout::kBSHD, 0, 3);
  AttentionOptions options;
  options.mask.key_lengths = {12, 5, 0};
  EXPECT_LE(run_and_compare(in, options), kTolerance);
  // The batch with no key gives exact zeros, never NaN.
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t i = 0; i < 9; ++i)
      for (std::int64_t d = 0; d < 16; ++d) ASSERT_EQ(in.out.view.at(2, h, i, d), 0.0f);
}

TEST(Dense, BooleanMaskBroadcastAndFullyMaskedRow) {
  Inputs in = make_inputs({2, 2, 1, 5, 7, 8, 8}, Layout::kBHSD, 0, 4);
  std::vector<std::uint8_t> keep(5 * 7);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = (i * 7 + 3) % 4 != 0;
  std::fill(keep.begin() + 14, keep.begin() + 21, 0);  // row 2 sees nothing
  AttentionOptions options;
  options.mask.keep = TensorView<const std::uint8_t>{keep.data(), {1, 1, 5, 7}, {0, 0, 7, 1}};
  EXPECT_LE(run_and_compare(in, options), kTolerance);
  for (std::int64_t d = 0; d < 8; ++d) ASSERT_EQ(in.out.view.at(1, 1, 2, d), 0.0f);
}

TEST(Dense, AdditiveBiasWithMinusInfinity) {
  Inputs in = make_inputs({1, 2, 2, 6, 6, 4, 4}, Layout::kBHSD, 0, 5);
  OwnedTensor bias = make_tensor(1, 2, 6, 6, Layout::kBHSD, 6, 0, -2.0f, 2.0f);
  bias.view.at(0, 1, 3, 2) = -INFINITY;
  for (std::int64_t j = 0; j < 6; ++j) bias.view.at(0, 0, 4, j) = -INFINITY;
  AttentionOptions options;
  options.mask.bias = bias.cview();
  options.mask.causal = true;
  EXPECT_LE(run_and_compare(in, options), kTolerance);
  for (std::int64_t d = 0; d < 4; ++d) ASSERT_EQ(in.out.view.at(0, 0, 4, d), 0.0f);
}

TEST(Dense, WeightsRowsSumToOneAndMatchReference) {
  Inputs in = make_inputs({2, 2, 1, 9, 11, 6, 5}, Layout::kBSHD, 0, 8);
  OwnedTensor w = make_zeros(2, 2, 9, 11);
  AttentionOptions options;
  options.mask.causal = true;
  options.weights = w.view;
  attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view, options);
  const auto ref = reference::dense(in.q.cview(), in.k.cview(), in.v.cview(), options.mask,
                                    1.0 / std::sqrt(6.0));
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < 2; ++h)
      for (std::int64_t i = 0; i < 9; ++i) {
        double sum = 0;
        for (std::int64_t j = 0; j < 11; ++j) {
          sum += w.view.at(b, h, i, j);
          ASSERT_NEAR(w.view.at(b, h, i, j), ref.weight_at(b, h, i, j), 1e-6);
        }
        ASSERT_NEAR(sum, 1.0, 1e-5);
      }
}

TEST(Dense, PermutationEquivariance) {
  // The document's point: shuffling the tokens shuffles the outputs the same way.
  const std::int64_t s = 13, d = 8;
  OwnedTensor x = make_tensor(1, 1, s, d, Layout::kBHSD, 11);
  std::vector<std::int64_t> perm(s);
  std::iota(perm.begin(), perm.end(), 0);
  std::reverse(perm.begin(), perm.begin() + 7);
  std::rotate(perm.begin(), perm.begin() + 4, perm.end());
  OwnedTensor xp = make_zeros(1, 1, s, d);
  for (std::int64_t i = 0; i < s; ++i)
    for (std::int64_t c = 0; c < d; ++c) xp.view.at(0, 0, i, c) = x.view.at(0, 0, perm[i], c);
  OwnedTensor out = make_zeros(1, 1, s, d), out_p = make_zeros(1, 1, s, d);
  attend(x.cview(), x.cview(), x.cview(), out.view);
  attend(xp.cview(), xp.cview(), xp.cview(), out_p.view);
  for (std::int64_t i = 0; i < s; ++i)
    for (std::int64_t c = 0; c < d; ++c)
      ASSERT_NEAR(out_p.view.at(0, 0, i, c), out.view.at(0, 0, perm[i], c), 1e-6);
}

TEST(Dense, LseAndExactMergeOfKeyHalves) {
  const Shape s{2, 4, 2, 10, 24, 16, 8};
  Inputs in = make_inputs(s, Layout::kBHSD, 0, 12);
  auto half = [](const ConstTensor& t, std::int64_t from, std::int64_t n) {
    ConstTensor h = t;
    h.data = t.ptr(0, 0, from);
    h.shape[2] = n;
    return h;
  };
  OwnedTensor o1 = make_zeros(2, 4, 10, 8), o2 = make_zeros(2, 4, 10, 8);
  OwnedTensor l1 = make_zeros(2, 4, 10, 1), l2 = make_zeros(2, 4, 10, 1);
  AttentionOptions a, b;
  a.lse = l1.view;
  b.lse = l2.view;
  attend(in.q.cview(), half(in.k.cview(), 0, 9), half(in.v.cview(), 0, 9), o1.view, a);
  attend(in.q.cview(), half(in.k.cview(), 9, 15), half(in.v.cview(), 9, 15), o2.view, b);
  merge_partials(o1.cview(), l1.cview(), o2.cview(), l2.cview(), o1.view, l1.view);
  const auto ref = reference::dense(in.q.cview(), in.k.cview(), in.v.cview(), Mask{}, 0.25);
  EXPECT_LE(reference::max_relative_error(o1.view, ref), kTolerance);
  for (std::int64_t h = 0; h < 4; ++h)
    for (std::int64_t i = 0; i < 10; ++i)
      ASSERT_NEAR(l1.view.at(1, h, i, 0), ref.lse_at(1, h, i), 1e-5);
}

TEST(Dense, RunRecordDescribesTheRun) {
  Inputs in = make_inputs({1, 2, 2, 16, 16, 8, 8}, Layout::kBHSD, 0, 13);
  AttentionOptions options;
  options.threads = 1;
  const auto before = std::chrono::steady_clock::now();
  RunRecord r = attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view, options);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  EXPECT_EQ(r.variant, Variant::kDense);
  EXPECT_EQ(r.flops, 4.0 * 2 * 16 * 16 * 8);
  EXPECT_EQ(r.threads, 1);
  EXPECT_EQ(r.simd_target.rfind("highway:", 0) == 0 || r.simd_target.rfind("xsimd:", 0) == 0, true)
      << r.simd_target;
  // The whole call, measured inside it: positive and within the time measured around it.
  EXPECT_GT(r.seconds, 0.0);
  EXPECT_LE(r.seconds, elapsed);
}

TEST(Dense, BitwiseIdenticalAcrossThreadCounts) {
  Inputs in = make_inputs({2, 4, 2, 67, 67, 32, 32}, Layout::kBSHD, 0, 14);
  AttentionOptions options;
  options.mask.causal = true;
  options.threads = 1;
  attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view, options);
  const std::vector<float> one = in.out.storage;
  for (int t : {2, 3, 4}) {
    options.threads = t;
    attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view, options);
    ASSERT_EQ(in.out.storage, one) << t << " threads";
  }
}

TEST(Dense, NonFiniteInputPropagates) {
  Inputs in = make_inputs({1, 1, 1, 4, 4, 4, 4}, Layout::kBHSD, 0, 15);
  in.v.view.at(0, 0, 2, 1) = NAN;
  attend(in.q.cview(), in.k.cview(), in.v.cview(), in.out.view);
  EXPECT_TRUE(std::isnan(in.out.view.at(0, 0, 0, 1)));
  EXPECT_FALSE(std::isnan(in.out.view.at(0, 0, 0, 0)));
}

}  // namespace
}  // namespace seqattn
