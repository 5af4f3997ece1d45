// Linear attention's definition: elu1/relu take φ of the raw q and k unless a scale is given
// (Katharopoulos et al. 2020), FAVOR+ keeps softmax's 1/√D; every variant refuses a scale that
// is not finite and > 0; a NaN a query can see makes its row NaN and leaves the other rows as
// they were. On every compiled target.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "linear_test_cases.hpp"
#include "seqattn/linear_state.hpp"
#include "target_loop.hpp"
#include "tests/support/variant_test_rows.hpp"

namespace seqattn::testing {
namespace {

using F = FeatureMap;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

OwnedTensor run(const LinearCase& c, const LinearInputs& in, std::optional<float> scale) {
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v);
  AttentionOptions opt;
  opt.variant = in.spec;
  opt.mask = in.mask;
  opt.scale = scale;
  attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
  return out;
}

LinearCase small_case(F map, bool causal) {
  LinearCase c;
  c.map = map;
  c.causal = causal;
  c.seq_q = c.seq_k = 80;
  c.dim = c.dim_v = 17;
  return c;
}

TEST(LinearDefinition, DefaultScaleIsTheFeatureMapsOwn) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    for (bool causal : {false, true}) {
      const LinearCase c = small_case(map, causal);
      const LinearInputs in = make_linear_inputs(c, 3);
      // The reference without a scale: elu1/relu unscaled, FAVOR+ 1/√D.
      const reference::Result unset = linear_reference(c, in);
      const reference::Result given = linear_reference(c, in, 0.3);
      for_each_target([&] {
        EXPECT_LE(reference::max_relative_error(run(c, in, std::nullopt).view, unset), 1e-5)
            << describe(c);
        EXPECT_LE(reference::max_relative_error(run(c, in, 0.3f).view, given), 1e-5) << describe(c);
      });
      // The default is exactly the explicit scale it stands for.
      const float same = map == F::kFavor ? 1.0f / std::sqrt(17.0f) : 1.0f;
      const OwnedTensor a = run(c, in, std::nullopt), b = run(c, in, same);
      EXPECT_EQ(a.storage, b.storage) << describe(c);
      if (map != F::kFavor) {
        const OwnedTensor scaled = run(c, in, 1.0f / std::sqrt(17.0f));
        EXPECT_NE(a.storage, scaled.storage) << "elu1/relu must not scale by default";
      }
    }
  }
}

// elu+1's exponential over its whole negative range: inputs of ±100 reach e^-100, far below
// float's normal range, where the features are clamped (see ExpNonPositive).
TEST(LinearDefinition, EluAcrossTheExponentialsRange) {
  for (bool causal : {false, true}) {
    for (float magnitude : {3.0f, 100.0f}) {
      LinearCase c = small_case(F::kElu1, causal);
      c.magnitude = magnitude;
      const LinearInputs in = make_linear_inputs(c, 12);
      const reference::Result ref = linear_reference(c, in);
      for_each_target([&] {
        EXPECT_LE(reference::max_relative_error(run(c, in, std::nullopt).view, ref), 1e-5)
            << describe(c) << " magnitude " << magnitude;
      });
    }
  }
}

// A scale that is not finite and > 0, for every case of every row of the variant table,
// through attend(), a plan and the recurrent state: an Error naming `scale`, and out untouched.
TEST(LinearDefinition, EveryVariantRefusesABadScale) {
  const LinearCase c = small_case(F::kElu1, false);
  const LinearInputs in = make_linear_inputs(c, 4);
  for (const VariantTestCase& row_case : every_variant_case()) {
    SCOPED_TRACE(row_case.name);
    const VariantSpec spec = as_variant_spec(row_case.spec);
    for (float bad : {-1.0f, -0.0f, 0.0f, kNaN, std::numeric_limits<float>::infinity()}) {
      OwnedTensor out = make_zeros(1, 1, 80, 17);
      std::fill(out.storage.begin(), out.storage.end(), 7.0f);
      AttentionOptions opt;
      opt.variant = spec;
      opt.scale = bad;
      try {
        attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
        ADD_FAILURE() << "scale " << bad << " accepted by " << to_string(variant_of(spec));
      } catch (const Error& e) {
        EXPECT_EQ(e.argument(), "scale") << e.what();
        EXPECT_NE(std::string(e.what()).find("> 0"), std::string::npos) << e.what();
      }
      EXPECT_TRUE(
          std::all_of(out.storage.begin(), out.storage.end(), [](float x) { return x == 7.0f; }));
      EXPECT_THROW(make_plan({1, 1, 1, 80, 80, 17, 17}, opt), Error);
    }
  }
  EXPECT_THROW(LinearAttentionState(LinearSpec{}, {1, 1, 1, 17, 17}, -2.0f), Error);
  EXPECT_THROW(LinearAttentionState(LinearSpec{}, {1, 1, 1, 17, 17}, 0.0f), Error);
}

// Which rows see a NaN put in row `poisoned` of q, k or v: a NaN query only its own row; a NaN
// key or value every row that sees it (all, or i >= j when causal).
bool expect_nan_row(char operand, std::int64_t poisoned, std::int64_t row, bool causal) {
  if (operand == 'q') return row == poisoned;
  return !causal || row >= poisoned;
}

void expect_nan_rows(const LinearCase& c, char operand, std::int64_t poisoned) {
  LinearInputs in = make_linear_inputs(c, 9);
  OwnedTensor& t = operand == 'q' ? in.q : operand == 'k' ? in.k : in.v;
  t.view.data[poisoned * t.view.strides[2] + 2 * t.view.strides[3]] = kNaN;
  for_each_target([&] {
    const OwnedTensor out = run(c, in, std::nullopt);
    for (std::int64_t i = 0; i < c.seq_q; ++i) {
      const bool row_sees_it = expect_nan_row(operand, poisoned, i, c.causal);
      for (std::int64_t d = 0; d < c.dim_v; ++d) {
        // A NaN value reaches its own column of the output; a NaN query or key every column
        // (through the denominator).
        const bool want_nan = row_sees_it && (operand != 'v' || d == 2);
        const float x = out.view.at(0, 0, i, d);
        ASSERT_EQ(std::isnan(x), want_nan)
            << describe(c) << " NaN in " << operand << " row " << poisoned << ", out row " << i
            << " col " << d << " = " << x;
      }
    }
  });
}

// Every map (relu(NaN) is NaN, not 0), causal or not; a NaN value behind the causal mask must
// not reach the rows before it through a masked score (0 · NaN is NaN).
TEST(LinearDefinition, NaNPropagatesToTheRowsThatSeeIt) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    for (bool causal : {false, true}) {
      const LinearCase c = small_case(map, causal);
      for (char operand : {'q', 'k', 'v'}) {
        for (std::int64_t poisoned : {std::int64_t{0}, std::int64_t{37}, std::int64_t{79}}) {
          expect_nan_rows(c, operand, poisoned);
        }
      }
    }
  }
}

// ±Inf in a key or value (every map, every target, causal): no undefined behaviour (the
// sanitizer build runs this), and the rows before it, which cannot see it, keep their values.
TEST(LinearDefinition, InfinitiesReachOnlyTheRowsThatSeeThem) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    const LinearCase c = small_case(map, true);
    const LinearInputs clean = make_linear_inputs(c, 13);
    for (char operand : {'k', 'v'}) {
      for (float inf :
           {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()}) {
        LinearInputs in = make_linear_inputs(c, 13);
        OwnedTensor& t = operand == 'k' ? in.k : in.v;
        t.view.data[50 * t.view.strides[2] + 3 * t.view.strides[3]] = inf;
        for_each_target([&] {
          const OwnedTensor want = run(c, clean, std::nullopt), got = run(c, in, std::nullopt);
          for (std::int64_t i = 0; i < 50; ++i) {
            for (std::int64_t d = 0; d < c.dim_v; ++d) {
              const float x = got.view.at(0, 0, i, d), y = want.view.at(0, 0, i, d);
              ASSERT_TRUE(std::isfinite(x) && std::abs(x - y) <= 1e-5f * (1 + std::abs(y)))
                  << describe(c) << " " << inf << " in " << operand << ": row " << i << " = " << x
                  << ", without it " << y;
            }
          }
        });
      }
    }
  }
}

}  // namespace
}  // namespace seqattn::testing
