// RoPE and ALiBi inside the kernels against the float64 reference that applies them explicitly
// (reference::Positional), on every compiled Highway target: both rotary layouts, partial
// rotary, offsets, scaling and explicit (odd, unordered) positions; ALiBi's two forms with the
// published and given slopes; the weights path; sliding window; and the KV cache's decode
// equal to full-sequence attention.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/positional/rope_options.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

// The published slopes, written independently of the library from Press et al.'s code: for a
// power of two n, start = 2^(-2^-(log2 n - 3)) and slope_k = start^k; otherwise the n of the
// largest power of two below, then every other slope of 2n.
std::vector<double> published_slopes(int heads) {
  auto power_of_two = [](int n) {
    const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(n) - 3)));
    std::vector<double> s;
    for (int k = 1; k <= n; ++k) s.push_back(std::pow(start, k));
    return s;
  };
  const int n = 1 << static_cast<int>(std::floor(std::log2(heads)));
  std::vector<double> s = power_of_two(n);
  const std::vector<double> more = power_of_two(2 * n);
  for (int k = 0; static_cast<int>(s.size()) < heads; k += 2) s.push_back(more[k]);
  return s;
}

struct Case {
  std::int64_t batch = 1, heads_q = 4, heads_kv = 2, seq_q = 17, seq_k = 17, dim = 16, dim_v = 16;
  bool causal = false;
  std::optional<RotaryEmbedding> rope;
  std::optional<Alibi> alibi;
  VariantSpec variant = DenseSpec{};
  bool weights = false;
};

reference::Positional reference_positional(const Case& c) {
  reference::Positional p;
  p.rope = c.rope;
  if (c.alibi) {
    if (c.alibi->slopes.empty()) {
      p.alibi_slopes = published_slopes(static_cast<int>(c.heads_q));
    } else {
      p.alibi_slopes.assign(c.alibi->slopes.begin(), c.alibi->slopes.end());
    }
    p.alibi_symmetric =
        c.alibi->form.value_or(c.causal ? AlibiForm::kCausal : AlibiForm::kSymmetric) ==
        AlibiForm::kSymmetric;
  }
  return p;
}

// attend() against the reference: out, lse and (when asked) weights.
void expect_matches_reference(const Case& c, std::uint32_t seed) {
  const OwnedTensor q =
      make_tensor(c.batch, c.heads_q, c.seq_q, c.dim, Layout::kBSHD, seed, 3, -2.0f, 2.0f);
  const OwnedTensor k =
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim, Layout::kBHSD, seed + 1, 0, -2.0f, 2.0f);
  const OwnedTensor v = make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim_v, Layout::kBHSD, seed + 2);
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v);
  OwnedTensor lse = make_zeros(c.batch, c.heads_q, c.seq_q, 1);
  OwnedTensor weights = make_zeros(c.batch, c.heads_q, c.seq_q, c.seq_k);
  AttentionOptions o;
  o.variant = c.variant;
  o.mask.causal = c.causal;
  o.rope = c.rope;
  o.alibi = c.alibi;
  o.lse = lse.view;
  if (c.weights) o.weights = weights.view;
  attend(q.view, k.view, v.view, out.view, o);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  const reference::Positional pos = reference_positional(c);
  const auto* window = std::get_if<SlidingWindowSpec>(&c.variant);
  const reference::Result ref =
      window ? reference::sliding_window(q.view, k.view, v.view, *window, o.mask, scale, pos)
             : reference::dense(q.view, k.view, v.view, o.mask, scale, {}, pos);
  const double err = reference::max_relative_error(out.view, ref);
  worst_error.add(err);
  EXPECT_LE(err, kTolerance);
  double lse_err = 0;
  for (std::int64_t b = 0; b < c.batch; ++b) {
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        const double want = ref.lse_at(b, h, i);
        lse_err = std::max(
            lse_err, std::abs(lse.view.at(b, h, i, 0) - want) / std::max(1.0, std::abs(want)));
      }
    }
  }
  EXPECT_LE(lse_err, kTolerance);
  if (c.weights) {
    double w_err = 0;
    for (std::int64_t b = 0; b < c.batch; ++b) {
      for (std::int64_t h = 0; h < c.heads_q; ++h) {
        for (std::int64_t i = 0; i < c.seq_q; ++i) {
          for (std::int64_t j = 0; j < c.seq_k; ++j) {
            w_err =
                std::max(w_err, std::abs(weights.view.at(b, h, i, j) - ref.weight_at(b, h, i, j)));
          }
        }
      }
    }
    EXPECT_LE(w_err, kTolerance);
  }
}

TEST(Rope, BothLayoutsAgainstExplicitRotation) {
  for_each_target([] {
    for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
      for (const std::int64_t dim : {2, 16, 80}) {
        for (const bool causal : {false, true}) {
          SCOPED_TRACE("D " + std::to_string(dim) + (causal ? " causal" : "") +
                       (layout == RopeLayout::kHalves ? " halves" : " interleaved"));
          Case c;
          c.dim = c.dim_v = dim;
          c.causal = causal;
          c.rope = rope(layout);
          expect_matches_reference(c, 11);
        }
      }
    }
  });
}

TEST(Rope, PartialRotaryOffsetScalingAndShapes) {
  for_each_target([] {
    for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
      Case c;
      c.dim = c.dim_v = 80;
      c.rope = rope(layout, 20, 500.0);  // 25% of D
      c.rope->offset = 1000;
      c.rope->linear_scaling = 4.0;
      c.causal = true;
      expect_matches_reference(c, 21);
      // Cross-attention shapes: 3 queries over 97 keys (queries at 94..96), one head, B = 2.
      Case cross;
      cross.batch = 2;
      cross.heads_q = cross.heads_kv = 1;
      cross.seq_q = 3;
      cross.seq_k = 97;
      cross.dim = cross.dim_v = 64;
      cross.rope = rope(layout, 32);
      expect_matches_reference(cross, 22);
      cross.seq_q = 1;  // a decode shape
      expect_matches_reference(cross, 23);
      cross.seq_q = 70;  // more queries than keys: the first ones sit at negative positions
      cross.seq_k = 5;
      expect_matches_reference(cross, 24);
    }
  });
}

TEST(Rope, ExplicitOddPositions) {
  for_each_target([] {
    Case c;
    c.seq_q = 5;
    c.seq_k = 9;
    c.rope = rope(RopeLayout::kInterleaved);
    c.rope->q_positions = {7, 3, 1001, 0, 65535};
    c.rope->k_positions = {9, 1, 1, 333, 0, 12, 70001, 5, 2};
    c.rope->offset = 3;
    expect_matches_reference(c, 31);
    c.weights = true;  // the weights pass rotates its own copies
    expect_matches_reference(c, 32);
  });
}

TEST(Rope, SlidingWindowWithGlobalsAndWeights) {
  for_each_target([] {
    Case c;
    c.seq_q = c.seq_k = 80;
    c.variant = SlidingWindowSpec{5, 3, {0, 41}};
    c.rope = rope(RopeLayout::kHalves, 8);
    c.alibi = Alibi{};
    c.weights = true;
    expect_matches_reference(c, 41);
    c.causal = true;
    c.variant = SlidingWindowSpec{7, 0, {}};
    expect_matches_reference(c, 42);
  });
}

TEST(Alibi, SlopesFollowThePublishedFormula) {
  for (const int heads : {1, 2, 3, 8, 12, 16, 24, 32, 40}) {
    const std::vector<float> got = alibi_slopes(heads);
    const std::vector<double> want = published_slopes(heads);
    ASSERT_EQ(got.size(), want.size()) << heads;
    for (size_t h = 0; h < want.size(); ++h) {
      EXPECT_NEAR(got[h], want[h], 1e-7 * want[h]) << heads << " heads, head " << h;
    }
  }
  // Spot values of the paper: 8 heads are 1/2 ... 1/256; 12 heads add 2^-0.5, 2^-1.5, ...
  EXPECT_FLOAT_EQ(alibi_slopes(8)[0], 0.5f);
  EXPECT_FLOAT_EQ(alibi_slopes(8)[7], 1.0f / 256);
  EXPECT_FLOAT_EQ(alibi_slopes(12)[8], static_cast<float>(std::exp2(-0.5)));
  EXPECT_FLOAT_EQ(alibi_slopes(16)[15], 1.0f / 256);
}

TEST(Alibi, BothFormsAgainstExplicitBias) {
  for_each_target([] {
    for (const int heads : {8, 12}) {
      for (const bool causal : {false, true}) {
        Case c;
        c.heads_q = heads;
        c.heads_kv = 4;
        c.seq_q = c.seq_k = 33;
        c.causal = causal;
        c.alibi = Alibi{};  // the published slopes, the form from the mask
        expect_matches_reference(c, 51);
        c.alibi->form = causal ? AlibiForm::kSymmetric : AlibiForm::kCausal;  // the other one
        expect_matches_reference(c, 52);
      }
    }
    Case given;
    given.heads_q = given.heads_kv = 2;
    given.seq_q = 3;
    given.seq_k = 130;
    given.alibi = Alibi{{0.75f, 0.01f}, AlibiForm::kCausal};
    given.rope = rope(RopeLayout::kHalves);
    given.weights = true;
    expect_matches_reference(given, 53);
  });
}

// Decode over a KvCache with RoPE (keys rotated on append) and ALiBi equals full-sequence
// attention with them, for every prefix split and both cache modes.
TEST(PositionalCache, DecodeEqualsFullSequence) {
  for_each_target([] {
    const std::int64_t len = 150, dim = 32;
    const CacheSequence seq(1, 4, 2, len, dim, dim, 61);
    for (const bool ring : {false, true}) {
      for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
        SCOPED_TRACE(ring ? "ring" : "linear");
        RotaryEmbedding r = rope(layout, 16);
        r.offset = 7;
        KvCacheShape shape{1, 2, ring ? 128 : 256, dim, dim, DType::kF32, r};
        KvCache cache(shape, ring ? KvCacheMode::kRing : KvCacheMode::kLinear);
        const VariantSpec spec =
            ring ? VariantSpec{SlidingWindowSpec{100, 0, {}}} : VariantSpec{DenseSpec{}};
        AttentionOptions o;
        o.variant = spec;
        o.mask.causal = true;
        o.rope = r;
        o.alibi = Alibi{};
        reference::Positional pos;
        pos.rope = r;
        pos.alibi_slopes = published_slopes(4);
        std::int64_t done = 0;
        for (const std::int64_t step : {100, 1, 1, 5, 43}) {
          seq.append(cache, 0, done, done + step);
          done += step;
          const std::int64_t seq_q = std::min<std::int64_t>(step, 5);
          OwnedTensor out = make_zeros(1, 4, seq_q, dim);
          const AttentionPlan plan = make_plan(cache_shape(cache.shape(), 4, seq_q), o);
          plan.run(CacheSequence::rows(seq.q, 0, done - seq_q, seq_q), cache, out.view);
          const auto ref = seq.reference(0, done, seq_q, spec, true, pos);
          const double err = suffix_error(out.view, 0, ref);
          worst_error.add(err);
          EXPECT_LE(err, kTolerance) << "after " << done << " tokens";
        }
      }
    }
  });
}

}  // namespace
}  // namespace seqattn::testing
