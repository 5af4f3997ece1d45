// MultiHeadAttention over a bf16 model: bf16 weights, biases and activations are widened
// exactly, so the layer gives, bit for bit, the fp32 layer's result on the widened values
// rounded once; cross attention likewise; bad views are Errors that write nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "mha_test_support.hpp"
#include "seqattn/seqattn.hpp"

namespace seqattn::testing {
namespace {

std::vector<bfloat16> to_bf16(const std::vector<float>& x) {
  std::vector<bfloat16> h;
  for (const float v : x) h.push_back(bfloat16(v));
  return h;
}
std::vector<float> to_f32(const std::vector<bfloat16>& h) {
  return std::vector<float>(h.begin(), h.end());
}

struct Bf16Weights {
  std::vector<bfloat16> wq, wk, wv, wo, bq, bk, bv, bo;
  explicit Bf16Weights(const LayerWeights& w)
      : wq(to_bf16(w.wq)),
        wk(to_bf16(w.wk)),
        wv(to_bf16(w.wv)),
        wo(to_bf16(w.wo)),
        bq(to_bf16(w.bq)),
        bk(to_bf16(w.bk)),
        bv(to_bf16(w.bv)),
        bo(to_bf16(w.bo)) {}
  LayerWeights widened(std::int64_t d, std::int64_t kv) const {
    return {d,          kv,         to_f32(wq), to_f32(wk), to_f32(wv),
            to_f32(wo), to_f32(bq), to_f32(bk), to_f32(bv), to_f32(bo)};
  }
};

MultiHeadAttention bf16_layer(const MhaConfig& config, const Bf16Weights& w) {
  MultiHeadAttention layer(config);
  const std::int64_t d = config.d_model, kv = layer.out_features(Projection::kKey);
  layer.set_weights(Projection::kQuery, w.wq.data(), d, d);
  layer.set_weights(Projection::kKey, w.wk.data(), d, kv);
  layer.set_weights(Projection::kValue, w.wv.data(), d, kv);
  layer.set_weights(Projection::kOutput, w.wo.data(), d, d);
  layer.set_bias(Projection::kQuery, w.bq.data(), d);
  layer.set_bias(Projection::kKey, w.bk.data(), kv);
  layer.set_bias(Projection::kValue, w.bv.data(), kv);
  layer.set_bias(Projection::kOutput, w.bo.data(), d);
  return layer;
}

TEST(MhaBf16, EqualsTheFp32LayerOnWidenedValuesRoundedOnce) {
  MhaConfig config;
  config.d_model = 48;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.bias = true;
  const LayerWeights w32 = random_weights(48, 24, true, 5);
  const Bf16Weights w(w32);
  MultiHeadAttention half = bf16_layer(config, w);
  MultiHeadAttention full = make_layer(config, w.widened(48, 24));
  const std::vector<bfloat16> x = to_bf16(uniform(2 * 13 * 48, 9, 1.0f));
  const std::vector<bfloat16> x_kv = to_bf16(uniform(2 * 7 * 48, 10, 1.0f));
  const std::vector<float> x32 = to_f32(x), kv32 = to_f32(x_kv);
  Mask mask;
  mask.causal = true;

  std::vector<bfloat16> out(x.size());
  const MhaRecord r = half.forward(SequenceView<const bfloat16>{x.data(), 2, 13, 48, 0},
                                   SequenceView<bfloat16>{out.data(), 2, 13, 48, 0}, mask);
  std::vector<float> want(x.size());
  full.forward(sequence(x32, 2, 13, 48), sequence(want, 2, 13, 48), mask);
  EXPECT_EQ(to_f32(out), to_f32(to_bf16(want)));
  EXPECT_EQ(r.projection_path, "fp32");

  std::vector<bfloat16> cross(x.size());
  half.forward(SequenceView<const bfloat16>{x.data(), 2, 13, 48, 0},
               SequenceView<const bfloat16>{x_kv.data(), 2, 7, 48, 0},
               SequenceView<bfloat16>{cross.data(), 2, 13, 48, 0});
  std::vector<float> want_cross(x.size());
  full.forward(sequence(x32, 2, 13, 48), sequence(kv32, 2, 7, 48), sequence(want_cross, 2, 13, 48));
  EXPECT_EQ(to_f32(cross), to_f32(to_bf16(want_cross)));
}

TEST(MhaBf16, BadViewsAreErrorsThatWriteNothing) {
  MhaConfig config;
  config.d_model = 16;
  config.num_heads = 2;
  config.bias = true;
  const Bf16Weights w(random_weights(16, 16, true, 3));
  MultiHeadAttention layer = bf16_layer(config, w);
  const std::vector<bfloat16> x = to_bf16(uniform(5 * 16, 4, 1.0f));
  std::vector<bfloat16> out(5 * 16, bfloat16(7.0f));
  const std::vector<bfloat16> before = out;
  try {
    layer.forward(SequenceView<const bfloat16>{x.data(), 1, 5, 16, 0},
                  SequenceView<bfloat16>{out.data(), 1, 4, 16, 0});
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "out.seq");
  }
  try {
    layer.forward(SequenceView<const bfloat16>{x.data(), 1, 5, 15, 0},
                  SequenceView<bfloat16>{out.data(), 1, 5, 16, 0});
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "x.features");
  }
  EXPECT_EQ(to_f32(out), to_f32(before));
  try {
    layer.set_weights(Projection::kQuery, w.wq.data(), 16, 15);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "W_Q.cols");
  }
}

}  // namespace
}  // namespace seqattn::testing
