// ring_attention under mpirun (2 and 4 processes, see CMakeLists.txt): every rank's shard
// equals the rows of single-process attend() over the whole sequence, for dense (contiguous
// shards) and causal (zig-zag) attention, GQA, odd lengths, key_lengths and sliding windows;
// bad arguments on one rank throw on every rank without a hang.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/mpi/ring.hpp"
#include "seqattn/seqattn.hpp"

namespace seqattn::mpi {
namespace {

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int ranks() {
  int s = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &s);
  return s;
}

struct Case {
  std::int64_t b = 2, h = 4, h_kv = 2, s = 37, d = 16, d_v = 8;
};

// Every rank draws the same whole-sequence tensors (same seed) and the single-process result.
struct Whole {
  Case c;
  std::vector<float> q, k, v, out;
  Whole(const Case& c_, const AttentionOptions& o) : c(c_) {
    std::mt19937 gen(1234);
    std::normal_distribution<float> n;
    auto fill = [&](std::vector<float>& x, std::int64_t size) {
      x.resize(static_cast<std::size_t>(size));
      for (float& e : x) e = n(gen);
    };
    fill(q, c.b * c.h * c.s * c.d);
    fill(k, c.b * c.h_kv * c.s * c.d);
    fill(v, c.b * c.h_kv * c.s * c.d_v);
    out.resize(static_cast<std::size_t>(c.b * c.h * c.s * c.d_v));
    attend(qv(), kv(), vv(), bhsd(out.data(), c.b, c.h, c.s, c.d_v), o);
  }
  ConstTensor qv() const { return bhsd<const float>(q.data(), c.b, c.h, c.s, c.d); }
  ConstTensor kv() const { return bhsd<const float>(k.data(), c.b, c.h_kv, c.s, c.d); }
  ConstTensor vv() const { return bhsd<const float>(v.data(), c.b, c.h_kv, c.s, c.d_v); }
};

// This rank's shards, cut by shard() from the root's tensors, and the ring's result.
struct Shards {
  std::int64_t n;
  std::vector<float> q, k, v, out;
  ShardLayout layout;
  RingRecord record;
  Shards(const Whole& w, const AttentionOptions& o)
      : layout(shard_layout(w.c.s, ranks(), default_sharding(o))) {
    const Case& c = w.c;
    n = layout.shard_length(rank());
    q.resize(static_cast<std::size_t>(c.b * c.h * n * c.d));
    k.resize(static_cast<std::size_t>(c.b * c.h_kv * n * c.d));
    v.resize(static_cast<std::size_t>(c.b * c.h_kv * n * c.d_v));
    out.assign(static_cast<std::size_t>(c.b * c.h * n * c.d_v), -1.0f);
    shard(MPI_COMM_WORLD, 0, w.qv(), bhsd(q.data(), c.b, c.h, n, c.d), layout);
    shard(MPI_COMM_WORLD, 0, w.kv(), bhsd(k.data(), c.b, c.h_kv, n, c.d), layout);
    shard(MPI_COMM_WORLD, 0, w.vv(), bhsd(v.data(), c.b, c.h_kv, n, c.d_v), layout);
  }
  RingRecord run(const Case& c, const AttentionOptions& o) {
    return ring_attention(MPI_COMM_WORLD, bhsd<const float>(q.data(), c.b, c.h, n, c.d),
                          bhsd<const float>(k.data(), c.b, c.h_kv, n, c.d),
                          bhsd<const float>(v.data(), c.b, c.h_kv, n, c.d_v),
                          bhsd(out.data(), c.b, c.h, n, c.d_v), o);
  }
};

// The largest |ring - whole| over this rank's rows.
double shard_error(const Whole& w, const Shards& s) {
  const Case& c = w.c;
  const ConstTensor mine = bhsd<const float>(s.out.data(), c.b, c.h, s.n, c.d_v);
  const ConstTensor whole = bhsd<const float>(w.out.data(), c.b, c.h, c.s, c.d_v);
  double worst = 0;
  for (std::int64_t b = 0; b < c.b; ++b)
    for (std::int64_t h = 0; h < c.h; ++h) {
      std::int64_t row = 0;
      for (const auto& p : s.layout.pieces[static_cast<std::size_t>(rank())])
        for (std::int64_t i = 0; i < p.length; ++i, ++row)
          for (std::int64_t e = 0; e < c.d_v; ++e)
            worst = std::max(
                worst, std::abs(double(mine.at(b, h, row, e)) - whole.at(b, h, p.start + i, e)));
    }
  return worst;
}

void expect_equal_to_whole(const Case& c, const AttentionOptions& o) {
  const Whole w(c, o);
  Shards s(w, o);
  s.record = s.run(c, o);
  EXPECT_LE(shard_error(w, s), 1e-5) << "rank " << rank();
  if (std::holds_alternative<DenseSpec>(o.variant)) {
    EXPECT_EQ(s.record.steps, ranks());
  }
  const std::vector<float> first = s.out;
  s.run(c, o);
  EXPECT_EQ(first, s.out) << "repeated runs differ on rank " << rank();
  // The plan form gives the same bits and keeps its block plans: a second run makes none.
  const RingPlan plan = make_ring_plan(MPI_COMM_WORLD, {c.b, c.h, c.h_kv, s.n, s.n, c.d, c.d_v}, o);
  for (int i = 0; i < 2; ++i) {
    std::fill(s.out.begin(), s.out.end(), -1.0f);
    const RingRecord r = plan.run(bhsd<const float>(s.q.data(), c.b, c.h, s.n, c.d),
                                  bhsd<const float>(s.k.data(), c.b, c.h_kv, s.n, c.d),
                                  bhsd<const float>(s.v.data(), c.b, c.h_kv, s.n, c.d_v),
                                  bhsd(s.out.data(), c.b, c.h, s.n, c.d_v));
    EXPECT_EQ(first, s.out) << "RingPlan run " << i << " on rank " << rank();
    EXPECT_EQ(r.plans_made, i == 0 ? s.record.plans_made : 0) << "rank " << rank();
  }
  // unshard gathers the ring's result back into the whole sequence on the root.
  std::vector<float> gathered(w.out.size(), 0.0f);
  unshard(MPI_COMM_WORLD, 0, bhsd<const float>(s.out.data(), c.b, c.h, s.n, c.d_v),
          bhsd(gathered.data(), c.b, c.h, c.s, c.d_v), s.layout);
  if (rank() == 0) {
    double worst = 0;
    for (std::size_t i = 0; i < gathered.size(); ++i)
      worst = std::max(worst, std::abs(double(gathered[i]) - w.out[i]));
    EXPECT_LE(worst, 1e-5);
  }
}

TEST(RingAttention, DenseContiguousShardsGqaOddLength) {
  expect_equal_to_whole({}, {});
  expect_equal_to_whole({1, 3, 1, 1 * 8 + 3, 80, 17}, {});  // D = 80, MQA
}

TEST(RingAttention, CausalZigZagShards) {
  AttentionOptions o;
  o.mask.causal = true;
  EXPECT_EQ(default_sharding(o), Sharding::kZigZag);
  expect_equal_to_whole({}, o);
  expect_equal_to_whole({1, 2, 2, 64, 32, 32}, o);
}

TEST(RingAttention, KeyLengthsCausalAndNot) {
  AttentionOptions o;
  o.mask.key_lengths = {37, 13};
  expect_equal_to_whole({}, o);
  o.mask.causal = true;
  o.mask.key_lengths = {5, 30};
  expect_equal_to_whole({}, o);
}

TEST(RingAttention, SlidingWindowExchangesOnlyTheBand) {
  AttentionOptions o;
  o.variant = SlidingWindowSpec{5, 3, {}};
  expect_equal_to_whole({2, 4, 2, 41, 16, 16}, o);
  o.variant = SlidingWindowSpec{6, 0, {}};  // causal window
  expect_equal_to_whole({2, 4, 2, 41, 16, 16}, o);
  o.variant = SlidingWindowSpec{25, 17, {}};  // reaches past the neighbours at 4 ranks
  o.mask.key_lengths = {41, 30};
  expect_equal_to_whole({2, 4, 2, 41, 16, 16}, o);
  o.variant = SlidingWindowSpec{4, 4, {}};
  o.mask.causal = true;
  o.mask.key_lengths.clear();
  expect_equal_to_whole({1, 2, 1, 50, 8, 8}, o);
}

TEST(RingAttention, BandSendsFewerBytesThanTheRing) {
  const Case c{1, 2, 2, 400, 16, 16};
  AttentionOptions o;
  o.variant = SlidingWindowSpec{8, 8, {}};
  const Whole w(c, o);
  Shards s(w, o);
  const RingRecord r = s.run(c, o);
  // At most two neighbours' 8-row slabs of K and V.
  EXPECT_LE(r.bytes_sent, 2.0 * 8 * 2 * c.h_kv * (c.d + c.d_v) * sizeof(float));
  EXPECT_LE(shard_error(w, s), 1e-5);
}

TEST(RingAttention, MismatchedShapesOnOneRankThrowOnEveryRank) {
  const Case c{};
  const AttentionOptions o;
  const Whole w(c, o);
  Shards s(w, o);
  const std::int64_t d = rank() == 1 ? c.d / 2 : c.d;  // rank 1 passes the wrong D
  try {
    ring_attention(MPI_COMM_WORLD, bhsd<const float>(s.q.data(), c.b, c.h, s.n, d),
                   bhsd<const float>(s.k.data(), c.b, c.h_kv, s.n, d),
                   bhsd<const float>(s.v.data(), c.b, c.h_kv, s.n, c.d_v),
                   bhsd(s.out.data(), c.b, c.h, s.n, c.d_v), o);
    ADD_FAILURE() << "no Error on rank " << rank();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 1"), std::string::npos) << e.what();
  }
  for (float x : s.out) ASSERT_EQ(x, -1.0f);  // nothing written
}

TEST(RingAttention, LocalRefusalOnOneRankThrowsOnEveryRank) {
  const Case c{};
  AttentionOptions o;
  const Whole w(c, o);
  Shards s(w, o);
  if (rank() == ranks() - 1) o.scale = -1.0f;  // only the last rank's call is bad
  EXPECT_THROW(s.run(c, o), Error);
  AttentionOptions globals;
  globals.variant = SlidingWindowSpec{4, 4, {0}};
  try {
    s.run(c, globals);
    ADD_FAILURE() << "global tokens ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kNotImplemented);
  }
  for (float x : s.out) ASSERT_EQ(x, -1.0f);
}

TEST(RingAttention, WrongShardLengthNamesTheLayout) {
  const Case c{1, 1, 1, 20, 8, 8};
  const AttentionOptions o;
  std::vector<float> buf(static_cast<std::size_t>(30 * 8), 0.5f), out(buf.size());
  const std::int64_t n = rank() == 0 ? 30 / ranks() + 1 : 20 / ranks();  // rank 0 one too long
  try {
    ring_attention(MPI_COMM_WORLD, bhsd<const float>(buf.data(), 1, 1, n, 8),
                   bhsd<const float>(buf.data(), 1, 1, n, 8),
                   bhsd<const float>(buf.data(), 1, 1, n, 8), bhsd(out.data(), 1, 1, n, 8), o);
    ADD_FAILURE() << "no Error on rank " << rank();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shard"), std::string::npos) << e.what();
  }
  (void)c;
}

TEST(RingPlan, RunsLikeRingAttentionAndChecksItsViewsOnEveryRank) {
  const Case c{};
  AttentionOptions o;
  o.mask.causal = true;
  o.mask.key_lengths = {37, 21};
  const Whole w(c, o);
  Shards s(w, o);
  s.run(c, o);
  const std::vector<float> once = s.out;
  const RingPlan plan = make_ring_plan(MPI_COMM_WORLD, {c.b, c.h, c.h_kv, s.n, s.n, c.d, c.d_v}, o);
  EXPECT_EQ(plan.layout().sharding, Sharding::kZigZag);
  std::fill(s.out.begin(), s.out.end(), -1.0f);
  for (int i = 0; i < 2; ++i) {
    const RingRecord r = plan.run(bhsd<const float>(s.q.data(), c.b, c.h, s.n, c.d),
                                  bhsd<const float>(s.k.data(), c.b, c.h_kv, s.n, c.d),
                                  bhsd<const float>(s.v.data(), c.b, c.h_kv, s.n, c.d_v),
                                  bhsd(s.out.data(), c.b, c.h, s.n, c.d_v));
    EXPECT_EQ(s.out, once);
    // The first run plans its blocks (the local causal one at least); the second reuses them.
    if (i == 0) {
      EXPECT_GE(r.plans_made, 1) << "rank " << rank();
    } else {
      EXPECT_EQ(r.plans_made, 0) << "rank " << rank();
    }
  }
  // One rank hands the plan an out that aliases its q: every rank throws, nothing is written.
  const std::vector<float> before = s.out;
  float* out = rank() == 0 ? s.q.data() : s.out.data();
  EXPECT_THROW(plan.run(bhsd<const float>(s.q.data(), c.b, c.h, s.n, c.d),
                        bhsd<const float>(s.k.data(), c.b, c.h_kv, s.n, c.d),
                        bhsd<const float>(s.v.data(), c.b, c.h_kv, s.n, c.d_v),
                        bhsd(out, c.b, c.h, s.n, c.d_v)),
               Error);
  EXPECT_EQ(s.out, before);
}

TEST(ShardLayout, ZigZagBalancesAndCoversTheSequence) {
  const ShardLayout l = shard_layout(37, 4, Sharding::kZigZag);
  std::vector<int> seen(37, 0);
  for (int r = 0; r < 4; ++r) {
    ASSERT_EQ(l.pieces[static_cast<std::size_t>(r)].size(), 2u);
    EXPECT_NEAR(static_cast<double>(l.shard_length(r)), 37.0 / 4, 1.0);
    for (const auto& p : l.pieces[static_cast<std::size_t>(r)])
      for (std::int64_t i = p.start; i < p.start + p.length; ++i) ++seen[static_cast<size_t>(i)];
  }
  for (int x : seen) EXPECT_EQ(x, 1);
  EXPECT_EQ(l.pieces[0][0].start, 0);
  EXPECT_EQ(l.pieces[0][1].start + l.pieces[0][1].length, 37);  // rank 0 also holds the end
  EXPECT_THROW(shard_layout(7, 4, Sharding::kZigZag), Error);
}

}  // namespace
}  // namespace seqattn::mpi

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank != 0) {  // one rank prints; every rank's failures still fail the exit code
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int failed = RUN_ALL_TESTS();
  int any = 0;
  MPI_Allreduce(&failed, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any && failed == 0 && rank == 0) std::printf("a test failed on another rank\n");
  MPI_Finalize();
  return any;
}
