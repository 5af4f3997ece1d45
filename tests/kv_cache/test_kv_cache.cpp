// Attention over a KvCache against the double reference over the whole sequence, on every
// compiled Highway target: decode and chunk shapes, GQA/MQA, per-sequence lengths, rings,
// global tokens, lse, thread-count determinism and concurrent runs of one plan.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kv_cache_support.hpp"
#include "tests/support/guarded_workspace.hpp"
#include "tests/support/plan_call.hpp"
#include "tests/support/variant_test_rows.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::CacheSequence;
using testing::for_each_target;
using testing::make_zeros;
using testing::OwnedTensor;
using testing::suffix_error;

constexpr double kTolerance = 1e-5;

struct DecodeCase {
  std::int64_t heads_q, heads_kv, dim, dim_v, seq_q;
  bool causal;
};

// The (query, key) pairs the new queries of every sequence see: query i of sequence b sits at
// position pos = length(b) - S_q + i and sees key j < length(b) when causal allows it
// (j <= pos) and, for a window, when j is in [pos - left, pos + right] or pos or j is a
// global token.
double visible_pairs(const std::vector<std::int64_t>& lengths, std::int64_t seq_q,
                     const VariantSpec& spec, bool causal) {
  const auto* window = std::get_if<SlidingWindowSpec>(&spec);
  auto global = [&](std::int64_t p) {
    return window != nullptr &&
           std::find(window->global_tokens.begin(), window->global_tokens.end(), p) !=
               window->global_tokens.end();
  };
  double pairs = 0;
  for (const std::int64_t length : lengths) {
    for (std::int64_t pos = length - seq_q; pos < length; ++pos) {
      for (std::int64_t j = 0; j < length; ++j) {
        if (causal && j > pos) continue;
        const bool band =
            window == nullptr || (j >= pos - window->left && j <= pos + window->right);
        pairs += band || global(pos) || global(j) ? 1 : 0;
      }
    }
  }
  return pairs;
}

// Fills each sequence b with lengths[b] tokens, appended in random-size pieces, and checks the
// last S_q queries of every sequence against the reference.
void check_decode(const DecodeCase& c, const std::vector<std::int64_t>& lengths,
                  const VariantSpec& spec, int threads) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  CacheSequence seq(batch, c.heads_q, c.heads_kv, longest, c.dim, c.dim_v, 7);
  KvCache cache({batch, c.heads_kv, longest + 5, c.dim, c.dim_v});
  std::mt19937 gen(3);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < lengths[b];) {
      const std::int64_t n = std::min<std::int64_t>(1 + gen() % 97, lengths[b] - t);
      seq.append(cache, b, t, t + n);
      t += n;
    }
    ASSERT_EQ(cache.length(b), lengths[b]);
  }
  // The new queries of sequence b are its last S_q positions; q is gathered into [B, H, S_q, D].
  OwnedTensor q = make_zeros(batch, c.heads_q, c.seq_q, c.dim, testing::Layout::kBSHD);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < c.heads_q; ++h)
      for (std::int64_t i = 0; i < c.seq_q; ++i)
        for (std::int64_t d = 0; d < c.dim; ++d)
          q.view.at(b, h, i, d) = seq.q.view.at(b, h, lengths[b] - c.seq_q + i, d);
  OwnedTensor out = make_zeros(batch, c.heads_q, c.seq_q, c.dim_v, testing::Layout::kBHSD, 2);
  OwnedTensor lse = make_zeros(batch, c.heads_q, c.seq_q, 1);
  AttentionOptions options;
  options.variant = spec;
  options.mask.causal = c.causal;
  options.threads = threads;
  options.lse = lse.view;
  const RunRecord record = attend(q.cview(), cache, out.view, options);
  // 2·(D + D_v) FLOPs per visible (query, key) pair and query head (cache_cost in
  // src/api/plan_cache.cpp), the pairs counted from the visibility rule.
  EXPECT_EQ(record.flops, 2.0 * static_cast<double>((c.dim + c.dim_v) * c.heads_q) *
                              visible_pairs(lengths, c.seq_q, spec, c.causal));
  for (std::int64_t b = 0; b < batch; ++b) {
    const CacheSequence::Reference ref = seq.reference(b, lengths[b], c.seq_q, spec, c.causal);
    const double err = suffix_error(out.view, b, ref);
    testing::worst_error.add(err);
    EXPECT_LE(err, kTolerance) << "batch " << b << " length " << lengths[b];
    for (std::int64_t h = 0; h < c.heads_q; ++h) {
      for (std::int64_t i = 0; i < c.seq_q; ++i) {
        const double want = ref.result.lse_at(0, h, ref.first_row + i);
        EXPECT_NEAR(lse.view.at(b, h, i, 0), want, 1e-5 * std::max(1.0, std::abs(want)));
      }
    }
  }
}

TEST(KvCacheOracle, DecodeEqualsDenseOverTheSequence) {
  for_each_target([] {
    for (const std::int64_t seq_q : {1, 3, 16, 100}) {
      SCOPED_TRACE("S_q " + std::to_string(seq_q));
      check_decode({8, 2, 64, 64, seq_q, true}, {700, 1300}, DenseSpec{}, 2);   // GQA, split
      check_decode({4, 1, 17, 80, seq_q, true}, {seq_q + 40}, DenseSpec{}, 3);  // MQA, odd dims
      check_decode({3, 3, 1, 3, seq_q, false}, {seq_q + 2, seq_q + 65}, DenseSpec{}, 1);
    }
  });
}

TEST(KvCache, SlidingWindowWithGlobalTokens) {
  for_each_target([] {
    const SlidingWindowSpec window{37, 0, {0, 5, 600}};
    check_decode({4, 2, 32, 32, 1, true}, {900, 130}, window, 2);
    check_decode({4, 2, 32, 32, 16, true}, {900, 610}, window, 2);
    check_decode({2, 2, 16, 16, 5, false}, {300}, SlidingWindowSpec{20, 3, {299}}, 1);
  });
}

// A ring of capacity W + chunk holds what a window of W needs: decoding through it, past
// several wraps, equals the sliding-window variant over the whole sequence.
TEST(KvCache, RingEqualsSlidingWindowOverTheSequence) {
  for_each_target([] {
    const std::int64_t left = 70, length = 400, heads_q = 4, heads_kv = 2, dim = 24;
    CacheSequence seq(1, heads_q, heads_kv, length, dim, dim, 11);
    KvCache ring({1, heads_kv, left + 4, dim, dim}, KvCacheMode::kRing);
    AttentionOptions options;
    options.variant = SlidingWindowSpec{left, 0, {}};
    options.mask.causal = true;
    std::mt19937 gen(5);
    for (std::int64_t t = 0; t < length;) {
      const std::int64_t n = std::min<std::int64_t>(1 + gen() % 4, length - t);
      seq.append(ring, 0, t, t + n);
      t += n;
      OwnedTensor out = make_zeros(1, heads_q, n, dim);
      attend(CacheSequence::rows(seq.q, 0, t - n, n), ring, out.view, options);
      const CacheSequence::Reference ref = seq.reference(0, t, n, options.variant, true);
      ASSERT_LE(suffix_error(out.view, 0, ref), kTolerance) << "after " << t << " tokens";
    }
    EXPECT_EQ(ring.length(0), length);
    EXPECT_EQ(ring.stored(0), left + 4);
  });
}

// Split points are positions, not thread counts: any team gives the same bits.
TEST(KvCache, BitwiseIdenticalForAnyThreadCount) {
  for_each_target([] {
    CacheSequence seq(2, 8, 2, 3000, 64, 64, 13);
    KvCache cache({2, 2, 3000, 64, 64});
    seq.append(cache, 0, 0, 3000);
    seq.append(cache, 1, 0, 1777);
    const OwnedTensor q = testing::make_tensor(2, 8, 1, 64, testing::Layout::kBHSD, 23);
    std::vector<float> first;
    for (int threads = 1; threads <= 4; ++threads) {
      AttentionOptions options;
      options.threads = threads;
      OwnedTensor out = make_zeros(2, 8, 1, 64);
      const RunRecord r =
          make_plan(cache_shape(cache.shape(), 8, 1), options).run(q.cview(), cache, out.view);
      EXPECT_EQ(r.threads, threads);
      if (threads == 1) first = out.storage;
      ASSERT_EQ(std::memcmp(first.data(), out.storage.data(), first.size() * 4), 0)
          << threads << " threads";
    }
  });
}

// One plan, eight threads at once, each with its own output and workspace.
TEST(KvCache, OnePlanFromEightThreadsEqualsSerialRuns) {
  CacheSequence seq(1, 8, 2, 2000, 64, 64, 17);
  KvCache cache({1, 2, 2048, 64, 64});
  seq.append(cache, 0, 0, 2000);
  AttentionOptions options;
  options.mask.causal = true;
  options.threads = 2;
  const AttentionPlan plan = make_plan(cache_shape(cache.shape(), 8, 4), options);
  std::vector<OwnedTensor> q, serial, parallel;
  for (int t = 0; t < 8; ++t) {
    q.push_back(testing::make_tensor(1, 8, 4, 64, testing::Layout::kBHSD, 100 + t));
    serial.push_back(make_zeros(1, 8, 4, 64));
    parallel.push_back(make_zeros(1, 8, 4, 64));
    plan.run(q.back().cview(), cache, serial.back().view);
  }
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      const testing::GuardedWorkspace workspace(plan.workspace_bytes());
      for (int rep = 0; rep < 5; ++rep) {
        plan.run(q[t].cview(), cache, parallel[t].view, {.workspace = workspace.bytes()});
      }
      EXPECT_TRUE(workspace.guard_intact()) << "thread " << t << " wrote past its workspace";
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(std::memcmp(serial[t].storage.data(), parallel[t].storage.data(),
                          serial[t].storage.size() * 4),
              0);
  }
}

// A plan over q/k/v gives the same bits as attend(), for every case of every row of the
// variant table (each row prepares its own state in the plan).
TEST(Plan, RunEqualsAttend) {
  CacheSequence seq(1, 4, 2, 300, 32, 32, 19);
  for (const testing::VariantTestCase& c : testing::every_variant_case()) {
    SCOPED_TRACE(c.name);
    const AttentionOptions options = c.options(1, 300);
    const VariantSpec& spec = options.variant;
    OwnedTensor a = make_zeros(1, 4, 300, 32), b = make_zeros(1, 4, 300, 32);
    attend(seq.q.cview(), seq.k.cview(), seq.v.cview(), a.view, options);
    const testing::PlanCall call = testing::split_for_plan(options);
    const AttentionPlan plan = make_plan({1, 4, 2, 300, 300, 32, 32}, call.planned);
    EXPECT_EQ(plan.variant(), variant_of(spec));
    for (int rep = 0; rep < 2; ++rep)
      plan.run(seq.q.cview(), seq.k.cview(), seq.v.cview(), b.view, call.args);
    EXPECT_EQ(std::memcmp(a.storage.data(), b.storage.data(), a.storage.size() * 4), 0)
        << to_string(variant_of(spec));
  }
}

}  // namespace
}  // namespace seqattn
