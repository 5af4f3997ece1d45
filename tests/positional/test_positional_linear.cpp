// RoPE inside linear attention (every feature map, causal and not, through the non-causal,
// causal-segment and FAVOR+ paths) and Linformer, against the float64 references that rotate
// q and k explicitly (reference::linear / reference::linformer with a rope), on every compiled
// Highway target: both layouts, partial rotary, offsets, scaling, explicit positions, GQA,
// strided (BSHD) views, key_lengths and decode shapes. Also: the rotation actually changes
// the result, and a plan reuses its tables across runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/positional/rope_options.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/variants/linear_test_cases.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

// attend() with linear attention and `r` against reference::linear with the same rope;
// returns the output for comparisons between runs.
OwnedTensor expect_linear(const LinearCase& c, const RotaryEmbedding& r, std::uint32_t seed) {
  SCOPED_TRACE(describe(c));
  const LinearInputs in = make_linear_inputs(c, seed);
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v);
  AttentionOptions o;
  o.variant = in.spec;
  o.mask = in.mask;
  o.rope = r;
  attend(in.q.view, in.k.view, in.v.view, out.view, o);
  const std::int64_t m = c.features == 0 ? c.dim : c.features;
  const reference::Result ref =
      reference::linear(in.q.cview(), in.k.cview(), in.v.cview(), c.map, in.favor, m,
                        in.spec.epsilon, in.mask, std::nullopt, r);
  const double err = reference::max_relative_error(out.view, ref);
  worst_error.add(err);
  EXPECT_LE(err, kTolerance);
  return out;
}

TEST(RopeLinear, EveryFeatureMapBothLayoutsCausalAndNot) {
  for_each_target([] {
    for (const FeatureMap map : {FeatureMap::kElu1, FeatureMap::kRelu, FeatureMap::kFavor}) {
      for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
        for (const bool causal : {false, true}) {
          LinearCase c;
          c.map = map;
          c.causal = causal;
          c.heads_q = 4;
          c.heads_kv = 2;
          c.dim = c.dim_v = 16;
          c.features = map == FeatureMap::kFavor ? 24 : 0;
          c.seq_q = c.seq_k = 80;  // several causal chunks and key blocks on every target
          expect_linear(c, rope(layout), 51);
        }
      }
    }
  });
}

TEST(RopeLinear, PartialRotaryOffsetScalingStridedAndDecode) {
  for_each_target([] {
    for (const bool causal : {false, true}) {
      LinearCase c;
      c.causal = causal;
      c.dim = c.dim_v = 80;
      c.seq_q = c.seq_k = 300;  // past one causal segment
      c.layout = Layout::kBSHD;
      c.pad = 3;
      c.key_lengths = {250};
      RotaryEmbedding r = rope(RopeLayout::kInterleaved, 20, 500.0);  // 25% of D
      r.offset = 1000;
      r.linear_scaling = 4.0;
      expect_linear(c, r, 61);
      c.seq_q = 1;  // decode: one query at position 1000 + 299
      c.key_lengths.clear();
      expect_linear(c, r, 62);
      c.seq_q = 3;
      c.map = FeatureMap::kFavor;
      c.features = 33;
      expect_linear(c, r, 63);
    }
  });
}

TEST(RopeLinear, ExplicitPositionsAndMoreQueriesThanKeys) {
  for_each_target([] {
    LinearCase c;
    c.seq_q = 5;
    c.seq_k = 9;
    c.dim = c.dim_v = 16;
    RotaryEmbedding r = rope(RopeLayout::kHalves);
    r.q_positions = {7, 3, 1001, 0, 65535};
    r.k_positions = {9, 1, 1, 333, 0, 12, 70001, 5, 2};
    r.offset = 3;
    expect_linear(c, r, 71);
    r.k_positions.clear();  // explicit query positions, default key positions
    expect_linear(c, r, 73);
    // Default positions with more queries than keys (queries from 9 - 40 = -31 on).
    c.seq_q = 40;
    expect_linear(c, rope(RopeLayout::kInterleaved), 72);
  });
}

// The same inputs with and without RoPE must differ (the rotation is applied at all), and a
// plan run twice gives the same bits (its tables are built once and reused).
TEST(RopeLinear, RotationChangesTheResultAndPlansReuseTables) {
  LinearCase c;
  c.seq_q = c.seq_k = 64;
  c.dim = c.dim_v = 16;
  const LinearInputs in = make_linear_inputs(c, 81);
  OwnedTensor plain = make_zeros(1, 1, c.seq_q, c.dim_v);
  OwnedTensor first = make_zeros(1, 1, c.seq_q, c.dim_v);
  OwnedTensor second = make_zeros(1, 1, c.seq_q, c.dim_v);
  AttentionOptions o;
  o.variant = in.spec;
  attend(in.q.view, in.k.view, in.v.view, plain.view, o);
  o.rope = rope(RopeLayout::kHalves, 0, 100.0);
  const AttentionPlan plan = make_plan({1, 1, 1, c.seq_q, c.seq_k, c.dim, c.dim_v}, o);
  plan.run(in.q.cview(), in.k.cview(), in.v.cview(), first.view);
  plan.run(in.q.cview(), in.k.cview(), in.v.cview(), second.view);
  double diff = 0;
  for (std::int64_t i = 0; i < c.seq_q; ++i) {
    for (std::int64_t d = 0; d < c.dim_v; ++d) {
      diff =
          std::max<double>(diff, std::abs(first.view.at(0, 0, i, d) - plain.view.at(0, 0, i, d)));
      EXPECT_EQ(first.view.at(0, 0, i, d), second.view.at(0, 0, i, d));
    }
  }
  EXPECT_GT(diff, 1e-3);
}

// Linformer with RoPE: keys rotated at their positions before the projection, queries in the
// dense kernel, against reference::linformer with the same rope.
void expect_linformer(std::int64_t seq_q, std::int64_t seq_k, std::int64_t dim,
                      const RotaryEmbedding& r, Layout layout, std::vector<std::int64_t> lengths,
                      std::uint32_t seed) {
  constexpr std::int64_t kHeadsQ = 4, kHeadsKv = 2, kProj = 12;
  const OwnedTensor q = make_tensor(1, kHeadsQ, seq_q, dim, layout, seed, 2, -2.0f, 2.0f);
  const OwnedTensor k = make_tensor(1, kHeadsKv, seq_k, dim, layout, seed + 1, 2, -2.0f, 2.0f);
  const OwnedTensor v = make_tensor(1, kHeadsKv, seq_k, dim, layout, seed + 2, 2);
  OwnedTensor out = make_zeros(1, kHeadsQ, seq_q, dim);
  const std::vector<float> e = linformer_random_projection(kProj, seq_k, seed);
  const std::vector<float> f = linformer_random_projection(kProj, seq_k, seed + 1);
  AttentionOptions o;
  o.variant =
      LinformerSpec{kProj, seed, {e.data(), kProj, seq_k, seq_k}, {f.data(), kProj, seq_k, seq_k}};
  o.mask.key_lengths = lengths;
  o.rope = r;
  attend(q.view, k.view, v.view, out.view, o);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
  const reference::Result ref =
      reference::linformer(q.cview(), k.cview(), v.cview(), {e.data(), kProj, seq_k, seq_k},
                           {f.data(), kProj, seq_k, seq_k}, o.mask, scale, r);
  const double err = reference::max_relative_error(out.view, ref);
  worst_error.add(err);
  EXPECT_LE(err, kTolerance);
}

TEST(RopeLinformer, LayoutsPartialRotaryLengthsAndPositions) {
  for_each_target([] {
    for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
      SCOPED_TRACE(layout == RopeLayout::kHalves ? "halves" : "interleaved");
      expect_linformer(17, 17, 16, rope(layout), Layout::kBHSD, {}, 91);
      RotaryEmbedding partial = rope(layout, 20, 500.0);
      partial.offset = 77;
      partial.linear_scaling = 2.0;
      expect_linformer(3, 80, 80, partial, Layout::kBSHD, {61}, 92);
      expect_linformer(1, 80, 80, partial, Layout::kBSHD, {}, 93);  // decode
      RotaryEmbedding explicit_positions = rope(layout);
      explicit_positions.q_positions = {5, 0, 4000};
      explicit_positions.k_positions = {9, 1, 1, 333, 0, 12, 70001, 5, 2};
      expect_linformer(3, 9, 16, explicit_positions, Layout::kBHSD, {}, 94);
    }
  });
}

}  // namespace
}  // namespace seqattn::testing
