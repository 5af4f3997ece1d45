// MultiHeadAttention against the double layer reference: the documents' SingleHeadSelfAttention
// and MultiHeadSelfAttention (padding mask as key lengths and as a keep-mask view), GQA/MQA,
// biases, PyTorch-layout weights, cross attention, strided and in-place activations.
#include <gtest/gtest.h>
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "mha_layer_reference.hpp"
#include "mha_test_support.hpp"
#include "seqattn/mha.hpp"
#include "tests/reference/reference.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

// The documents' test input: x = randn(2, 5, 128), mask[:, :, 4] = 0 (token 5 is padding).
constexpr std::int64_t kDocBatch = 2, kDocSeq = 5, kDocModel = 128;

std::vector<float> document_input() {
  return uniform(static_cast<std::size_t>(kDocBatch * kDocSeq * kDocModel), 2026, 1.5f);
}

// mask = ones(2, 5, 5); mask[:, :, 4] = 0, as a [B, 1, S, S] keep view (heads broadcast, as the
// document's mask.unsqueeze(1)).
std::vector<std::uint8_t> document_keep_mask() {
  std::vector<std::uint8_t> keep(static_cast<std::size_t>(kDocBatch * kDocSeq * kDocSeq), 1);
  for (std::int64_t b = 0; b < kDocBatch; ++b)
    for (std::int64_t i = 0; i < kDocSeq; ++i)
      keep[static_cast<std::size_t>((b * kDocSeq + i) * kDocSeq + 4)] = 0;
  return keep;
}

Mask document_mask_as_key_lengths() {
  Mask mask;
  mask.key_lengths = {4, 4};
  return mask;
}

Mask document_mask_as_keep(const std::vector<std::uint8_t>& keep) {
  Mask mask;
  mask.keep = TensorView<const std::uint8_t>{
      keep.data(), {kDocBatch, 1, kDocSeq, kDocSeq}, {kDocSeq * kDocSeq, 0, kDocSeq, 1}};
  return mask;
}

// Runs the layer on contiguous buffers and checks output (and weights, when asked) against
// the reference.
void check_layer(const MhaConfig& config, const LayerShape& shape, const LayerWeights& w,
                 const std::vector<float>& x_q, const std::vector<float>& x_kv, bool cross,
                 const Mask& mask, bool with_weights) {
  MultiHeadAttention layer = make_layer(config, w);
  std::vector<float> out(static_cast<std::size_t>(shape.batch * shape.seq_q * shape.d_model), NAN);
  std::vector<float> weights(
      static_cast<std::size_t>(shape.batch * shape.heads * shape.seq_q * shape.seq_k), NAN);
  std::optional<Tensor> weights_view;
  if (with_weights)
    weights_view = bhsd(weights.data(), shape.batch, shape.heads, shape.seq_q, shape.seq_k);
  const auto xq = sequence(x_q, shape.batch, shape.seq_q, shape.d_model);
  const auto xkv = sequence(x_kv, shape.batch, shape.seq_k, shape.d_model);
  const MhaRecord record =
      cross ? layer.forward(xq, xkv, sequence(out, shape.batch, shape.seq_q, shape.d_model), mask,
                            weights_view)
            : layer.forward(xq, sequence(out, shape.batch, shape.seq_q, shape.d_model), mask,
                            weights_view);
  const LayerResult expected = layer_reference(shape, w, x_q, x_kv, mask, config.variant);
  EXPECT_LE(reference::max_relative_error(out, expected.out), kTolerance);
  if (with_weights) {
    EXPECT_LE(reference::max_relative_error(weights, expected.attention.weights), kTolerance);
  }
  EXPECT_GT(record.projection_seconds, 0.0);
  EXPECT_GE(record.total_seconds, record.projection_seconds + record.attention_seconds);
}

TEST(Mha, DocumentSingleHeadSelfAttention) {
  // SingleHeadSelfAttention(d_model=128, d_k=128): W_V maps to d_model, no output projection.
  MhaConfig config;
  config.d_model = kDocModel;
  config.num_heads = 1;
  config.output_projection = false;
  const LayerShape shape{kDocBatch, kDocSeq, kDocSeq, kDocModel, 1, 1, false};
  const LayerWeights w = random_weights(kDocModel, kDocModel, false, 7);
  const std::vector<float> x = document_input();
  const std::vector<std::uint8_t> keep = document_keep_mask();
  check_layer(config, shape, w, x, x, false, document_mask_as_key_lengths(), true);
  check_layer(config, shape, w, x, x, false, document_mask_as_keep(keep), true);
}

TEST(Mha, DocumentMultiHeadSelfAttention) {
  // MultiHeadSelfAttention(d_model=128, num_heads=8): no bias, output projection fc.
  MhaConfig config;
  config.d_model = kDocModel;
  config.num_heads = 8;
  const LayerShape shape{kDocBatch, kDocSeq, kDocSeq, kDocModel, 8, 8, true};
  const LayerWeights w = random_weights(kDocModel, kDocModel, false, 11);
  const std::vector<float> x = document_input();
  const std::vector<std::uint8_t> keep = document_keep_mask();
  check_layer(config, shape, w, x, x, false, document_mask_as_key_lengths(), true);
  check_layer(config, shape, w, x, x, false, document_mask_as_keep(keep), true);
}

TEST(Mha, PaddedTokenGetsZeroWeight) {
  MhaConfig config;
  config.d_model = kDocModel;
  config.num_heads = 8;
  MultiHeadAttention layer = make_layer(config, random_weights(kDocModel, kDocModel, false, 3));
  const std::vector<float> x = document_input();
  std::vector<float> out(x.size());
  std::vector<float> weights(static_cast<std::size_t>(kDocBatch * 8 * kDocSeq * kDocSeq));
  layer.forward(sequence(x, kDocBatch, kDocSeq, kDocModel),
                sequence(out, kDocBatch, kDocSeq, kDocModel), document_mask_as_key_lengths(),
                bhsd(weights.data(), kDocBatch, 8, kDocSeq, kDocSeq));
  for (std::size_t row = 0; row < weights.size() / kDocSeq; ++row) {
    EXPECT_EQ(weights[row * kDocSeq + 4], 0.0f);
    double sum = 0;
    for (std::int64_t j = 0; j < kDocSeq; ++j)
      sum += weights[row * kDocSeq + static_cast<std::size_t>(j)];
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(Mha, GroupedAndMultiQueryAttention) {
  for (std::int64_t kv_heads : {2, 1}) {
    SCOPED_TRACE(kv_heads);
    MhaConfig config;
    config.d_model = 64;
    config.num_heads = 8;
    config.num_kv_heads = kv_heads;
    const LayerShape shape{2, 19, 19, 64, 8, kv_heads, true};
    const LayerWeights w = random_weights(64, kv_heads * 8, false, 21);
    const std::vector<float> x = uniform(2 * 19 * 64, 5, 1.0f);
    Mask mask;
    mask.key_lengths = {19, 11};
    check_layer(config, shape, w, x, x, false, mask, true);
  }
}

TEST(Mha, BiasOnAndCausal) {
  MhaConfig config;
  config.d_model = 48;
  config.num_heads = 3;
  config.bias = true;
  const LayerShape shape{3, 17, 17, 48, 3, 3, true};
  const LayerWeights w = random_weights(48, 48, true, 31);
  const std::vector<float> x = uniform(3 * 17 * 48, 9, 1.0f);
  Mask mask;
  mask.causal = true;
  check_layer(config, shape, w, x, x, false, mask, false);
}

// d_model 32, 4 query heads over 2 kv heads.
MhaConfig gqa_layer_32() {
  MhaConfig config;
  config.d_model = 32;
  config.num_heads = 4;
  config.num_kv_heads = 2;
  return config;
}

// A layer keeps its attention plan while the shape, causal flag and precision stay and
// re-plans when they change; masks are run arguments. Every forward of one object, in any
// order, equals the same forward of a fresh object, bit for bit.
TEST(Mha, AReusedPlanGivesTheSameLayerAsAFreshOne) {
  const MhaConfig config = gqa_layer_32();
  const LayerWeights w = random_weights(32, 16, false, 43);
  MultiHeadAttention reused = make_layer(config, w);
  const std::vector<float> x = uniform(2 * 9 * 32, 78, 1.0f);
  Mask causal, lengths, both;
  causal.causal = true;
  lengths.key_lengths = {9, 4};
  both.causal = true;
  both.key_lengths = {5, 9};
  struct Step {
    std::int64_t seq;
    Mask mask;
  };
  for (const Step& step : {Step{9, causal}, Step{9, {}}, Step{9, lengths}, Step{9, both},
                           Step{5, {}}, Step{9, causal}}) {
    SCOPED_TRACE("S = " + std::to_string(step.seq) + (step.mask.causal ? ", causal" : "") + ", " +
                 std::to_string(step.mask.key_lengths.size()) + " key lengths");
    Mask mask = step.mask;
    for (std::int64_t& n : mask.key_lengths) n = std::min(n, step.seq);
    std::vector<float> a(static_cast<std::size_t>(2 * step.seq * 32)), b(a.size());
    reused.forward(sequence(x, 2, step.seq, 32), sequence(a, 2, step.seq, 32), mask);
    MultiHeadAttention fresh = make_layer(config, w);
    fresh.forward(sequence(x, 2, step.seq, 32), sequence(b, 2, step.seq, 32), mask);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  }
}

TEST(Mha, PytorchLayoutWeightsGiveTheSameLayer) {
  const MhaConfig config = gqa_layer_32();
  const LayerWeights w = random_weights(32, 16, false, 41);
  const auto transpose = [](const std::vector<float>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<float> t(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c)
        t[static_cast<std::size_t>(c * rows + r)] = m[static_cast<std::size_t>(r * cols + c)];
    return t;
  };
  MultiHeadAttention torch_layer(config);
  torch_layer.set_weights_pytorch(Projection::kQuery, transpose(w.wq, 32, 32).data(), 32, 32);
  torch_layer.set_weights_pytorch(Projection::kKey, transpose(w.wk, 32, 16).data(), 16, 32);
  torch_layer.set_weights_pytorch(Projection::kValue, transpose(w.wv, 32, 16).data(), 16, 32);
  torch_layer.set_weights_pytorch(Projection::kOutput, transpose(w.wo, 32, 32).data(), 32, 32);
  MultiHeadAttention layer = make_layer(config, w);
  const std::vector<float> x = uniform(2 * 9 * 32, 77, 1.0f);
  std::vector<float> a(x.size()), b(x.size());
  torch_layer.forward(sequence(x, 2, 9, 32), sequence(a, 2, 9, 32));
  layer.forward(sequence(x, 2, 9, 32), sequence(b, 2, 9, 32));
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  const LayerResult expected = layer_reference({2, 9, 9, 32, 4, 2, true}, w, x, x, {}, DenseSpec{});
  EXPECT_LE(reference::max_relative_error(a, expected.out), kTolerance);
}

TEST(Mha, CrossAttention) {
  MhaConfig config;
  config.d_model = 32;
  config.num_heads = 4;
  config.bias = true;
  const LayerShape shape{2, 7, 13, 32, 4, 4, true};
  const LayerWeights w = random_weights(32, 32, true, 51);
  const std::vector<float> x_q = uniform(2 * 7 * 32, 1, 1.0f);
  const std::vector<float> x_kv = uniform(2 * 13 * 32, 2, 1.0f);
  Mask mask;
  mask.key_lengths = {13, 6};
  check_layer(config, shape, w, x_q, x_kv, true, mask, true);
}

TEST(Mha, StridedRowsAndInPlace) {
  MhaConfig config;
  config.d_model = 40;
  config.num_heads = 5;
  const LayerWeights w = random_weights(40, 40, false, 61);
  const std::int64_t batch = 2, seq = 11, ld = 47;
  const std::vector<float> x = uniform(static_cast<std::size_t>(batch * seq * 40), 3, 1.0f);
  std::vector<float> padded(static_cast<std::size_t>(batch * seq * ld), 9.0f);
  for (std::int64_t r = 0; r < batch * seq; ++r)
    std::memcpy(&padded[static_cast<std::size_t>(r * ld)], &x[static_cast<std::size_t>(r * 40)],
                40 * sizeof(float));
  MultiHeadAttention layer = make_layer(config, w);
  // Out written over its own input rows: x is fully projected before out is written.
  const SequenceView<float> view{padded.data(), batch, seq, 40, ld};
  layer.forward(SequenceView<const float>(view), view);
  std::vector<float> out(x.size());
  for (std::int64_t r = 0; r < batch * seq; ++r) {
    std::memcpy(&out[static_cast<std::size_t>(r * 40)], &padded[static_cast<std::size_t>(r * ld)],
                40 * sizeof(float));
    for (std::int64_t c = 40; c < ld; ++c)
      ASSERT_EQ(padded[static_cast<std::size_t>(r * ld + c)], 9.0f);
  }
  const LayerResult expected =
      layer_reference({batch, seq, seq, 40, 5, 5, true}, w, x, x, {}, DenseSpec{});
  EXPECT_LE(reference::max_relative_error(out, expected.out), kTolerance);
}

TEST(Mha, BitwiseIdenticalForOneAndTwoThreads) {
  const LayerWeights w = random_weights(64, 64, true, 71);
  const std::vector<float> x = uniform(2 * 150 * 64, 4, 1.0f);
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2}) {
    MhaConfig config;
    config.d_model = 64;
    config.num_heads = 4;
    config.bias = true;
    config.threads = threads;
    MultiHeadAttention layer = make_layer(config, w);
    std::vector<float> out(x.size());
    layer.forward(sequence(x, 2, 150, 64), sequence(out, 2, 150, 64));
    results.push_back(out);
  }
  EXPECT_EQ(std::memcmp(results[0].data(), results[1].data(), results[0].size() * sizeof(float)),
            0);
}

TEST(Mha, RecordSplitsTheTime) {
  MhaConfig config;
  config.d_model = 64;
  config.num_heads = 4;
  MultiHeadAttention layer = make_layer(config, random_weights(64, 64, false, 81));
  const std::vector<float> x = uniform(3 * 20 * 64, 4, 1.0f);
  std::vector<float> out(x.size());
  const MhaRecord r = layer.forward(sequence(x, 3, 20, 64), sequence(out, 3, 20, 64));
  EXPECT_EQ(r.attention.variant, Variant::kDense);
  EXPECT_DOUBLE_EQ(r.projection_flops, 2.0 * 60 * 64 * (3 * 64) + 2.0 * 60 * 64 * 64);
  // Dense: 4·B·H·S_q·S_k·d_k (2·(d_k + d_v) per pair), d_k = 64 / 4 = 16.
  EXPECT_EQ(r.attention.flops, 4.0 * 3 * 4 * 20 * 20 * 16);
  EXPECT_GE(r.attention_seconds, r.attention.seconds);
  EXPECT_GE(r.total_seconds, r.projection_seconds + r.attention_seconds);
}

// fp32_precision = bf16 rounds the projected q, k, v before the attention (within bf16's
// error of the exact layer, but not equal to it); the projections stay fp32 and say so.
TEST(Mha, Fp32PrecisionBf16RoundsTheAttentionOperands) {
  const LayerWeights w = random_weights(64, 64, true, 91);
  const std::vector<float> x = uniform(2 * 33 * 64, 5, 1.0f);
  std::vector<std::vector<float>> results;
  for (const Fp32Precision precision : {Fp32Precision::kIeee, Fp32Precision::kBf16}) {
    MhaConfig config;
    config.d_model = 64;
    config.num_heads = 4;
    config.bias = true;
    config.fp32_precision = precision;
    MultiHeadAttention layer = make_layer(config, w);
    std::vector<float> out(x.size());
    const MhaRecord r = layer.forward(sequence(x, 2, 33, 64), sequence(out, 2, 33, 64));
    EXPECT_EQ(r.projection_path, "fp32");
    EXPECT_EQ(r.attention.compute_path,
              precision == Fp32Precision::kBf16 ? bf16_compute_path().path : "fp32");
    results.push_back(out);
  }
  EXPECT_NE(results[0], results[1]);
  EXPECT_LE(reference::max_relative_error(
                results[1], std::vector<double>(results[0].begin(), results[0].end())),
            1e-2);
}

}  // namespace
}  // namespace seqattn::testing

// Outside seqattn::testing: Highway's instantiation macro names ::testing unqualified.
namespace seqattn_mha_targets {
namespace st = seqattn::testing;

// The layer end to end (GEMM projections and the attention kernels) on every compiled target.
class MhaOnTarget : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(MhaOnTarget);

TEST_P(MhaOnTarget, DocumentLayerAndGqaWithBias) {
  seqattn::MhaConfig config;
  config.d_model = st::kDocModel;
  config.num_heads = 8;
  const std::vector<float> x = st::document_input();
  const std::vector<std::uint8_t> keep = st::document_keep_mask();
  st::check_layer(config, {st::kDocBatch, st::kDocSeq, st::kDocSeq, st::kDocModel, 8, 8, true},
                  st::random_weights(st::kDocModel, st::kDocModel, false, 11), x, x, false,
                  st::document_mask_as_keep(keep), true);
  config.num_kv_heads = 2;
  config.bias = true;
  st::check_layer(config, {st::kDocBatch, st::kDocSeq, st::kDocSeq, st::kDocModel, 8, 2, true},
                  st::random_weights(st::kDocModel, 2 * 16, true, 12), x, x, false,
                  st::document_mask_as_key_lengths(), false);
}

}  // namespace seqattn_mha_targets
