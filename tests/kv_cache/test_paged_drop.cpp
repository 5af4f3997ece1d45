// PagedKvCache::drop_front on every compiled Highway target: a sliding-window sequence whose
// early blocks went back to the pool runs exactly as it did before (same bits), as a ragged
// batch with a sequence that dropped nothing, for f32, bf16 and i8 with RoPE; forks of it keep
// working and the blocks come back once; a run whose rule reaches a dropped position, and a bad
// drop_front, are Errors that change nothing.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::CacheSequence;
using testing::expect_error;
using testing::for_each_target;
using testing::make_zeros;
using testing::OwnedTensor;
using SequenceId = PagedKvCache::SequenceId;

constexpr std::int64_t kHeadsQ = 4, kHeadsKv = 2, kDim = 24, kDimV = 17, kSeqQ = 3;
constexpr std::int64_t kLeft = 100;  // the window: 100 keys back, none ahead

AttentionOptions window_options(bool causal) {
  AttentionOptions o;
  o.variant = SlidingWindowSpec{kLeft, 0, {}};
  o.mask.causal = causal;
  o.rope = RotaryEmbedding{};
  return o;
}

// q [2, H_q, S_q, D]: the last S_q queries of sequences 0 and 1 of `seq` at `lengths`.
OwnedTensor last_queries(const CacheSequence& seq, const std::int64_t (&lengths)[2]) {
  OwnedTensor q = make_zeros(2, kHeadsQ, kSeqQ, kDim);
  for (std::int64_t b = 0; b < 2; ++b)
    for (std::int64_t h = 0; h < kHeadsQ; ++h)
      for (std::int64_t i = 0; i < kSeqQ; ++i)
        for (std::int64_t d = 0; d < kDim; ++d)
          q.view.at(b, h, i, d) = seq.q.view.at(b, h, lengths[b] - kSeqQ + i, d);
  return q;
}

struct Pool {
  PagedKvCache cache;
  std::vector<SequenceId> ids;
  Pool(const CacheSequence& seq, const std::int64_t (&lengths)[2], DType dtype)
      : cache({kHeadsKv, kDim, kDimV, 16, dtype, RotaryEmbedding{}}) {
    for (std::int64_t b = 0; b < 2; ++b) {
      ids.push_back(cache.add());
      cache.append(ids.back(), CacheSequence::rows(seq.k, b, 0, lengths[b]),
                   CacheSequence::rows(seq.v, b, 0, lengths[b]));
    }
  }
  std::vector<float> run(const AttentionPlan& plan, const OwnedTensor& q) const {
    OwnedTensor out = make_zeros(2, kHeadsQ, kSeqQ, kDimV);
    plan.run(q.cview(), cache, ids, out.view);
    return out.storage;
  }
};

TEST(PagedDrop, AWindowOverDroppedBlocksGivesTheSameBitsOnEveryTarget) {
  const std::int64_t lengths[2] = {330, 97};
  const CacheSequence seq(2, kHeadsQ, kHeadsKv, 330, kDim, kDimV, 17);
  const OwnedTensor q = last_queries(seq, lengths);
  for (const DType dtype : {DType::kF32, DType::kBF16, DType::kI8}) {
    SCOPED_TRACE(std::string(to_string(dtype)));
    for (const bool causal : {true, false}) {
      Pool kept(seq, lengths, dtype), dropped(seq, lengths, dtype);
      // The first query of sequence 0 sits at 327 and sees back to 227: blocks 0..2 (positions
      // 0..191) are outside every window.
      const std::int64_t free_before = dropped.cache.free_blocks();
      dropped.cache.drop_front(dropped.ids[0], 227);
      EXPECT_EQ(dropped.cache.first_stored(dropped.ids[0]), 192);
      EXPECT_EQ(dropped.cache.free_blocks(), free_before + 3);
      EXPECT_EQ(dropped.cache.length(dropped.ids[0]), 330);
      // Another sequence takes the freed blocks and fills them with large values: a kernel that
      // still read a dropped position (through the table's placeholder) would change the bits.
      const SequenceId other = dropped.cache.add();
      const std::vector<float> big(static_cast<std::size_t>(kHeadsKv * 192 * kDim), 1000.0f);
      const std::vector<float> big_v(static_cast<std::size_t>(kHeadsKv * 192 * kDimV), -1000.0f);
      dropped.cache.append(other, bhsd<const float>(big.data(), 1, kHeadsKv, 192, kDim),
                           bhsd<const float>(big_v.data(), 1, kHeadsKv, 192, kDimV));
      EXPECT_EQ(dropped.cache.free_blocks(), free_before);
      const AttentionPlan plan = make_plan(paged_shape(kept.cache.shape(), 2, kHeadsQ, kSeqQ, 512),
                                           window_options(causal));
      for_each_target([&] { EXPECT_EQ(dropped.run(plan, q), kept.run(plan, q)); });
    }
  }
}

TEST(PagedDrop, AForkOfADroppedSequenceSharesWhatIsLeftAndFreesItOnce) {
  const std::int64_t lengths[2] = {330, 97};
  const CacheSequence seq(2, kHeadsQ, kHeadsKv, 330, kDim, kDimV, 23);
  const OwnedTensor q = last_queries(seq, lengths);
  Pool pool(seq, lengths, DType::kBF16);
  const std::int64_t all_free = 16;
  pool.cache.drop_front(pool.ids[0], 200);  // blocks 0..2 of 6
  const AttentionPlan plan =
      make_plan(paged_shape(pool.cache.shape(), 2, kHeadsQ, kSeqQ, 512), window_options(true));
  const std::vector<float> before = pool.run(plan, q);
  Pool twin(seq, lengths, DType::kBF16);
  twin.ids[0] = twin.cache.fork(twin.ids[0]);  // unrelated pool: the same run, undropped
  const SequenceId child = pool.cache.fork(pool.ids[0]);
  EXPECT_EQ(pool.cache.first_stored(child), 192);
  pool.cache.free(pool.ids[0]);
  pool.ids[0] = child;
  EXPECT_EQ(pool.run(plan, q), before);
  EXPECT_EQ(pool.run(plan, q), twin.run(plan, q));
  pool.cache.drop_front(child, 0);  // drops nothing more; dropping again is a no-op
  pool.cache.drop_front(child, 200);
  EXPECT_EQ(pool.cache.free_blocks(), all_free - 3 - 2);  // 3 left of sequence 0, 2 of 1
  pool.cache.free(child);
  pool.cache.free(pool.ids[1]);
  EXPECT_EQ(pool.cache.free_blocks(), all_free);
}

TEST(PagedDrop, ARunReachingADroppedPositionIsAnErrorThatWritesNothing) {
  const std::int64_t lengths[2] = {330, 97};
  const CacheSequence seq(2, kHeadsQ, kHeadsKv, 330, kDim, kDimV, 29);
  const OwnedTensor q = last_queries(seq, lengths);
  Pool pool(seq, lengths, DType::kF32);
  pool.cache.drop_front(pool.ids[0], 256);  // blocks 0..3: position 227 is gone
  OwnedTensor out = make_zeros(2, kHeadsQ, kSeqQ, kDimV);
  std::fill(out.storage.begin(), out.storage.end(), 7.0f);
  const auto run_with = [&](const AttentionOptions& o, const RunArgs& args = {}) {
    const AttentionPlan plan =
        make_plan(paged_shape(pool.cache.shape(), 2, kHeadsQ, kSeqQ, 512), o);
    plan.run(q.cview(), pool.cache, pool.ids, out.view, args);
  };
  expect_error([&] { run_with(window_options(true)); }, "sequences[0]",
               ErrorKind::kInvalidArgument);
  AttentionOptions dense;
  dense.rope = RotaryEmbedding{};
  expect_error([&] { run_with(dense); }, "sequences[0]", ErrorKind::kInvalidArgument);
  AttentionOptions global = window_options(true);
  global.variant = SlidingWindowSpec{40, 0, {5}};  // the window fits, the global token is gone
  expect_error([&] { run_with(global); }, "global token 5", ErrorKind::kInvalidArgument);
  // A query at a global position sees every key.
  AttentionOptions global_query = window_options(true);
  global_query.variant = SlidingWindowSpec{40, 0, {328}};
  expect_error([&] { run_with(global_query); }, "global position 328", ErrorKind::kInvalidArgument);
  // A window of 72: S_q = 3 queries start at 327 and reach 255 (dropped); one query (a ragged
  // batch, query_lengths {1, 3}) starts at 329 and reaches 257, which is stored.
  AttentionOptions w72 = window_options(true);
  w72.variant = SlidingWindowSpec{72, 0, {}};
  expect_error([&] { run_with(w72); }, "sequences[0]", ErrorKind::kInvalidArgument);
  for (const float x : out.storage) ASSERT_EQ(x, 7.0f) << "out was written";
  const std::int64_t counts[2] = {1, 3};
  run_with(w72, {.query_lengths = counts});
  // A narrower window runs.
  AttentionOptions narrow = window_options(true);
  narrow.variant = SlidingWindowSpec{60, 0, {}};
  run_with(narrow);
}

TEST(PagedDrop, BadArgumentsAreErrorsThatChangeNothing) {
  PagedKvCache pool({kHeadsKv, kDim, kDimV, 8, DType::kBF16});
  const SequenceId id = pool.add();
  std::vector<float> k(static_cast<std::size_t>(kHeadsKv * 130 * kDim), 0.5f);
  std::vector<float> v(static_cast<std::size_t>(kHeadsKv * 130 * kDimV), 0.25f);
  pool.append(id, bhsd<const float>(k.data(), 1, kHeadsKv, 130, kDim),
              bhsd<const float>(v.data(), 1, kHeadsKv, 130, kDimV));
  const std::int64_t free_before = pool.free_blocks();
  expect_error([&] { pool.drop_front(id, 131); }, "position", ErrorKind::kInvalidArgument);
  expect_error([&] { pool.drop_front(id, -1); }, "position", ErrorKind::kInvalidArgument);
  expect_error([&] { pool.drop_front(id + 1, 64); }, "sequence", ErrorKind::kInvalidArgument);
  expect_error([&] { (void)pool.first_stored(id + 1); }, "sequence", ErrorKind::kInvalidArgument);
  EXPECT_EQ(pool.free_blocks(), free_before);
  EXPECT_EQ(pool.first_stored(id), 0);
  pool.drop_front(id, 130);  // the whole blocks before the partial last one
  EXPECT_EQ(pool.first_stored(id), 128);
  EXPECT_EQ(pool.free_blocks(), free_before + 2);
  pool.free(id);
  expect_error([&] { pool.drop_front(id, 0); }, "sequence", ErrorKind::kInvalidArgument);
  EXPECT_EQ(pool.free_blocks(), 8);
}

}  // namespace
}  // namespace seqattn
