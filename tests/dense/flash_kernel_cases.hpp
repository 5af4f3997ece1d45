// The flash kernel's test cases through attend(), backend-neutral: the Highway test
// (test_flash_kernel.cpp) runs them on every compiled Highway target, the xsimd test
// (test_flash_kernel_xsimd.cpp) on every compiled xsimd arch. Each checks against the double
// reference: shapes, layouts, GQA, cross attention, every mask part, lse, weights, merging
// partial results, thread-count determinism, sliding windows and non-finite inputs.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "tests/dense/flash_cases.hpp"
#include "tests/support/padding_check.hpp"

namespace flash_test::cases {
using namespace seqattn;           // NOLINT
using namespace seqattn::testing;  // NOLINT

constexpr double kTolerance = 1e-5;

inline void ExpectMatchesReference(const FlashCase& c) {
  const FlashOutcome r = run_flash_case(c);
  EXPECT_LE(r.out_error, kTolerance) << c.describe();
  EXPECT_FALSE(r.any_nan) << c.describe();
  if (c.want_lse) {
    EXPECT_LE(r.lse_error, kTolerance) << c.describe();
    EXPECT_TRUE(r.lse_inf_match) << c.describe();
  }
}

inline void TestShapes() {
  const std::int64_t seqs[] = {1, 3, 17, 80, 128, 300};
  const std::int64_t dims[] = {1, 3, 17, 64, 80, 128};
  std::uint32_t seed = 10;
  for (const std::int64_t s : seqs) {
    for (const std::int64_t d : dims) {
      FlashCase c;
      c.seq_q = c.seq_k = s;
      c.dim = c.dim_v = d;
      c.heads_q = c.heads_kv = 1;
      c.seed = ++seed;
      ExpectMatchesReference(c);
    }
  }
}

inline void TestLayoutsGqaAndCrossAttention() {
  for (const Layout layout : {Layout::kBHSD, Layout::kBSHD}) {
    for (const std::int64_t pad : {0, 5}) {
      FlashCase c;
      c.layout = layout;
      c.pad = pad;
      c.batch = 2;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.seq_q = 37;
      c.seq_k = 90;
      c.dim = 24;
      c.dim_v = 40;  // D_v != D
      ExpectMatchesReference(c);
      c.seq_q = 90;  // S_q > S_k
      c.seq_k = 21;
      c.dim_v = 7;
      c.heads_kv = 1;  // MQA
      ExpectMatchesReference(c);
    }
  }
  for (const std::int64_t dim_v : {1, 33, 96, 112, 256}) {
    FlashCase c;
    c.seq_q = 50;
    c.seq_k = 70;
    c.dim = 32;
    c.dim_v = dim_v;
    ExpectMatchesReference(c);
  }
}

inline void TestMasks() {
  for (const bool causal : {false, true}) {
    for (const auto& sizes :
         {std::pair<std::int64_t, std::int64_t>{80, 80}, {30, 100}, {100, 30}}) {
      FlashCase c;
      c.batch = 3;
      c.seq_q = sizes.first;
      c.seq_k = sizes.second;
      c.dim = c.dim_v = 20;
      c.causal = causal;
      ExpectMatchesReference(c);
      c.key_lengths = {c.seq_k, 0, c.seq_k / 2 + 1};
      ExpectMatchesReference(c);
      c.keep = true;
      ExpectMatchesReference(c);
      c.bias = true;
      ExpectMatchesReference(c);
      c.keep = false;
      c.key_lengths.clear();
      ExpectMatchesReference(c);
    }
  }
}

inline void TestFullyMaskedRowsGiveZeros() {
  FlashCase c;
  c.seq_q = 40;
  c.seq_k = 70;
  c.key_lengths = {0};
  const FlashOutcome r = run_flash_case(c);
  for (float x : r.out.storage) EXPECT_EQ(x, 0.0f);
  for (float x : r.lse) EXPECT_TRUE(std::isinf(x) && x < 0);
}

inline void TestWeightsOutput() {
  for (const bool window : {false, true}) {
    FlashCase c;
    c.seq_q = 33;
    c.seq_k = 45;
    c.causal = true;
    c.keep = true;
    c.want_weights = true;
    if (window) c.window = SlidingWindowSpec{4, 2, {0, 7}};
    const FlashOutcome r = run_flash_case(c);
    EXPECT_LE(r.out_error, kTolerance);
    EXPECT_LE(reference::max_relative_error(r.weights, r.ref.weights), kTolerance);
    for (std::int64_t row = 0; row < c.heads_q * c.seq_q; ++row) {
      double sum = 0;
      for (std::int64_t j = 0; j < c.seq_k; ++j)
        sum += r.weights[static_cast<size_t>(row * c.seq_k + j)];
      const bool empty = std::isinf(r.ref.lse[static_cast<size_t>(row)]);
      EXPECT_NEAR(sum, empty ? 0.0 : 1.0, 1e-5) << "row " << row;
    }
  }
}

// Attention over all keys equals the lse-merge of attention over two halves of the keys.
inline void TestMergePartialsOverKeyHalves() {
  const std::int64_t s_q = 29, s_k = 75, half = 40, d = 24;
  const OwnedTensor q = make_tensor(1, 2, s_q, d, Layout::kBHSD, 5);
  const OwnedTensor k = make_tensor(1, 2, s_k, d, Layout::kBHSD, 6);
  const OwnedTensor v = make_tensor(1, 2, s_k, d, Layout::kBHSD, 7);
  auto keys = [&](const OwnedTensor& t, std::int64_t first, std::int64_t count) {
    ConstTensor view = t.cview();
    view.data += first * view.strides[2];
    view.shape[2] = count;
    return view;
  };
  OwnedTensor out1 = make_zeros(1, 2, s_q, d), out2 = make_zeros(1, 2, s_q, d);
  OwnedTensor lse1 = make_zeros(1, 2, s_q, 1), lse2 = make_zeros(1, 2, s_q, 1);
  AttentionOptions options;
  options.lse = lse1.view;
  attend(q.cview(), keys(k, 0, half), keys(v, 0, half), out1.view, options);
  options.lse = lse2.view;
  attend(q.cview(), keys(k, half, s_k - half), keys(v, half, s_k - half), out2.view, options);
  merge_partials(out1.view, lse1.view, out2.view, lse2.view, out1.view, lse1.view);
  const reference::Result ref = reference::dense(q.cview(), k.cview(), v.cview(), Mask{},
                                                 1.0 / std::sqrt(static_cast<double>(d)));
  EXPECT_LE(reference::max_relative_error(out1.view, ref), kTolerance);
  EXPECT_LE(reference::max_relative_error(lse1.storage, ref.lse), kTolerance);
}

inline void TestDeterministicAcrossThreadCounts() {
  for (const bool causal : {false, true}) {
    FlashCase c;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seq_q = c.seq_k = 333;
    c.dim = c.dim_v = 64;
    c.causal = causal;
    c.threads = 1;
    const FlashOutcome one = run_flash_case(c, false);
    for (const int threads : {2, 3, 4}) {
      c.threads = threads;
      const FlashOutcome many = run_flash_case(c, false);
      EXPECT_EQ(0, std::memcmp(one.out.storage.data(), many.out.storage.data(),
                               one.out.storage.size() * sizeof(float)))
          << threads << " threads";
      EXPECT_EQ(0, std::memcmp(one.lse.data(), many.lse.data(), one.lse.size() * sizeof(float)));
    }
  }
}

inline void TestSlidingWindow() {
  struct W {
    std::int64_t s_q, s_k, left, right;
    std::vector<std::int64_t> globals;
    bool causal;
    std::vector<std::int64_t> key_lengths;
  };
  const W cases[] = {
      {300, 300, 16, 16, {}, false, {}},
      {300, 300, 40, 0, {}, false, {}},
      {300, 300, 0, 70, {0, 150, 299}, false, {}},
      {200, 200, 9, 9, {3, 3, 100}, true, {}},
      {130, 260, 20, 5, {7, 250}, false, {}},
      {260, 130, 5, 20, {200}, false, {}},
      {150, 150, 100, 100, {}, false, {90}},
      {150, 150, 10, 10, {2, 149}, false, {0}},
      {17, 17, 1, 1, {}, false, {}},
      {1, 50, 3, 3, {}, false, {}},
  };
  for (const W& w : cases) {
    FlashCase c;
    c.seq_q = w.s_q;
    c.seq_k = w.s_k;
    c.dim = 24;
    c.dim_v = 20;
    c.causal = w.causal;
    c.key_lengths = w.key_lengths;
    c.window = SlidingWindowSpec{w.left, w.right, w.globals};
    ExpectMatchesReference(c);
  }
  FlashCase strided;  // GQA, BSHD with padded rows, per-batch key lengths, D != D_v
  strided.batch = 2;
  strided.heads_q = 4;
  strided.heads_kv = 2;
  strided.layout = Layout::kBSHD;
  strided.pad = 3;
  strided.seq_q = strided.seq_k = 210;
  strided.dim = 40;
  strided.dim_v = 24;
  strided.key_lengths = {150, 210};
  strided.window = SlidingWindowSpec{33, 17, {100}};
  ExpectMatchesReference(strided);
  FlashCase masked;
  masked.seq_q = masked.seq_k = 120;
  masked.keep = masked.bias = true;
  masked.window = SlidingWindowSpec{12, 30, {5}};
  ExpectMatchesReference(masked);
}

inline void TestWideWindowEqualsDense() {
  for (const bool causal : {false, true}) {
    FlashCase c;
    c.seq_q = 150;
    c.seq_k = 190;
    c.dim = c.dim_v = 32;
    c.causal = causal;
    const FlashOutcome dense = run_flash_case(c, false);
    c.window = SlidingWindowSpec{1000, 1000, {}};
    const FlashOutcome window = run_flash_case(c, false);
    EXPECT_EQ(0, std::memcmp(dense.out.storage.data(), window.out.storage.data(),
                             dense.out.storage.size() * sizeof(float)));
  }
}

// NaN values and infinite keys past the key lengths change no bit of the result: dense and a
// window, causal or not; RoPE (keys packed row by row); and a window over S 4500 at D 64, whose
// pairs pass the packing budget and stream through the banded path (padding_check.hpp).
inline void TestPaddingPastKeyLengthsIsNeverRead() {
  for (const bool window : {false, true}) {
    for (const bool causal : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "window " << window << " causal " << causal);
      AttentionOptions options;
      options.mask.causal = causal;
      if (window) options.variant = SlidingWindowSpec{5, causal ? 0 : 3, {2}};
      expect_padding_never_read(options);
    }
  }
  AttentionOptions rope;
  rope.rope = RotaryEmbedding{};
  expect_padding_never_read(rope);
  AttentionOptions banded;
  banded.variant = SlidingWindowSpec{40, 8, {}};
  expect_padding_never_read(banded, 4500, 64);
}

// A NaN in one query row stays in that row (IEEE propagation) and never crashes.
inline void TestNonFiniteInputStaysInItsRow() {
  const std::int64_t s = 70, d = 16;
  OwnedTensor q = make_tensor(1, 1, s, d, Layout::kBHSD, 3);
  const OwnedTensor k = make_tensor(1, 1, s, d, Layout::kBHSD, 4);
  const OwnedTensor v = make_tensor(1, 1, s, d, Layout::kBHSD, 5);
  q.view.at(0, 0, 9, 2) = std::numeric_limits<float>::quiet_NaN();
  OwnedTensor out = make_zeros(1, 1, s, d);
  attend(q.cview(), k.cview(), v.cview(), out.view);
  for (std::int64_t i = 0; i < s; ++i) {
    for (std::int64_t c = 0; c < d; ++c) {
      EXPECT_EQ(std::isnan(out.view.at(0, 0, i, c)), i == 9) << i << "," << c;
    }
  }
}

TEST(SlidingWindowSpecTest, RejectsBadWindowsWithoutWriting) {
  using namespace seqattn;           // NOLINT
  using namespace seqattn::testing;  // NOLINT
  const OwnedTensor q = make_tensor(1, 1, 20, 8, Layout::kBHSD, 1);
  OwnedTensor out = make_zeros(1, 1, 20, 8);
  const std::vector<SlidingWindowSpec> bad = {
      {-1, 4, {}}, {4, -2, {}}, {4, 4, {20}}, {4, 4, {3, -1}}};
  const std::vector<std::string> argument = {"sliding_window.left", "sliding_window.right",
                                             "sliding_window.global_tokens[0]",
                                             "sliding_window.global_tokens[1]"};
  for (size_t n = 0; n < bad.size(); ++n) {
    AttentionOptions options;
    options.variant = bad[n];
    try {
      attend(q.cview(), q.cview(), q.cview(), out.view, options);
      ADD_FAILURE() << "no error for case " << n;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_EQ(e.argument(), argument[n]);
    }
    for (float x : out.storage) EXPECT_EQ(x, 0.0f);
  }
  // Duplicated and unsorted global tokens are accepted (deduplicated).
  AttentionOptions options;
  options.variant = SlidingWindowSpec{2, 2, {7, 3, 7}};
  EXPECT_NO_THROW(attend(q.cview(), q.cview(), q.cview(), out.view, options));
}

// cost() counts 2·(D + D_v) per pair the band, the global rows/columns and the causal rule
// allow — exactly, by brute force here.
TEST(SlidingWindowSpecTest, CostCountsVisiblePairsExactly) {
  using namespace seqattn;           // NOLINT
  using namespace seqattn::testing;  // NOLINT
  for (const bool causal : {false, true}) {
    FlashCase c;
    c.seq_q = 40;
    c.seq_k = 55;
    c.dim = 8;
    c.dim_v = 12;
    c.causal = causal;
    c.window = SlidingWindowSpec{3, 5, {20, 0, 50}};
    const FlashOutcome r = run_flash_case(c, false);
    const std::int64_t offset = c.seq_k - c.seq_q;
    auto global = [](std::int64_t x) { return x == 0 || x == 20 || x == 50; };
    double pairs = 0;
    for (std::int64_t i = 0; i < c.seq_q; ++i) {
      for (std::int64_t j = 0; j < c.seq_k; ++j) {
        const bool band = j >= i + offset - 3 && j <= i + offset + 5;
        if ((band || global(i) || global(j)) && (!causal || j <= i + offset)) ++pairs;
      }
    }
    EXPECT_EQ(r.record.flops, pairs * c.heads_q * 2.0 * (c.dim + c.dim_v));
  }
}

}  // namespace flash_test::cases
