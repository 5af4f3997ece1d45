// Half-precision q, k, v and out through attend() and plans. The kernels compute in fp32 over
// exactly widened inputs, so (1) every variant run on bf16/f16 inputs equals, bit for bit, the
// fp32 run on the widened values, and a half out is that result rounded to nearest even; and
// (2) against the double reference computed from the same rounded inputs, dense and sliding
// window stay within the bounds (bf16 1e-2, f16 2e-3) on every compiled target, odd
// shapes, GQA, strided views and masks. Bad dtypes are Errors that write nothing.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "half_support.hpp"
#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/variant_test_rows.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::for_each_target;
using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedHalf;
using testing::OwnedTensor;
using testing::rounded;
using testing::widened;

struct Shape {
  std::int64_t b, hq, hkv, sq, sk, d, dv;
};

struct Fp32Inputs {
  OwnedTensor q, k, v;
};

Fp32Inputs make_inputs(const Shape& s, Layout layout, std::int64_t pad, std::uint32_t seed) {
  return {make_tensor(s.b, s.hq, s.sq, s.d, layout, seed, pad, -2.0f, 2.0f),
          make_tensor(s.b, s.hkv, s.sk, s.d, layout, seed + 1, pad, -2.0f, 2.0f),
          make_tensor(s.b, s.hkv, s.sk, s.dv, layout, seed + 2, pad)};
}

// (1): half inputs give the fp32 result on the widened values, bit for bit; a half out is
// that result rounded.
template <class T>
void check_equals_widened_fp32(const testing::VariantTestCase& c) {
  const Shape s{2, 4, 2, 37, 37, 24, 40};
  const Fp32Inputs in = make_inputs(s, Layout::kBSHD, 3, 5);
  const OwnedHalf<T> q = rounded<T>(in.q), k = rounded<T>(in.k), v = rounded<T>(in.v);
  const OwnedTensor q32 = widened(q), k32 = widened(k), v32 = widened(v);
  const AttentionOptions options = c.options(s.b, s.sk);
  OwnedTensor want = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 1);
  attend(q32.cview(), k32.cview(), v32.cview(), want.view, options);

  OwnedTensor got = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 1);
  attend(q.cview(), k.cview(), v.cview(), got.view, options);
  EXPECT_EQ(std::memcmp(got.storage.data(), want.storage.data(), 4 * got.storage.size()), 0);

  // Mixed: fp32 queries, half keys and values.
  OwnedTensor mixed = make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBHSD, 1);
  attend(q32.cview(), k.cview(), v.cview(), mixed.view, options);
  EXPECT_EQ(std::memcmp(mixed.storage.data(), want.storage.data(), 4 * got.storage.size()), 0);

  // A half out (strided) is the fp32 result rounded to nearest even.
  OwnedHalf<T> out = rounded<T>(make_zeros(s.b, s.hq, s.sq, s.dv, Layout::kBSHD, 2));
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  for (std::int64_t b = 0; b < s.b; ++b)
    for (std::int64_t h = 0; h < s.hq; ++h)
      for (std::int64_t i = 0; i < s.sq; ++i)
        for (std::int64_t d = 0; d < s.dv; ++d)
          ASSERT_EQ(out.view.at(b, h, i, d).bits, T(want.view.at(b, h, i, d)).bits);
}

TEST(HalfAttention, EveryVariantEqualsTheFp32RunOnWidenedInputs) {
  for (const testing::VariantTestCase& c : testing::every_variant_case()) {
    SCOPED_TRACE(c.name);
    check_equals_widened_fp32<bfloat16>(c);
    check_equals_widened_fp32<float16>(c);
  }
}

// (2): accuracy against the double reference over the rounded inputs.
std::map<std::string, double> worst;

template <class TQ, class TKV, class TOut>
double half_error(const Shape& s, const VariantSpec& spec, const Mask& mask, Layout layout) {
  Fp32Inputs in = make_inputs(s, layout, layout == Layout::kBSHD ? 5 : 0, 17);
  testing::round_in_place<TQ>(in.q);
  testing::round_in_place<TKV>(in.k);
  testing::round_in_place<TKV>(in.v);
  const auto q = rounded<TQ>(in.q);
  const auto k = rounded<TKV>(in.k), v = rounded<TKV>(in.v);
  auto out = rounded<TOut>(make_zeros(s.b, s.hq, s.sq, s.dv, layout, 1));
  AttentionOptions options;
  options.variant = spec;
  options.mask = mask;
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  const auto* window = std::get_if<SlidingWindowSpec>(&spec);
  const reference::Result ref =
      window != nullptr ? reference::sliding_window(in.q.cview(), in.k.cview(), in.v.cview(),
                                                    *window, mask, scale)
                        : reference::dense(in.q.cview(), in.k.cview(), in.v.cview(), mask, scale);
  const OwnedTensor out32 = widened(out);
  return reference::max_relative_error(out32.view, ref);
}

template <class TQ, class TKV, class TOut>
void check_accuracy(const char* name, double bound) {
  SCOPED_TRACE(name);
  const Shape shapes[] = {{1, 1, 1, 1, 1, 32, 32},
                          {1, 2, 1, 3, 3, 17, 9},
                          {2, 4, 2, 17, 80, 80, 80},
                          {1, 3, 3, 80, 17, 64, 48},
                          {1, 8, 2, 1, 300, 128, 128}};
  for (const Shape& s : shapes) {
    for (const bool causal : {false, true}) {
      Mask mask;
      mask.causal = causal;
      if (s.b == 2) mask.key_lengths = {s.sk, s.sk / 2};
      const std::vector<std::int64_t> globals =
          std::max(s.sq, s.sk) > 1 ? std::vector<std::int64_t>{1} : std::vector<std::int64_t>{};
      for (const VariantSpec& spec :
           {VariantSpec{DenseSpec{}}, VariantSpec{SlidingWindowSpec{5, 3, globals}}}) {
        for (const Layout layout : {Layout::kBHSD, Layout::kBSHD}) {
          const double err = half_error<TQ, TKV, TOut>(s, spec, mask, layout);
          worst[name] = std::max(worst[name], err);
          EXPECT_LE(err, bound) << "S_q " << s.sq << " S_k " << s.sk << " D " << s.d;
        }
      }
    }
  }
}

TEST(HalfAttentionOracle, WithinTheBoundsOfTheRoundedInputsOnEveryTarget) {
  for_each_target([] {
    check_accuracy<bfloat16, bfloat16, bfloat16>("all bf16", 1e-2);
    check_accuracy<float16, float16, float16>("all f16", 2e-3);
    check_accuracy<float, bfloat16, float>("f32 q/out, bf16 k/v", 1e-5);
    check_accuracy<float, float16, float>("f32 q/out, f16 k/v", 1e-5);
    check_accuracy<bfloat16, bfloat16, float>("bf16 q/k/v, f32 out", 1e-5);
  });
  for (const auto& [name, err] : worst) std::printf("worst error, %s: %.3g\n", name.c_str(), err);
}

TEST(HalfAttention, BadDtypesAndOverlapsAreErrorsThatWriteNothing) {
  const Shape s{1, 2, 2, 8, 8, 16, 16};
  const Fp32Inputs in = make_inputs(s, Layout::kBHSD, 0, 3);
  const auto q = rounded<bfloat16>(in.q), k = rounded<bfloat16>(in.k), v = rounded<bfloat16>(in.v);
  auto out = rounded<float16>(make_zeros(s.b, s.hq, s.sq, s.dv));
  for (auto& x : out.storage) x = float16(7.0f);
  auto expect_error = [&](const AnyConstTensor& qa, const AnyConstTensor& ka,
                          const AnyConstTensor& va, const AnyTensor& oa, const char* argument) {
    try {
      attend(qa, ka, va, oa);
      ADD_FAILURE() << "no error for " << argument;
    } catch (const Error& e) {
      EXPECT_EQ(e.argument(), argument) << e.what();
    }
    for (const float16 x : out.storage) ASSERT_EQ(x.bits, float16(7.0f).bits);
  };
  AnyConstTensor bad = k.cview();
  bad.dtype = static_cast<DType>(9);
  expect_error(q.cview(), bad, v.cview(), out.view, "k.dtype");
  AnyTensor bad_out = out.view;
  bad_out.dtype = static_cast<DType>(9);
  expect_error(q.cview(), k.cview(), v.cview(), bad_out, "out.dtype");
  // A half out over the memory of a half input.
  AnyTensor aliased = out.view;
  aliased.data = const_cast<bfloat16*>(v.storage.data());
  aliased.dtype = DType::kF16;
  try {
    attend(q.cview(), k.cview(), v.cview(), aliased);
    ADD_FAILURE() << "no error for an out over v";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "out") << e.what();
  }
  EXPECT_EQ(
      std::memcmp(v.storage.data(), rounded<bfloat16>(in.v).storage.data(), 2 * v.storage.size()),
      0);
  // A plan for one shape refuses another, whatever the dtype.
  const AttentionPlan plan = make_plan({1, 2, 2, 8, 8, 16, 16}, {});
  const auto short_k = rounded<bfloat16>(make_tensor(1, 2, 7, 16, Layout::kBHSD, 1));
  try {
    plan.run(q.cview(), short_k.cview(), v.cview(), out.view);
    ADD_FAILURE() << "no error for k's shape";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "k.shape") << e.what();
  }
  for (const float16 x : out.storage) ASSERT_EQ(x.bits, float16(7.0f).bits);
}

}  // namespace
}  // namespace seqattn
