// Linear attention must refuse what it cannot honour (kUnsupported) and bad specs
// (kInvalidArgument) with messages naming the option, and write nothing to out then.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "linear_test_cases.hpp"

namespace seqattn::testing {
namespace {

struct Fixture {
  LinearCase c;
  LinearInputs in;
  OwnedTensor out;
  AttentionOptions opt;

  Fixture() : in(make_linear_inputs(c, 5)), out(make_zeros(1, 1, 17, 17)) {
    std::fill(out.storage.begin(), out.storage.end(), 42.0f);
    opt.variant = in.spec;
  }
  Error call() {
    try {
      attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
    } catch (const Error& e) {
      EXPECT_TRUE(std::all_of(out.storage.begin(), out.storage.end(), [](float x) {
        return x == 42.0f;
      })) << "out written before the error";
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorKind::kIo, "", "", "");
  }
};

void expect_unsupported(Fixture& f, const std::string& option) {
  const Error e = f.call();
  EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  EXPECT_EQ(e.argument(), option);
  EXPECT_NE(std::string(e.what()).find("variant 'linear' cannot honour option '" + option + "'"),
            std::string::npos)
      << e.what();
}

TEST(LinearOptions, KeepMaskIsUnsupported) {
  Fixture f;
  std::vector<std::uint8_t> keep(17 * 17, 1);
  f.opt.mask.keep = bhsd<const std::uint8_t>(keep.data(), 1, 1, 17, 17);
  expect_unsupported(f, "mask.keep");
}

TEST(LinearOptions, BiasIsUnsupported) {
  Fixture f;
  const OwnedTensor bias = make_zeros(1, 1, 17, 17);
  f.opt.mask.bias = bias.cview();
  expect_unsupported(f, "mask.bias");
}

TEST(LinearOptions, WeightsAndLseAreUnsupported) {
  Fixture f;
  const OwnedTensor weights = make_zeros(1, 1, 17, 17);
  f.opt.weights = weights.view;
  expect_unsupported(f, "weights");
  Fixture g;
  const OwnedTensor lse = make_zeros(1, 1, 17, 1);
  g.opt.lse = lse.view;
  expect_unsupported(g, "lse");
}

void expect_invalid_spec(const LinearSpec& spec, const std::string& argument) {
  Fixture f;
  f.opt.variant = spec;
  const Error e = f.call();
  EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << e.what();
  EXPECT_EQ(e.argument(), argument) << e.what();
}

TEST(LinearOptions, InvalidSpecs) {
  LinearSpec s;
  s.epsilon = -1.0f;
  expect_invalid_spec(s, "spec.epsilon");
  s.epsilon = std::numeric_limits<float>::quiet_NaN();
  expect_invalid_spec(s, "spec.epsilon");
  s = {};
  s.num_features = 5;  // elu1 has D = 17 features
  expect_invalid_spec(s, "spec.num_features");
  s = {};
  s.feature_map = FeatureMap::kFavor;
  s.num_features = -3;
  expect_invalid_spec(s, "spec.num_features");
  const std::vector<float> w(8 * 17, 0.5f);
  s.num_features = 9;
  s.favor_matrix = {w.data(), 8, 17, 17};  // [8, D] but m = 9
  expect_invalid_spec(s, "spec.favor_matrix");
  s.num_features = 8;
  s.favor_matrix = {w.data(), 8, 16, 16};  // wrong D
  expect_invalid_spec(s, "spec.favor_matrix");
  s.favor_matrix = {w.data(), 8, 17, 3};
  expect_invalid_spec(s, "spec.favor_matrix.row_stride");
  s.favor_matrix = {nullptr, 8, 17, 17};
  expect_invalid_spec(s, "spec.favor_matrix.data");
  s = {};
  s.favor_matrix = {w.data(), 17, 17, 17};  // elu1 uses no matrix
  expect_invalid_spec(s, "spec.favor_matrix");
}

TEST(LinearOptions, EpsilonZeroAndKeyLengthZeroGiveZeros) {
  for (FeatureMap map : {FeatureMap::kElu1, FeatureMap::kRelu, FeatureMap::kFavor}) {
    Fixture f;
    LinearSpec s;
    s.feature_map = map;
    s.epsilon = 0.0f;
    f.opt.variant = s;
    f.opt.mask.key_lengths = {0};
    attend(f.in.q.cview(), f.in.k.cview(), f.in.v.cview(), f.out.view, f.opt);
    EXPECT_TRUE(std::all_of(f.out.storage.begin(), f.out.storage.end(), [](float x) {
      return x == 0.0f;
    })) << to_string(map);
  }
}

}  // namespace
}  // namespace seqattn::testing
