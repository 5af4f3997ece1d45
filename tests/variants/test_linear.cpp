// Linear attention (elu1, relu, FAVOR+; causal and not) against the double reference on every
// compiled Highway target, plus determinism, stability and the errors it must raise.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "linear_test_cases.hpp"
#include "target_loop.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;
using F = FeatureMap;

// The FLOPs linear attention reports (docs/architecture.md, LinearVariant::cost): the feature
// maps (elu1/relu D per row, FAVOR+ 2·D·m + 2·D + 2·m), 2·m·(D_v + 1) per visible key and per
// query plus D_v per query, and, causal, 2·C·(m + D_v + 1) per query with C = min(chunk, S_k),
// the chunk being 64 keys on the AVX-512 targets and 32 below. Every term is an integer, so
// the count is exact.
double documented_flops(const LinearCase& c) {
  const double d = static_cast<double>(c.dim), dv = static_cast<double>(c.dim_v);
  const double m = static_cast<double>(c.features == 0 ? c.dim : c.features);
  const double features = c.map == F::kFavor ? 2 * d * m + 2 * d + 2 * m : d;
  double keys = 0;
  for (std::int64_t b = 0; b < c.batch; ++b)
    keys += static_cast<double>(c.key_lengths.empty() ? c.seq_k : c.key_lengths[b]);
  keys *= static_cast<double>(c.heads_kv);
  const double queries = static_cast<double>(c.batch * c.heads_q * c.seq_q);
  double per_query = features + 2 * m * (dv + 1) + dv;
  if (c.causal) {
    const bool avx512 = simd_target().find("AVX3") != std::string::npos;
    const std::int64_t chunk =
        std::min<std::int64_t>(avx512 ? 64 : 32, std::max<std::int64_t>(c.seq_k, 1));
    per_query += 2 * static_cast<double>(chunk) * (m + dv + 1);
  }
  return keys * (features + 2 * m * (dv + 1)) + queries * per_query;
}

OwnedTensor run_linear(const LinearCase& c, const LinearInputs& in, int threads = 0) {
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v, c.layout, c.pad);
  AttentionOptions opt;
  opt.variant = in.spec;
  opt.mask = in.mask;
  opt.threads = threads;
  const RunRecord record = attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
  EXPECT_EQ(record.variant, Variant::kLinear);
  EXPECT_EQ(record.flops, documented_flops(c)) << describe(c) << " on " << simd_target();
  return out;
}

void expect_matches_reference(const LinearCase& c, std::uint32_t seed) {
  const LinearInputs in = make_linear_inputs(c, seed);
  const reference::Result ref = linear_reference(c, in);
  for_each_target([&] {
    const OwnedTensor out = run_linear(c, in);
    const double error = reference::max_relative_error(out.view, ref);
    worst_error.add(error);
    EXPECT_LE(error, kTolerance) << describe(c);
  });
}

LinearCase make_case(F map, std::int64_t m, bool causal, std::int64_t s_q, std::int64_t s_k,
                     std::int64_t d, std::int64_t d_v) {
  LinearCase c;
  c.map = map;
  c.features = m;
  c.causal = causal;
  c.seq_q = s_q;
  c.seq_k = s_k;
  c.dim = d;
  c.dim_v = d_v;
  return c;
}

TEST(LinearAttention, SmallShapesEveryFeatureMap) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    for (bool causal : {false, true}) {
      expect_matches_reference(make_case(map, 0, causal, 1, 1, 1, 1), 11);
      expect_matches_reference(make_case(map, 0, causal, 3, 3, 3, 3), 12);
      expect_matches_reference(make_case(map, 0, causal, 17, 17, 17, 5), 13);
    }
  }
}

TEST(LinearAttention, LongerSequencesAndHeadDims) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    for (bool causal : {false, true}) {
      expect_matches_reference(make_case(map, 0, causal, 80, 80, 64, 64), 21);
      expect_matches_reference(make_case(map, 0, causal, 257, 257, 17, 3), 22);
    }
  }
}

TEST(LinearAttention, FavorFeatureCounts) {
  for (std::int64_t m : {1, 7, 40, 130}) {
    expect_matches_reference(make_case(F::kFavor, m, false, 80, 80, 17, 9), 31);
    expect_matches_reference(make_case(F::kFavor, m, true, 257, 257, 3, 17), 32);
  }
}

TEST(LinearAttention, CrossAttentionLengths) {
  // S_q != S_k aligns the causal diagonal at the end: query i sees keys j <= i + S_k - S_q.
  for (F map : {F::kElu1, F::kFavor}) {
    for (bool causal : {false, true}) {
      expect_matches_reference(make_case(map, 0, causal, 80, 257, 17, 5), 41);
      expect_matches_reference(make_case(map, 0, causal, 257, 80, 17, 5), 42);
      expect_matches_reference(make_case(map, 0, causal, 1, 257, 64, 64), 43);
      expect_matches_reference(make_case(map, 0, causal, 257, 3, 3, 1), 44);
    }
  }
}

TEST(LinearAttention, KeyLengthsGqaAndStridedLayouts) {
  for (F map : {F::kElu1, F::kRelu, F::kFavor}) {
    for (bool causal : {false, true}) {
      LinearCase c = make_case(map, map == F::kFavor ? 24 : 0, causal, 80, 257, 17, 9);
      c.batch = 3;
      c.heads_q = 4;
      c.heads_kv = 2;
      c.key_lengths = {0, 100, 257};
      expect_matches_reference(c, 51);
      c.layout = Layout::kBSHD;
      c.pad = 3;
      c.heads_kv = 1;
      c.seq_q = c.seq_k = 80;
      c.key_lengths = {80, 1, 0};
      expect_matches_reference(c, 52);
      c.layout = Layout::kBHSD;
      c.pad = 5;
      c.heads_kv = 4;
      c.dim = c.dim_v = 64;
      c.key_lengths = {17, 0, 3};
      expect_matches_reference(c, 53);
    }
  }
}

TEST(LinearAttention, CallerGivenFavorMatrixWithRowPadding) {
  const LinearCase c = make_case(F::kFavor, 20, true, 80, 80, 17, 9);
  LinearInputs in = make_linear_inputs(c, 61);
  // Row stride 19 > D = 17: the kernel must honour the stride.
  const std::vector<float> w = favor_random_matrix(20, 17, 999);
  std::vector<float> padded(20 * 19, 123.0f);
  for (int r = 0; r < 20; ++r) std::copy_n(&w[r * 17], 17, &padded[r * 19]);
  in.spec.favor_matrix = {padded.data(), 20, 17, 19};
  in.favor = w;
  const reference::Result ref = linear_reference(c, in);
  for_each_target(
      [&] { EXPECT_LE(reference::max_relative_error(run_linear(c, in).view, ref), kTolerance); });
}

void expect_thread_count_invariant(const LinearCase& c) {
  const LinearInputs in = make_linear_inputs(c, 71);
  const OwnedTensor one = run_linear(c, in, 1);
  for (int threads : {2, 3, 5}) {
    const OwnedTensor many = run_linear(c, in, threads);
    EXPECT_EQ(
        0, std::memcmp(one.storage.data(), many.storage.data(), one.storage.size() * sizeof(float)))
        << describe(c) << " threads=" << threads;
  }
}

TEST(LinearAttention, BitwiseIdenticalForAnyThreadCount) {
  for (F map : {F::kElu1, F::kFavor}) {
    for (bool causal : {false, true}) {
      LinearCase c = make_case(map, 0, causal, 300, 300, 32, 32);
      c.batch = 2;
      c.heads_q = c.heads_kv = 3;
      expect_thread_count_invariant(c);
      // One kv head (MQA): the non-causal path splits the queries into blocks across threads.
      c = make_case(map, 0, causal, 600, 300, 32, 17);
      c.heads_q = 4;
      c.heads_kv = 1;
      expect_thread_count_invariant(c);
    }
  }
}

TEST(LinearAttention, CausalSegmentsAcrossThreads) {
  // elu1/relu causal runs in segments of 8 chunks (512 keys on AVX-512, 256 below) that the
  // threads share in waves: several segments, a partial last one, S_q != S_k, key lengths
  // inside and on segment boundaries, GQA, and thread counts that do and do not divide them.
  for (F map : {F::kElu1, F::kRelu}) {
    LinearCase c = make_case(map, 0, true, 1300, 1300, 32, 17);
    expect_matches_reference(c, 91);
    c.seq_q = 700;
    expect_matches_reference(c, 92);
    c.seq_q = 1300;
    c.seq_k = 1100;
    expect_matches_reference(c, 93);
    c.seq_k = 1300;
    c.batch = 3;
    c.key_lengths = {512, 1024, 1};
    expect_matches_reference(c, 94);
    c = make_case(map, 0, true, 1300, 1300, 32, 17);
    c.heads_q = 2;
    expect_thread_count_invariant(c);
    c.batch = 3;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.key_lengths = {0, 700, 1300};
    expect_thread_count_invariant(c);
  }
}

TEST(LinearAttention, DrawnFavorMatricesAreKeptPerShapeAndSeed) {
  // One-shot calls keep the last few drawn matrices by (m, D, seed): every call must still use
  // its own, across more seeds and shapes than the cache holds and back.
  std::vector<std::vector<float>> first;
  for (int round = 0; round < 2; ++round) {
    for (std::uint32_t seed = 0; seed < 10; ++seed) {
      const std::int64_t m = 8 + seed % 3, d = 16 + seed % 2;
      const LinearCase c = make_case(F::kFavor, m, false, 17, 17, d, 5);
      const LinearInputs in = make_linear_inputs(c, seed);  // FAVOR+ seed = seed
      const OwnedTensor out = run_linear(c, in);
      EXPECT_LE(reference::max_relative_error(out.view, linear_reference(c, in)), kTolerance);
      if (round == 0) {
        first.push_back(out.storage);
      } else {
        EXPECT_EQ(out.storage, first[seed]) << "seed " << seed;
      }
    }
  }
}

TEST(LinearAttention, FavorLargeNormsStayAccurate) {
  // |x|²/2 ≈ 190 after scaling: exp of the raw log-features underflows in float, the
  // stabilisers keep them in range. The log-features themselves are ~200 in float, so their
  // rounding (~1e-5 relative on each feature) sets the tolerance here.
  for (bool causal : {false, true}) {
    LinearCase c = make_case(F::kFavor, 0, causal, 257, 257, 64, 17);
    c.magnitude = 12.0f;
    const LinearInputs in = make_linear_inputs(c, 81);
    const reference::Result ref = linear_reference(c, in);
    const OwnedTensor out = run_linear(c, in);
    EXPECT_LE(reference::max_relative_error(out.view, ref), 2e-4) << describe(c);
  }
}

TEST(LinearAttention, FavorHugeNormsLongSequenceStayFinite) {
  for (bool causal : {false, true}) {
    LinearCase c = make_case(F::kFavor, 0, causal, 8192, 8192, 64, 64);
    c.magnitude = 40.0f;
    const LinearInputs in = make_linear_inputs(c, 91);
    const OwnedTensor out = run_linear(c, in);
    double largest = 0;
    for (float x : out.storage) {
      ASSERT_TRUE(std::isfinite(x));
      largest = std::max(largest, static_cast<double>(std::abs(x)));
    }
    // Outputs are convex combinations of values in [-1, 1] and not all zero.
    EXPECT_LE(largest, 1.0 + 1e-5);
    EXPECT_GT(largest, 0.0);
  }
}

}  // namespace
}  // namespace seqattn::testing
