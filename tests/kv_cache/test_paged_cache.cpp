// PagedKvCache on every compiled Highway target: a batch of sequences of different lengths
// run over the pool equals each sequence run alone over its own KvCache (f32, bf16, int8; GQA,
// odd D, S_q > 1, windows, RoPE); forks share blocks and copy a shared partial block before
// writing it; freed blocks are reused without stale values showing; a prompt appended at once
// (in parallel) stores what small appends store; every bad argument is an Error that changes
// nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::CacheSequence;
using testing::for_each_target;
using testing::make_zeros;
using testing::OwnedTensor;
using SequenceId = PagedKvCache::SequenceId;

struct Setup {
  std::int64_t heads_q, heads_kv, dim, dim_v, seq_q;
  DType dtype;
  VariantSpec spec = DenseSpec{};
  bool causal = true;
  std::optional<RotaryEmbedding> rope{};
};

AttentionOptions options_of(const Setup& s) {
  AttentionOptions o;
  o.variant = s.spec;
  o.mask.causal = s.causal;
  o.rope = s.rope;
  return o;
}

// Sequence b's last S_q queries, as [1, H_q, S_q, D].
OwnedTensor queries(const CacheSequence& seq, std::int64_t b, std::int64_t length,
                    std::int64_t seq_q) {
  OwnedTensor q = make_zeros(1, seq.heads_q, seq_q, seq.dim);
  for (std::int64_t h = 0; h < seq.heads_q; ++h)
    for (std::int64_t i = 0; i < seq_q; ++i)
      for (std::int64_t d = 0; d < seq.dim; ++d)
        q.view.at(0, h, i, d) = seq.q.view.at(b, h, length - seq_q + i, d);
  return q;
}

// out of sequence b alone: a KvCache of its first `length` tokens (appended in two pieces).
OwnedTensor alone(const Setup& s, const CacheSequence& seq, std::int64_t b, std::int64_t length) {
  KvCache cache({1, s.heads_kv, length, s.dim, s.dim_v, s.dtype, s.rope});
  const std::int64_t half = length / 2;
  if (half > 0) {
    cache.append(CacheSequence::rows(seq.k, b, 0, half), CacheSequence::rows(seq.v, b, 0, half));
  }
  cache.append(CacheSequence::rows(seq.k, b, half, length - half),
               CacheSequence::rows(seq.v, b, half, length - half));
  OwnedTensor out = make_zeros(1, s.heads_q, s.seq_q, s.dim_v);
  attend(queries(seq, b, length, s.seq_q).cview(), cache, out.view, options_of(s));
  return out;
}

double max_relative(const Tensor& got, std::int64_t b, const Tensor& want) {
  double err = 0, scale = 1e-30;
  for (std::int64_t h = 0; h < want.shape[1]; ++h)
    for (std::int64_t i = 0; i < want.shape[2]; ++i)
      for (std::int64_t d = 0; d < want.shape[3]; ++d) {
        const double w = want.at(0, h, i, d);
        err = std::max(err, std::fabs(got.at(b, h, i, d) - w));
        scale = std::max(scale, std::fabs(w));
      }
  return err / scale;
}

void check_batch(const Setup& s, const std::vector<std::int64_t>& lengths) {
  const auto batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  CacheSequence seq(batch, s.heads_q, s.heads_kv, longest, s.dim, s.dim_v, 61);
  PagedKvCache pool({s.heads_kv, s.dim, s.dim_v, 64, s.dtype, s.rope});
  std::vector<SequenceId> ids;
  for (std::int64_t b = 0; b < batch; ++b) {
    ids.push_back(pool.add());
    for (std::int64_t t = 0; t < lengths[b]; t += 37) {  // pieces that straddle blocks
      const std::int64_t n = std::min<std::int64_t>(37, lengths[b] - t);
      pool.append(ids.back(), CacheSequence::rows(seq.k, b, t, n),
                  CacheSequence::rows(seq.v, b, t, n));
    }
    ASSERT_EQ(pool.length(ids.back()), lengths[b]);
  }
  OwnedTensor q = make_zeros(batch, s.heads_q, s.seq_q, s.dim, testing::Layout::kBSHD);
  for (std::int64_t b = 0; b < batch; ++b) {
    const OwnedTensor qb = queries(seq, b, lengths[b], s.seq_q);
    for (std::int64_t h = 0; h < s.heads_q; ++h)
      for (std::int64_t i = 0; i < s.seq_q; ++i)
        for (std::int64_t d = 0; d < s.dim; ++d) q.view.at(b, h, i, d) = qb.view.at(0, h, i, d);
  }
  const AttentionPlan plan =
      make_plan(paged_shape(pool.shape(), batch, s.heads_q, s.seq_q, 4096), options_of(s));
  std::vector<std::vector<float>> runs;
  for (const int threads : {1, 2}) {
    AttentionOptions o = options_of(s);
    o.threads = threads;
    const AttentionPlan p = make_plan(plan.shape(), o);
    OwnedTensor out = make_zeros(batch, s.heads_q, s.seq_q, s.dim_v, testing::Layout::kBHSD, 2);
    p.run(q.cview(), pool, ids, out.view);
    for (std::int64_t b = 0; b < batch; ++b) {
      const OwnedTensor want = alone(s, seq, b, lengths[b]);
      const double err = max_relative(out.view, b, want.view);
      testing::worst_error.add(err);
      EXPECT_LE(err, 1e-6) << "sequence " << b << " of length " << lengths[b];
    }
    runs.push_back(out.storage);
  }
  EXPECT_EQ(runs[0], runs[1]) << "1 and 2 threads differ";
}

TEST(PagedCache, ABatchEqualsEachSequenceAloneOnEveryTarget) {
  for_each_target([] {
    for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
      SCOPED_TRACE(std::string(to_string(dtype)));
      check_batch({8, 2, 64, 64, 1, dtype}, {1, 63, 64, 65, 300});
      check_batch({3, 3, 17, 80, 3, dtype}, {3, 130, 64});
      check_batch({4, 1, 32, 32, 2, dtype, SlidingWindowSpec{40, 0, {}}}, {200, 41, 700});
      check_batch({4, 2, 64, 64, 1, dtype, DenseSpec{}, true, RotaryEmbedding{}}, {129, 5});
    }
  });
}

// A ragged batch (chunked prefill and decode in one call): sequence b's query_lengths[b] new
// queries are rows 0.. of its S_q; each equals the sequence alone with that many queries, and
// the padding rows are zeros with lse -inf.
void check_ragged(const Setup& s, const std::vector<std::int64_t>& lengths,
                  const std::vector<std::int64_t>& query_lengths) {
  const auto batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  CacheSequence seq(batch, s.heads_q, s.heads_kv, longest, s.dim, s.dim_v, 67);
  PagedKvCache pool({s.heads_kv, s.dim, s.dim_v, 64, s.dtype, s.rope});
  std::vector<SequenceId> ids;
  // Padding rows of q are NaN: a kernel that read them would spread NaN into the sequence.
  OwnedTensor q = make_zeros(batch, s.heads_q, s.seq_q, s.dim, testing::Layout::kBSHD);
  std::fill(q.storage.begin(), q.storage.end(), std::numeric_limits<float>::quiet_NaN());
  KvCache contiguous({batch, s.heads_kv, longest, s.dim, s.dim_v, s.dtype, s.rope});
  for (std::int64_t b = 0; b < batch; ++b) {
    ids.push_back(pool.add());
    pool.append(ids.back(), CacheSequence::rows(seq.k, b, 0, lengths[b]),
                CacheSequence::rows(seq.v, b, 0, lengths[b]));
    seq.append(contiguous, b, 0, lengths[b]);
    const OwnedTensor qb = queries(seq, b, lengths[b], query_lengths[b]);
    for (std::int64_t h = 0; h < s.heads_q; ++h)
      for (std::int64_t i = 0; i < query_lengths[b]; ++i)
        for (std::int64_t d = 0; d < s.dim; ++d) q.view.at(b, h, i, d) = qb.view.at(0, h, i, d);
  }
  const AttentionPlan plan =
      make_plan(paged_shape(pool.shape(), batch, s.heads_q, s.seq_q, 1024), options_of(s));
  OwnedTensor out = make_zeros(batch, s.heads_q, s.seq_q, s.dim_v, testing::Layout::kBHSD, 2);
  std::fill(out.storage.begin(), out.storage.end(), 9.0f);
  OwnedTensor lse = make_zeros(batch, s.heads_q, s.seq_q, 1);
  plan.run(q.cview(), pool, ids, out.view, {.query_lengths = query_lengths, .lse = lse.view});
  // The same ragged batch over a KvCache (the same kernel, the contiguous layout).
  OwnedTensor over_cache = make_zeros(batch, s.heads_q, s.seq_q, s.dim_v);
  make_plan(cache_shape(contiguous.shape(), s.heads_q, s.seq_q), options_of(s))
      .run(q.cview(), contiguous, over_cache.view, {.query_lengths = query_lengths});
  for (std::int64_t b = 0; b < batch; ++b) {
    Setup one = s;
    one.seq_q = query_lengths[b];
    const OwnedTensor want = alone(one, seq, b, lengths[b]);
    for (const Tensor& got : {out.view, over_cache.view}) {
      const double err = max_relative(got, b, want.view);
      testing::worst_error.add(err);
      EXPECT_LE(err, 1e-6) << "sequence " << b << " with " << query_lengths[b] << " queries, "
                           << (got.data == out.view.data ? "paged" : "KvCache");
    }
    for (std::int64_t h = 0; h < s.heads_q; ++h) {
      for (std::int64_t i = query_lengths[b]; i < s.seq_q; ++i) {
        EXPECT_EQ(lse.view.at(b, h, i, 0), -std::numeric_limits<float>::infinity());
        for (std::int64_t d = 0; d < s.dim_v; ++d) ASSERT_EQ(out.view.at(b, h, i, d), 0.0f);
      }
    }
  }
}

TEST(PagedCache, RaggedQueriesEqualEachSequenceAloneOnEveryTarget) {
  for_each_target([] {
    for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
      SCOPED_TRACE(std::string(to_string(dtype)));
      check_ragged({8, 2, 64, 64, 5, dtype}, {300, 17, 64, 129}, {5, 1, 3, 1});
      check_ragged({3, 3, 17, 80, 4, dtype, SlidingWindowSpec{40, 0, {}}}, {3, 200}, {3, 4});
      check_ragged({4, 2, 32, 32, 6, dtype, DenseSpec{}, true, RotaryEmbedding{}}, {66, 9}, {1, 6});
    }
  });
}

// 2-head, D = 8 tokens of value `x` everywhere. Keys of zeros make every score equal, so out
// is the mean of the values.
struct Tokens {
  std::vector<float> data;
  Tokens(std::int64_t n, float x) : data(static_cast<std::size_t>(2 * n * 8), x) {}
  ConstTensor view(std::int64_t n) const { return bhsd<const float>(data.data(), 1, 2, n, 8); }
};

// out of one query of ones over `id` (whose tokens' values are what attention averages).
std::vector<float> run_one(const PagedKvCache& pool, SequenceId id) {
  const AttentionPlan plan =
      make_plan(paged_shape(pool.shape(), 1, 2, 1, pool.shape().blocks * 64), {});
  std::vector<float> q(16, 1.0f), out(16, 0.0f);
  plan.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, std::span<const SequenceId>(&id, 1),
           bhsd(out.data(), 1, 2, 1, 8));
  return out;
}

// A prompt appended at once (more than 2^18 elements: the kv heads are written in parallel)
// stores the same bits as the same tokens appended in small pieces (written on the calling
// thread): a run over either pool gives the same output, for f32, bf16 and int8, with RoPE.
TEST(PagedCache, APromptAppendedAtOnceEqualsTheSamePromptInPieces) {
  constexpr std::int64_t kHeadsQ = 6, kHeadsKv = 3, kDim = 80, kLength = 1500;
  static_assert(kLength * kHeadsKv * (kDim + kDim) > (1 << 18), "the parallel path");
  CacheSequence seq(1, kHeadsQ, kHeadsKv, kLength, kDim, kDim, 91);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    const std::optional<RotaryEmbedding> rope = RotaryEmbedding{};
    PagedKvCache whole({kHeadsKv, kDim, kDim, 32, dtype, rope});
    PagedKvCache pieces({kHeadsKv, kDim, kDim, 32, dtype, rope});
    const SequenceId a = whole.add(), b = pieces.add();
    whole.append(a, CacheSequence::rows(seq.k, 0, 0, kLength),
                 CacheSequence::rows(seq.v, 0, 0, kLength));
    for (std::int64_t t = 0; t < kLength; t += 100) {
      const std::int64_t n = std::min<std::int64_t>(100, kLength - t);
      pieces.append(b, CacheSequence::rows(seq.k, 0, t, n), CacheSequence::rows(seq.v, 0, t, n));
    }
    AttentionOptions o;
    o.rope = rope;
    o.mask.causal = true;
    const AttentionPlan plan = make_plan(paged_shape(whole.shape(), 1, kHeadsQ, 4, kLength), o);
    const OwnedTensor q = queries(seq, 0, kLength, 4);
    OwnedTensor out_whole = make_zeros(1, kHeadsQ, 4, kDim),
                out_pieces = make_zeros(1, kHeadsQ, 4, kDim);
    const SequenceId ids_a[] = {a}, ids_b[] = {b};
    plan.run(q.cview(), whole, ids_a, out_whole.view);
    plan.run(q.cview(), pieces, ids_b, out_pieces.view);
    EXPECT_EQ(out_whole.storage, out_pieces.storage);
  }
  // int8: a non-finite value deep in a parallel append is named by its kv head and token, and
  // the pool is unchanged.
  PagedKvCache i8({kHeadsKv, kDim, kDim, 32, DType::kI8});
  const SequenceId c = i8.add();
  seq.v.view.at(0, 2, 1234, 7) = std::numeric_limits<float>::quiet_NaN();
  try {
    i8.append(c, CacheSequence::rows(seq.k, 0, 0, kLength),
              CacheSequence::rows(seq.v, 0, 0, kLength));
    ADD_FAILURE() << "no Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "v");
    EXPECT_NE(std::string(e.what()).find("kv head 2, token 1234"), std::string::npos) << e.what();
  }
  EXPECT_EQ(i8.length(c), 0);
  EXPECT_EQ(i8.free_blocks(), 32);
}

TEST(PagedCache, ForksShareBlocksAndCopyAPartialBlockBeforeWritingIt) {
  PagedKvCache pool({2, 8, 8, 16});
  const SequenceId parent = pool.add();
  const Tokens zeros(128, 0.0f);
  pool.append(parent, zeros.view(100), Tokens(100, 1.0f).view(100));  // 2 blocks
  EXPECT_EQ(pool.free_blocks(), 14);
  const SequenceId child = pool.fork(parent);
  EXPECT_EQ(pool.free_blocks(), 14) << "a fork copies nothing";
  EXPECT_EQ(pool.length(child), 100);
  // The child writes into the shared partial block: it gets its own copy first.
  pool.append(child, zeros.view(28), Tokens(28, 3.0f).view(28));
  EXPECT_EQ(pool.free_blocks(), 13);
  // The parent's partial block is its own again: appending to it takes no block.
  pool.append(parent, zeros.view(4), Tokens(4, 5.0f).view(4));
  EXPECT_EQ(pool.free_blocks(), 13);
  // Uniform scores: out is the mean of the values.
  EXPECT_FLOAT_EQ(run_one(pool, parent)[0], (100 * 1.0f + 4 * 5.0f) / 104);
  EXPECT_FLOAT_EQ(run_one(pool, child)[0], (100 * 1.0f + 28 * 3.0f) / 128);
  // Freeing the parent keeps the shared full block for the child.
  pool.free(parent);
  EXPECT_EQ(pool.free_blocks(), 14);
  EXPECT_FLOAT_EQ(run_one(pool, child)[0], (100 * 1.0f + 28 * 3.0f) / 128);
  pool.free(child);
  EXPECT_EQ(pool.free_blocks(), 16);
  EXPECT_EQ(pool.sequences(), 0);
}

// A fork's shared partial block must be copied before either appends to it: with no free
// block left that append is an Error that changes nothing, and freeing the other sequence
// makes it possible (the block is no longer shared, so no copy is needed).
TEST(PagedCache, CopyOnWriteWithAFullPoolIsAnErrorThatChangesNothing) {
  PagedKvCache pool({2, 8, 8, 1});
  const Tokens zeros(64, 0.0f);
  const SequenceId parent = pool.add();
  pool.append(parent, zeros.view(10), Tokens(10, 2.0f).view(10));
  const SequenceId child = pool.fork(parent);
  EXPECT_EQ(pool.free_blocks(), 0);
  try {
    pool.append(child, zeros.view(1), Tokens(1, 4.0f).view(1));
    ADD_FAILURE() << "no error for a copy the pool cannot hold";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "k.shape[2] (new tokens)") << e.what();
  }
  EXPECT_EQ(pool.length(child), 10);
  EXPECT_EQ(pool.free_blocks(), 0);
  EXPECT_FLOAT_EQ(run_one(pool, parent)[0], 2.0f);
  pool.free(parent);
  pool.append(child, zeros.view(1), Tokens(1, 13.0f).view(1));
  EXPECT_FLOAT_EQ(run_one(pool, child)[0], (10 * 2.0f + 13.0f) / 11);
}

TEST(PagedCache, FreedBlocksAreReusedWithoutStaleValues) {
  PagedKvCache pool({2, 8, 8, 2});
  const SequenceId a = pool.add();
  Tokens nan(100, std::numeric_limits<float>::quiet_NaN());
  pool.append(a, nan.view(100), nan.view(100));
  pool.free(a);
  const SequenceId b = pool.add();
  pool.append(b, Tokens(3, 2.0f).view(3), Tokens(3, 2.0f).view(3));  // the block a left
  for (const float x : run_one(pool, b)) EXPECT_EQ(x, 2.0f);
}

template <class Fn>
void expect_error(const Fn& fn, const std::string& argument) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
}

TEST(PagedCache, BadArgumentsAreErrorsThatChangeNothing) {
  PagedKvCache pool({2, 8, 8, 3});
  const SequenceId a = pool.add(), b = pool.add();
  pool.append(a, Tokens(100, 1.0f).view(100), Tokens(100, 1.0f).view(100));
  const std::vector<float> before = run_one(pool, a);
  // 100 + 100 tokens need 4 blocks: a holds 2 and 1 is free.
  expect_error([&] { pool.append(a, Tokens(100, 9.0f).view(100), Tokens(100, 9.0f).view(100)); },
               "k.shape[2] (new tokens)");
  expect_error([&] { pool.append(b, Tokens(129, 9.0f).view(129), Tokens(129, 9.0f).view(129)); },
               "k.shape[2] (new tokens)");
  EXPECT_EQ(pool.length(a), 100);
  EXPECT_EQ(pool.length(b), 0);
  EXPECT_EQ(pool.free_blocks(), 1);
  EXPECT_EQ(run_one(pool, a), before);
  expect_error(
      [&] { pool.append(a, Tokens(1, 1.0f).view(1), bhsd<const float>(nullptr, 1, 2, 1, 8)); },
      "v.data");
  expect_error([&] { pool.append(a, Tokens(1, 1.0f).view(1), Tokens(2, 1.0f).view(2)); },
               "v.shape");
  pool.free(b);
  expect_error([&] { pool.append(b, Tokens(1, 1.0f).view(1), Tokens(1, 1.0f).view(1)); },
               "sequence");
  expect_error([&] { (void)pool.fork(b); }, "parent");
  expect_error([&] { pool.free(b); }, "sequence");
  expect_error([&] { (void)pool.length(12345); }, "sequence");
  // Runs: a freed sequence, a batch of the wrong size, S_q longer than a sequence, one longer
  // than the plan's S_k.
  std::vector<float> q(2 * 2 * 8, 1.0f), out(2 * 2 * 8, 7.0f);
  const AttentionPlan two = make_plan(paged_shape(pool.shape(), 2, 2, 1, 192), {});
  const std::vector<SequenceId> with_freed = {a, b};
  expect_error(
      [&] {
        two.run(bhsd<const float>(q.data(), 2, 2, 1, 8), pool, with_freed,
                bhsd(out.data(), 2, 2, 1, 8));
      },
      "sequences[1]");
  const std::vector<SequenceId> one = {a};
  expect_error(
      [&] {
        two.run(bhsd<const float>(q.data(), 2, 2, 1, 8), pool, one, bhsd(out.data(), 2, 2, 1, 8));
      },
      "sequences.size()");
  const AttentionPlan short_plan = make_plan(paged_shape(pool.shape(), 1, 2, 1, 64), {});
  expect_error(
      [&] {
        short_plan.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, one,
                       bhsd(out.data(), 1, 2, 1, 8));
      },
      "sequences[0]");
  const SequenceId empty = pool.add();
  const std::vector<SequenceId> empties = {empty};
  const AttentionPlan single = make_plan(paged_shape(pool.shape(), 1, 2, 1, 192), {});
  expect_error(
      [&] {
        single.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, empties,
                   bhsd(out.data(), 1, 2, 1, 8));
      },
      "q.shape[2] (S_q)");
  try {
    single.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, empties,
               bhsd(out.data(), 1, 2, 1, 8));
    ADD_FAILURE() << "no error for S_q over an empty sequence";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cache.length(sequences[0]) = 0"), std::string::npos)
        << e.what();
  }
  // Ragged query counts: one per sequence, each in [1, S_q] and within its sequence.
  const std::vector<SequenceId> just_a = {a};
  const AttentionPlan three = make_plan(paged_shape(pool.shape(), 1, 2, 1, 192), {});
  // (No structured binding: clang 14 cannot capture one in a lambda.)
  for (const auto& bad : {std::pair{std::vector<std::int64_t>{1, 1}, "query_lengths.size()"},
                          std::pair{std::vector<std::int64_t>{0}, "query_lengths[0]"},
                          std::pair{std::vector<std::int64_t>{2}, "query_lengths[0]"}}) {
    const std::vector<std::int64_t>& counts = bad.first;
    expect_error(
        [&] {
          three.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, just_a,
                    bhsd(out.data(), 1, 2, 1, 8), {.query_lengths = counts});
        },
        bad.second);
  }
  const std::vector<std::int64_t> longer = {1};
  expect_error(
      [&] {
        single.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, empties,
                   bhsd(out.data(), 1, 2, 1, 8), {.query_lengths = longer});
      },
      "query_lengths[0]");
  // No sequence can outgrow the pool (3 blocks of 64), so neither can the plan's S_k.
  const AttentionPlan too_long = make_plan(paged_shape(pool.shape(), 1, 2, 1, 193), {});
  expect_error(
      [&] {
        too_long.run(bhsd<const float>(q.data(), 1, 2, 1, 8), pool, one,
                     bhsd(out.data(), 1, 2, 1, 8));
      },
      "S_k (the plan's max_length)");
  for (const float x : out) ASSERT_EQ(x, 7.0f) << "out was written";
  // int8: a non-finite token is refused before any block is taken.
  PagedKvCache i8({2, 8, 8, 4, DType::kI8});
  const SequenceId c = i8.add();
  Tokens bad(10, 1.0f);
  bad.data[37] = std::numeric_limits<float>::infinity();
  expect_error([&] { i8.append(c, bad.view(10), Tokens(10, 1.0f).view(10)); }, "k");
  EXPECT_EQ(i8.length(c), 0);
  EXPECT_EQ(i8.free_blocks(), 4);
}

}  // namespace
}  // namespace seqattn
