// MultiHeadAttention with every case of every row of the variant table (each against the layer
// reference whose attention step is that variant's oracle), auto, and every argument error
// the layer raises.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mha_layer_reference.hpp"
#include "mha_test_support.hpp"
#include "seqattn/error.hpp"
#include "seqattn/mha.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/variant_test_rows.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;
constexpr std::int64_t kBatch = 2, kSeq = 33, kModel = 64, kHeads = 4, kKvHeads = 2;
constexpr std::int64_t kHeadDim = kModel / kHeads;

// One layer run per case every row of the variant table declares, with the case's causal
// mask and key lengths; then auto, whose policy here picks a row the oracle then checks.
void check_layer(const MhaConfig& config, const Mask& mask, const VariantSpec& oracle,
                 const LayerWeights& w, const std::vector<float>& x) {
  MultiHeadAttention layer = make_layer(config, w);
  std::vector<float> out(x.size(), 3.0f);
  const MhaRecord record =
      layer.forward(sequence(x, kBatch, kSeq, kModel), sequence(out, kBatch, kSeq, kModel), mask);
  EXPECT_EQ(record.attention.variant, variant_of(oracle));
  const LayerShape shape{kBatch, kSeq, kSeq, kModel, kHeads, kKvHeads, true};
  const LayerResult expected = layer_reference(shape, w, x, x, mask, oracle);
  EXPECT_LE(reference::max_relative_error(out, expected.out), kTolerance);
}

MhaConfig config_of(std::int64_t d_model, std::int64_t heads, std::int64_t kv_heads = 0) {
  MhaConfig c;
  c.d_model = d_model;
  c.num_heads = heads;
  c.num_kv_heads = kv_heads;
  return c;
}

MhaConfig variant_config(const VariantSpec& spec) {
  MhaConfig config = config_of(kModel, kHeads, kKvHeads);
  config.bias = true;
  config.variant = spec;
  return config;
}

TEST(MhaVariants, EveryVariantMatchesItsLayerReference) {
  const LayerWeights w = random_weights(kModel, kKvHeads * kHeadDim, true, 101);
  const std::vector<float> x = uniform(static_cast<std::size_t>(kBatch * kSeq * kModel), 13, 1.0f);
  for (const VariantTestCase& c : every_variant_case()) {
    SCOPED_TRACE(c.name);
    const VariantSpec spec = as_variant_spec(c.spec);
    Mask mask = c.mask(kBatch, kSeq);
    mask.key_lengths = {kSeq, 20};  // padding in every case
    check_layer(variant_config(spec), mask, spec, w, x);
  }
}

TEST(MhaVariants, AutoRunsThePolicysChoice) {
  const LayerWeights w = random_weights(kModel, kKvHeads * kHeadDim, true, 101);
  const std::vector<float> x = uniform(static_cast<std::size_t>(kBatch * kSeq * kModel), 13, 1.0f);
  // The policy's last rule picks linear (relu) for S_k = 33 > 16.
  LinearSpec relu;
  relu.feature_map = FeatureMap::kRelu;
  AutoSpec automatic;
  automatic.policy.rules = {{8, DenseSpec{}}, {16, SlidingWindowSpec{}}, {std::nullopt, relu}};
  Mask mask;
  mask.key_lengths = {kSeq, 20};
  check_layer(variant_config(automatic), mask, relu, w, x);
}

// A variant that cannot honour an option fails before anything is written.
TEST(MhaVariants, UnsupportedOptionLeavesOutUntouched) {
  MhaConfig config;
  config.d_model = kModel;
  config.num_heads = kHeads;
  config.variant = LinearSpec{};
  MultiHeadAttention layer = make_layer(config, random_weights(kModel, kModel, false, 3));
  const std::vector<float> x = uniform(static_cast<std::size_t>(kSeq * kModel), 1, 1.0f);
  std::vector<float> out(x.size(), 3.0f);
  std::vector<float> weights(static_cast<std::size_t>(kHeads * kSeq * kSeq));
  try {
    layer.forward(sequence(x, 1, kSeq, kModel), sequence(out, 1, kSeq, kModel), {},
                  bhsd(weights.data(), 1, kHeads, kSeq, kSeq));
    ADD_FAILURE() << "linear attention accepted an attention-weights output";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
  }
  for (float v : out) ASSERT_EQ(v, 3.0f);
}

// Expects Error(kind) naming `argument`.
template <class F>
void expect_error(F&& call, const std::string& argument,
                  ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one naming " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

TEST(MhaErrors, BadConfiguration) {
  expect_error([] { MultiHeadAttention l(config_of(0, 1)); }, "config.d_model");
  expect_error([] { MultiHeadAttention l(config_of(64, 0)); }, "config.num_heads");
  expect_error([] { MultiHeadAttention l(config_of(100, 8)); }, "config.d_model");
  expect_error([] { MultiHeadAttention l(config_of(64, 8, 3)); }, "config.num_kv_heads");
  expect_error([] { MultiHeadAttention l(config_of(64, 8, -1)); }, "config.num_kv_heads");
  expect_error(
      [] {
        MhaConfig c = config_of(64, 8);
        c.threads = -2;
        MultiHeadAttention l(c);
      },
      "config.threads");
  try {
    MultiHeadAttention l(config_of(100, 8));
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a multiple of num_heads = 8"), std::string::npos)
        << e.what();
    EXPECT_EQ(e.actual(), "100");
  }
}

TEST(MhaErrors, BadWeightsAndBiases) {
  MultiHeadAttention layer(config_of(64, 8, 2));  // W_K, W_V are [64, 16]
  std::vector<float> w(64 * 64, 0.1f);
  expect_error([&] { layer.set_weights(Projection::kKey, w.data(), 64, 64); }, "W_K.cols");
  expect_error([&] { layer.set_weights(Projection::kQuery, w.data(), 32, 64); }, "W_Q.rows");
  expect_error(
      [&] { layer.set_weights(Projection::kValue, static_cast<const float*>(nullptr), 64, 16); },
      "W_V.data");
  expect_error([&] { layer.set_weights(Projection::kValue, w.data(), 64, 16, 8); },
               "W_V.row_stride");
  expect_error([&] { layer.set_weights_pytorch(Projection::kKey, w.data(), 64, 64); },
               "W_K.out_features");
  expect_error([&] { layer.set_weights_pytorch(Projection::kOutput, w.data(), 64, 32); },
               "W_O.in_features");
  expect_error([&] { layer.set_bias(Projection::kQuery, w.data(), 64); }, "b_Q",
               ErrorKind::kUnsupported);
  MhaConfig biased = config_of(64, 8, 2);
  biased.bias = true;
  MultiHeadAttention with_bias(biased);
  expect_error([&] { with_bias.set_bias(Projection::kValue, w.data(), 64); }, "b_V.size");
  expect_error(
      [&] { with_bias.set_bias(Projection::kOutput, static_cast<const float*>(nullptr), 64); },
      "b_O.data");
  try {
    layer.set_weights(Projection::kKey, w.data(), 64, 64);
  } catch (const Error& e) {
    EXPECT_EQ(e.actual(), "64");
    EXPECT_NE(e.expected().find("16"), std::string::npos) << e.what();
  }
}

TEST(MhaErrors, ForwardChecksViewsAndReadiness) {
  const LayerWeights w = random_weights(32, 32, false, 1);
  std::vector<float> x(2 * 5 * 32, 0.5f), out(2 * 5 * 32, 3.0f), kv(2 * 7 * 32, 0.5f);
  MultiHeadAttention unset(config_of(32, 4));
  unset.set_weights(Projection::kQuery, w.wq.data(), 32, 32);
  expect_error([&] { unset.forward(sequence(x, 2, 5, 32), sequence(out, 2, 5, 32)); }, "W_K");
  MhaConfig biased = config_of(32, 4);
  biased.bias = true;
  MultiHeadAttention no_bias_values(biased);
  for (Projection p :
       {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
    no_bias_values.set_weights(p, w.wq.data(), 32, 32);
  }
  expect_error([&] { no_bias_values.forward(sequence(x, 2, 5, 32), sequence(out, 2, 5, 32)); },
               "b_Q");

  MultiHeadAttention layer = make_layer(config_of(32, 4), w);
  expect_error([&] { layer.forward(sequence(x, 2, 5, 16), sequence(out, 2, 5, 32)); },
               "x.features");
  expect_error(
      [&] {
        layer.forward(SequenceView<const float>{nullptr, 2, 5, 32, 0}, sequence(out, 2, 5, 32));
      },
      "x.data");
  expect_error(
      [&] {
        layer.forward(SequenceView<const float>{x.data(), 2, 5, 32, 16}, sequence(out, 2, 5, 32));
      },
      "x.row_stride");
  expect_error([&] { layer.forward(sequence(x, 2, 5, 32), sequence(out, 2, 4, 32)); }, "out.seq");
  expect_error([&] { layer.forward(sequence(x, 2, 5, 32), sequence(out, 1, 5, 32)); }, "out.batch");
  expect_error(
      [&] {
        layer.forward(sequence(x, 2, 5, 32), sequence(kv, 1, 7, 32), sequence(out, 2, 5, 32));
      },
      "x_kv.batch");
  Mask bad;
  bad.key_lengths = {5};  // one per batch expected
  expect_error([&] { layer.forward(sequence(x, 2, 5, 32), sequence(out, 2, 5, 32), bad); },
               "mask.key_lengths.size()");
  for (float v : out) ASSERT_EQ(v, 3.0f);
}

}  // namespace
}  // namespace seqattn::testing
