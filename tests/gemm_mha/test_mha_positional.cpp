// MultiHeadAttention's positional options: the sinusoidal encoding equals the layer run on
// x + PE (and leaves x untouched); RoPE and ALiBi equal attend() with them on the projected
// heads (identity projections, no output projection).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mha_test_support.hpp"
#include "seqattn/seqattn.hpp"

namespace seqattn::testing {
namespace {

constexpr std::int64_t kBatch = 2, kSeq = 23, kModel = 32, kHeads = 4;

TEST(MhaPositional, SinusoidalEqualsTheLayerOnShiftedInputs) {
  const LayerWeights w = random_weights(kModel, kModel, true, 5);
  MhaConfig config{kModel, kHeads};
  config.bias = true;
  const std::vector<float> x = uniform(kBatch * kSeq * kModel, 9, 1.0f);
  std::vector<float> shifted = x, out(x.size()), want(x.size());
  add_sinusoidal_positions(
      Tensor{shifted.data(), {kBatch, 1, kSeq, kModel}, {kSeq * kModel, kSeq * kModel, kModel, 1}});
  make_layer(config, w).forward(sequence(shifted, kBatch, kSeq, kModel),
                                sequence(want, kBatch, kSeq, kModel));
  config.sinusoidal_positions = true;
  const std::vector<float> before = x;
  make_layer(config, w).forward(sequence(x, kBatch, kSeq, kModel),
                                sequence(out, kBatch, kSeq, kModel));
  EXPECT_EQ(x, before);
  EXPECT_EQ(out, want);  // the same arithmetic on the same shifted inputs
  // Cross attention shifts both inputs.
  std::vector<float> cross(x.size());
  make_layer(config, w).forward(sequence(x, kBatch, kSeq, kModel),
                                sequence(x, kBatch, kSeq, kModel),
                                sequence(cross, kBatch, kSeq, kModel));
  EXPECT_EQ(cross, want);
}

TEST(MhaPositional, RopeAndAlibiReachTheKernel) {
  LayerWeights w = random_weights(kModel, kModel, false, 6);
  for (auto* m : {&w.wq, &w.wk, &w.wv}) {  // identity projections: the heads are x's columns
    std::fill(m->begin(), m->end(), 0.0f);
    for (std::int64_t i = 0; i < kModel; ++i) (*m)[static_cast<std::size_t>(i * kModel + i)] = 1;
  }
  MhaConfig config{kModel, kHeads};
  config.output_projection = false;
  config.rope = RotaryEmbedding{};
  config.rope->layout = RopeLayout::kInterleaved;
  config.alibi = Alibi{};
  const std::vector<float> x = uniform(kBatch * kSeq * kModel, 10, 1.0f);
  std::vector<float> out(x.size()), want(x.size());
  Mask causal;
  causal.causal = true;
  make_layer(config, w).forward(sequence(x, kBatch, kSeq, kModel),
                                sequence(out, kBatch, kSeq, kModel), causal);
  AttentionOptions o;
  o.mask.causal = true;
  o.rope = config.rope;
  o.alibi = config.alibi;
  const std::int64_t d = kModel / kHeads;
  attend(bshd<const float>(x.data(), kBatch, kSeq, kHeads, d),
         bshd<const float>(x.data(), kBatch, kSeq, kHeads, d),
         bshd<const float>(x.data(), kBatch, kSeq, kHeads, d),
         bshd(want.data(), kBatch, kSeq, kHeads, d), o);
  for (std::size_t i = 0; i < out.size(); ++i) ASSERT_NEAR(out[i], want[i], 1e-6) << i;
  std::vector<float> plain(x.size());
  config.rope.reset();
  config.alibi.reset();
  make_layer(config, w).forward(sequence(x, kBatch, kSeq, kModel),
                                sequence(plain, kBatch, kSeq, kModel), causal);
  EXPECT_NE(plain, out);
}

}  // namespace
}  // namespace seqattn::testing
