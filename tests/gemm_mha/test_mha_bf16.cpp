// MultiHeadAttention over a bf16 model. On the fp32 path bf16 weights, biases and activations
// are widened exactly, so the layer gives, bit for bit, the fp32 layer's result on the widened
// values rounded once. On a tile path (forced to the AMX emulation here, which every CPU runs)
// the layer is a bf16 module: checked against a float64 model of one, and bit for bit against
// the fp32 layer with fp32_precision = bf16. Bad views are Errors that write nothing.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "mha_test_support.hpp"
#include "seqattn/seqattn.hpp"
#include "tests/support/scoped_compute_path.hpp"

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

// The bf16 layer against the fp32 layer on the widened values, self- and cross-attention, on
// the fp32 projection path; with sinusoidal positions both add them to their fp32 rows (the
// bf16 layer in place, to its widened copy).
void ExpectTheFp32LayerOnWidenedValuesRoundedOnce(bool sinusoidal_positions) {
  MhaConfig config;
  config.d_model = 48;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  config.bias = true;
  config.sinusoidal_positions = sinusoidal_positions;
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

TEST(MhaBf16, EqualsTheFp32LayerOnWidenedValuesRoundedOnce) {
  ExpectTheFp32LayerOnWidenedValuesRoundedOnce(false);
}

TEST(MhaBf16, SinusoidalPositionsEqualTheFp32LayerOnWidenedValues) {
  ExpectTheFp32LayerOnWidenedValuesRoundedOnce(true);
}

// ---- The tile path (SEQATTN_COMPUTE_PATH=amx-emulated) ----

std::vector<float> bf16_rounded(const std::vector<double>& x) {
  std::vector<float> r;
  for (const double v : x) r.push_back(static_cast<float>(bfloat16(static_cast<float>(v))));
  return r;
}

// A bf16 module in float64: q, k, v = bf16(x·W + b) from bf16 x and W, attention in float64 on
// them, the concatenated heads rounded to bf16, out = concat·W_O + b_O (not rounded: the test
// compares the fp32 result before the layer's final rounding is applied to both).
std::vector<double> bf16_module_reference(const LayerShape& s, const LayerWeights& w,
                                          const std::vector<float>& x_q,
                                          const std::vector<float>& x_kv, const Mask& mask) {
  const std::int64_t dk = s.d_model / s.heads, rows_q = s.batch * s.seq_q;
  const std::vector<float> q = bf16_rounded(project(x_q, rows_q, s.d_model, w.wq, s.d_model, w.bq));
  const std::int64_t rows_kv = s.batch * s.seq_k;
  const std::vector<float> k =
      bf16_rounded(project(x_kv, rows_kv, s.d_model, w.wk, w.kv_width, w.bk));
  const std::vector<float> v =
      bf16_rounded(project(x_kv, rows_kv, s.d_model, w.wv, w.kv_width, w.bv));
  const reference::Result att = attention_reference(
      DenseSpec{}, bshd(q.data(), s.batch, s.seq_q, s.heads, dk),
      bshd(k.data(), s.batch, s.seq_k, s.kv_heads, dk),
      bshd(v.data(), s.batch, s.seq_k, s.kv_heads, dk), mask, 1.0 / std::sqrt(double(dk)));
  std::vector<double> concat(static_cast<std::size_t>(rows_q * s.d_model));
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t i = 0; i < s.seq_q; ++i)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t d = 0; d < dk; ++d)
          concat[static_cast<std::size_t>((b * s.seq_q + i) * s.d_model + h * dk + d)] =
              att.out_at(b, h, i, d);
  return project(bf16_rounded(concat), rows_q, s.d_model, w.wo, s.d_model, w.bo);
}

// Forces the AMX emulation, or says why this build cannot run it (the xsimd backend has no
// tile products: the xsimd twin, or a -DSEQATTN_SIMD_BACKEND=xsimd build).
bool tile_path_runs(std::string& why) {
  try {
    bf16_compute_path();
    return true;
  } catch (const Error& e) {
    why = e.what();
    return false;
  }
}

struct TileCase {
  MhaConfig config;
  LayerShape shape;
  LayerWeights widened;
  Bf16Weights weights;
  std::vector<bfloat16> x, x_kv;
  TileCase(std::int64_t d, std::int64_t heads, std::int64_t kv_heads, std::int64_t s_q,
           std::int64_t s_k)
      : shape{2, s_q, s_k, d, heads, kv_heads, true},
        widened(),
        weights(random_weights(d, d / heads * kv_heads, true, 21)),
        x(to_bf16(uniform(static_cast<std::size_t>(2 * s_q * d), 22, 1.0f))),
        x_kv(to_bf16(uniform(static_cast<std::size_t>(2 * s_k * d), 23, 1.0f))) {
    config.d_model = d;
    config.num_heads = heads;
    config.num_kv_heads = kv_heads;
    config.bias = true;
    widened = weights.widened(d, d / heads * kv_heads);
  }
};

TEST(MhaBf16, TilePathIsABf16ModuleWithinTheBound) {
  ScopedComputePath forced("amx-emulated");
  std::string why;
  if (!tile_path_runs(why)) GTEST_SKIP() << "the tile path cannot run in this build: " << why;
  TileCase c(80, 5, 1, 19, 19);  // d_k = 16, MQA, rows not a multiple of 32
  MultiHeadAttention layer = bf16_layer(c.config, c.weights);
  Mask mask;
  mask.causal = true;
  std::vector<bfloat16> out(c.x.size());
  const MhaRecord r = layer.forward(SequenceView<const bfloat16>{c.x.data(), 2, 19, 80, 0},
                                    SequenceView<bfloat16>{out.data(), 2, 19, 80, 0}, mask);
  EXPECT_EQ(r.projection_path, "amx-emulated");
  EXPECT_EQ(r.attention.compute_path, "amx-emulated");
  const std::vector<float> x32 = to_f32(c.x);
  const std::vector<double> want = bf16_module_reference(c.shape, c.widened, x32, x32, mask);
  const double err = reference::max_relative_error(to_f32(out), want);
  std::printf("bf16 layer on amx-emulated tiles, self, causal: error %.3g of max|ref|\n", err);
  EXPECT_LE(err, 1e-2);

  // Cross attention, S_k != S_q, GQA.
  TileCase x(64, 4, 2, 7, 40);
  MultiHeadAttention cross_layer = bf16_layer(x.config, x.weights);
  std::vector<bfloat16> cross(x.x.size());
  cross_layer.forward(SequenceView<const bfloat16>{x.x.data(), 2, 7, 64, 0},
                      SequenceView<const bfloat16>{x.x_kv.data(), 2, 40, 64, 0},
                      SequenceView<bfloat16>{cross.data(), 2, 7, 64, 0});
  const std::vector<double> want_cross =
      bf16_module_reference(x.shape, x.widened, to_f32(x.x), to_f32(x.x_kv), Mask{});
  const double err_cross = reference::max_relative_error(to_f32(cross), want_cross);
  std::printf("bf16 layer on amx-emulated tiles, cross, GQA: error %.3g of max|ref|\n", err_cross);
  EXPECT_LE(err_cross, 1e-2);
}

TEST(MhaBf16, TilePathEqualsTheFp32LayerWithBf16PrecisionAndIsThreadCountFree) {
  ScopedComputePath forced("amx-emulated");
  std::string why;
  if (!tile_path_runs(why)) GTEST_SKIP() << "the tile path cannot run in this build: " << why;
  TileCase c(48, 4, 2, 33, 33);
  std::vector<std::vector<float>> results;
  for (const int threads : {1, 2}) {
    c.config.threads = threads;
    MultiHeadAttention half = bf16_layer(c.config, c.weights);
    std::vector<bfloat16> out(c.x.size());
    half.forward(SequenceView<const bfloat16>{c.x.data(), 2, 33, 48, 0},
                 SequenceView<bfloat16>{out.data(), 2, 33, 48, 0});
    results.push_back(to_f32(out));
  }
  EXPECT_EQ(results[0], results[1]) << "1 and 2 threads differ";

  MhaConfig f32 = c.config;
  f32.fp32_precision = Fp32Precision::kBf16;
  MultiHeadAttention full = make_layer(f32, c.widened);
  const std::vector<float> x32 = to_f32(c.x);
  std::vector<float> out32(x32.size());
  const MhaRecord r = full.forward(sequence(x32, 2, 33, 48), sequence(out32, 2, 33, 48));
  EXPECT_EQ(r.projection_path, "amx-emulated");
  EXPECT_EQ(results[1], to_f32(to_bf16(out32)));
}

TEST(MhaBf16, TilePathRepacksWeightsSetAfterARun) {
  ScopedComputePath forced("amx-emulated");
  std::string why;
  if (!tile_path_runs(why)) GTEST_SKIP() << "the tile path cannot run in this build: " << why;
  TileCase c(32, 2, 2, 9, 9);
  MultiHeadAttention layer = bf16_layer(c.config, c.weights);
  const SequenceView<const bfloat16> x{c.x.data(), 2, 9, 32, 0};
  std::vector<bfloat16> first(c.x.size()), second(c.x.size()), fresh(c.x.size());
  layer.forward(x, SequenceView<bfloat16>{first.data(), 2, 9, 32, 0});
  const Bf16Weights other(random_weights(32, 32, true, 77));
  layer.set_weights(Projection::kValue, other.wv.data(), 32, 32);
  layer.set_weights(Projection::kOutput, other.wo.data(), 32, 32);
  layer.forward(x, SequenceView<bfloat16>{second.data(), 2, 9, 32, 0});
  Bf16Weights mixed = c.weights;
  mixed.wv = other.wv;
  mixed.wo = other.wo;
  MultiHeadAttention rebuilt = bf16_layer(c.config, mixed);
  rebuilt.forward(x, SequenceView<bfloat16>{fresh.data(), 2, 9, 32, 0});
  EXPECT_EQ(to_f32(second), to_f32(fresh));
  EXPECT_NE(to_f32(first), to_f32(second));
}

TEST(MhaBf16, AForcedPathThatCannotRunIsAnErrorThatWritesNothing) {
  ScopedComputePath forced("amx-bf16");
  std::string why;
  if (tile_path_runs(why)) GTEST_SKIP() << "this CPU runs amx-bf16: nothing to refuse";
  TileCase c(32, 2, 2, 5, 5);
  MultiHeadAttention layer = bf16_layer(c.config, c.weights);
  std::vector<bfloat16> out(c.x.size(), bfloat16(3.0f));
  try {
    layer.forward(SequenceView<const bfloat16>{c.x.data(), 2, 5, 32, 0},
                  SequenceView<bfloat16>{out.data(), 2, 5, 32, 0});
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "SEQATTN_COMPUTE_PATH");
  }
  for (const bfloat16 v : out) ASSERT_EQ(static_cast<float>(v), 3.0f);
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
