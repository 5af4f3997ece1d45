// Every bad argument raises seqattn::Error naming the argument, and leaves `out` untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "src/gemm/gemm.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::Layout;
using testing::make_tensor;
using testing::OwnedTensor;

constexpr float kSentinel = 12345.0f;

struct Case {
  OwnedTensor q = make_tensor(2, 4, 5, 8, Layout::kBHSD, 1);
  OwnedTensor k = make_tensor(2, 2, 6, 8, Layout::kBHSD, 2);
  OwnedTensor v = make_tensor(2, 2, 6, 3, Layout::kBHSD, 3);
  OwnedTensor out = make_tensor(2, 4, 5, 3, Layout::kBHSD, 4);
  AttentionOptions options;

  Case() { std::fill(out.storage.begin(), out.storage.end(), kSentinel); }
};

// Runs attend() expecting an Error whose message contains `argument_fragment` and
// `actual_fragment`, and checks that not one output element changed.
void expect_rejected(Case& c, const std::string& argument_fragment,
                     const std::string& actual_fragment,
                     ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    attend(c.q.cview(), c.k.cview(), c.v.cview(), c.out.view, c.options);
    ADD_FAILURE() << "no error for " << argument_fragment;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument_fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(actual_fragment), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
  }
  for (float x : c.out.storage) ASSERT_EQ(x, kSentinel) << "out was written before the error";
}

TEST(Validation, ValidCaseRuns) {
  Case c;
  EXPECT_NO_THROW(attend(c.q.cview(), c.k.cview(), c.v.cview(), c.out.view, c.options));
  EXPECT_NE(c.out.storage[0], kSentinel);
}

TEST(Validation, NullData) {
  Case c;
  c.k.view.data = nullptr;
  expect_rejected(c, "'k.data'", "nullptr");
}

TEST(Validation, ZeroAndNegativeSizes) {
  Case c;
  c.q.view.shape[2] = 0;
  expect_rejected(c, "q.shape[2] (seq)", "got 0");
  Case d;
  d.v.view.shape[3] = -3;
  expect_rejected(d, "v.shape[3] (dim)", "got -3");
}

TEST(Validation, NegativeStride) {
  Case c;
  c.q.view.strides[2] = -8;
  expect_rejected(c, "q.strides[2]", "got -8");
}

TEST(Validation, BatchMismatch) {
  Case c;
  c.k.view.shape[0] = 1;
  expect_rejected(c, "k.shape[0] (batch)", "got 1");
}

TEST(Validation, HeadsNotMultiple) {
  Case c;
  c.k = make_tensor(2, 3, 6, 8, Layout::kBHSD, 2);
  c.v = make_tensor(2, 3, 6, 3, Layout::kBHSD, 3);
  expect_rejected(c, "k.shape[1] (heads)", "got 3");
}

TEST(Validation, KeyValueMismatch) {
  Case c;
  c.v = make_tensor(2, 2, 7, 3, Layout::kBHSD, 3);
  expect_rejected(c, "v.shape[2] (seq)", "got 7");
  Case d;
  d.k = make_tensor(2, 2, 6, 9, Layout::kBHSD, 2);
  expect_rejected(d, "k.shape[3] (dim)", "got 9");
}

TEST(Validation, OutShape) {
  Case c;
  c.out.view.shape[3] = 8;  // D instead of D_v
  expect_rejected(c, "out.shape", "[2, 4, 5, 8]");
}

TEST(Validation, OutOverlapsInput) {
  Case c;
  const std::vector<float> q_before = c.q.storage;
  c.out.view = {c.q.storage.data(), {2, 4, 5, 3}, {160, 40, 8, 1}};  // out over q's memory
  try {
    attend(c.q.cview(), c.k.cview(), c.v.cview(), c.out.view, c.options);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'out'"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'q'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c.q.storage, q_before);
}

TEST(Validation, OutAliasesItself) {
  Case c;
  c.out.view.strides[1] = 0;  // four heads written to the same place
  expect_rejected(c, "out.strides[1]", "got 0");
}

TEST(Validation, SizeOverflow) {
  Case c;
  c.q.view.shape = {1LL << 40, 1LL << 40, 5, 8};
  expect_rejected(c, "q.shape", "[1099511627776, 1099511627776, 5, 8]");
}

TEST(Validation, KeyLengths) {
  Case c;
  c.options.mask.key_lengths = {6};
  expect_rejected(c, "mask.key_lengths.size()", "got 1");
  Case d;
  d.options.mask.key_lengths = {3, 7};
  expect_rejected(d, "mask.key_lengths[1]", "got 7");
  Case e;
  e.options.mask.key_lengths = {-1, 3};
  expect_rejected(e, "mask.key_lengths[0]", "got -1");
}

TEST(Validation, MaskAndBiasShapes) {
  std::vector<std::uint8_t> keep(2 * 4 * 5 * 6, 1);
  Case c;
  c.options.mask.keep = TensorView<const std::uint8_t>{keep.data(), {2, 4, 5, 5}, {120, 30, 6, 1}};
  expect_rejected(c, "mask.keep.shape[3] (S_k)", "got 5");
  Case d;
  d.options.mask.keep = TensorView<const std::uint8_t>{keep.data(), {2, 3, 5, 6}, {120, 30, 6, 1}};
  expect_rejected(d, "mask.keep.shape[1] (heads)", "got 3");
  OwnedTensor bias = make_tensor(3, 1, 5, 6, Layout::kBHSD, 9);
  Case e;
  e.options.mask.bias = bias.cview();
  expect_rejected(e, "mask.bias.shape[0] (batch)", "got 3");
  // Mask axes are named as the mask's own (S_q, S_k), not a tensor's (seq, dim).
  OwnedTensor short_bias = make_tensor(1, 1, 4, 6, Layout::kBHSD, 9);
  Case f;
  f.options.mask.bias = short_bias.cview();
  expect_rejected(f, "mask.bias.shape[2] (S_q)", "got 4");
}

TEST(Validation, WeightsAndLseShapes) {
  OwnedTensor w = make_tensor(2, 4, 5, 5, Layout::kBHSD, 9);
  Case c;
  c.options.weights = w.view;
  expect_rejected(c, "weights.shape", "[2, 4, 5, 5]");
  OwnedTensor l = make_tensor(2, 4, 5, 2, Layout::kBHSD, 9);
  Case d;
  d.options.lse = l.view;
  expect_rejected(d, "lse.shape", "[2, 4, 5, 2]");
}

TEST(Validation, ScaleAndThreads) {
  Case c;
  c.options.scale = std::numeric_limits<float>::quiet_NaN();
  expect_rejected(c, "'scale'", "nan");
  Case d;
  d.options.threads = -2;
  expect_rejected(d, "'threads'", "got -2");
}

TEST(Validation, UnknownNames) {
  EXPECT_THROW(parse_variant("flash"), Error);
  EXPECT_THROW(parse_feature_map("softmax"), Error);
  EXPECT_EQ(parse_variant("sliding-window"), Variant::kSlidingWindow);
  EXPECT_EQ(parse_feature_map("favor"), FeatureMap::kFavor);
}

TEST(Validation, MergePartialsShapes) {
  OwnedTensor a = make_tensor(1, 2, 3, 4, Layout::kBHSD, 1);
  OwnedTensor la = make_tensor(1, 2, 3, 1, Layout::kBHSD, 2);
  OwnedTensor b = make_tensor(1, 2, 4, 4, Layout::kBHSD, 3);
  EXPECT_THROW(merge_partials(a.cview(), la.cview(), b.cview(), la.cview(), a.view, la.view),
               Error);
}

}  // namespace
}  // namespace seqattn

namespace seqattn {
namespace {

// A thread count that reaches the OpenMP runtime is clamped to max_team_threads() = min(4 ×
// processors, OMP_THREAD_LIMIT) (docs/architecture.md): 100000 used to overflow the runtime's
// stack and 1 << 30 made it call exit(1). The result does not depend on the count, and
// RunRecord::threads says which team ran.
TEST(Threads, HugeCountsAreClampedAndGiveTheSameResult) {
  const int cap = 4 * std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  Case base;
  base.options.threads = 1;
  attend(base.q.cview(), base.k.cview(), base.v.cview(), base.out.view, base.options);
  for (const int threads : {100000, 1 << 30, std::numeric_limits<int>::max()}) {
    SCOPED_TRACE(threads);
    Case c;
    c.options.threads = threads;
    const RunRecord r = attend(c.q.cview(), c.k.cview(), c.v.cview(), c.out.view, c.options);
    EXPECT_LE(r.threads, cap);
    EXPECT_GE(r.threads, 1);
    EXPECT_EQ(c.out.storage, base.out.storage);

    // The cache path, the recurrent linear state and the MHA layer (projection GEMMs) too.
    KvCache cache({2, 2, 16, 8, 3});
    cache.append(c.k.cview(), c.v.cview());
    const RunRecord rc = attend(c.q.cview(), cache, c.out.view, c.options);
    EXPECT_LE(rc.threads, cap);
    LinearAttentionState state(LinearSpec{}, {2, 4, 2, 8, 3}, std::nullopt, threads);
    const OwnedTensor q6 = make_tensor(2, 4, 6, 8, Layout::kBHSD, 5);
    OwnedTensor out6 = make_tensor(2, 4, 6, 3, Layout::kBHSD, 6);
    state.step(q6.cview(), c.k.cview(), c.v.cview(), out6.view);
    EXPECT_TRUE(std::isfinite(out6.view.at(1, 3, 5, 2)));
    MhaConfig config;
    config.d_model = 8;
    config.num_heads = 2;
    config.threads = threads;
    MultiHeadAttention layer(config);
    std::vector<float> w(64, 0.125f), x(2 * 5 * 8, 0.5f), y(x.size());
    for (const Projection p :
         {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
      layer.set_weights(p, w.data(), 8, 8);
    }
    layer.forward(SequenceView<const float>{x.data(), 2, 5, 8, 8},
                  SequenceView<float>{y.data(), 2, 5, 8, 8});
    EXPECT_NEAR(y[0], 0.5f, 1e-5f);  // constant rows: attention averages equal values
  }
  Case c;
  c.options.threads = -1;
  expect_rejected(c, "'threads'", "got -1");
}

}  // namespace
}  // namespace seqattn

namespace seqattn {
namespace {

// Sizes whose products overflow are Errors naming the argument, never std::bad_alloc, a
// wrapped-around allocation or an internal operand's name.
TEST(Sizes, MhaOverflowingSequencesAreErrors) {
  MhaConfig config;
  config.d_model = 8;
  config.num_heads = 2;
  MultiHeadAttention layer(config);
  std::vector<float> w(64, 0.125f), x(64), y(64);
  for (const Projection p :
       {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
    layer.set_weights(p, w.data(), 8, 8);
  }
  const std::int64_t huge = std::int64_t{1} << 40;
  for (const auto& [batch, seq] : {std::pair{huge, huge}, std::pair{std::int64_t{1} << 31, huge}}) {
    try {
      layer.forward(SequenceView<const float>{x.data(), batch, seq, 8, 8},
                    SequenceView<float>{y.data(), batch, seq, 8, 8});
      ADD_FAILURE() << "no error for batch " << batch << " seq " << seq;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("'x (batch x seq x row stride)'"), std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(std::all_of(y.begin(), y.end(), [](float v) { return v == 0.0f; }));
}

// The public random-matrix functions size their outputs through the same checked helper.
TEST(Sizes, RandomMatricesWithOverflowingSizesAreErrors) {
  const std::int64_t huge = std::int64_t{1} << 40;
  const auto expect_size_error = [](const auto& call, const std::string& argument) {
    try {
      call();
      ADD_FAILURE() << "no error for " << argument;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(std::string(e.what()).find("'" + argument + "'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("2^62"), std::string::npos) << e.what();
    }
  };
  expect_size_error([&] { favor_random_matrix(huge, huge, 0); }, "m x d");
  expect_size_error([&] { linformer_random_projection(huge, huge, 0); }, "k x s");
}

// The GEMM checks that every operand's rows x leading dimension is addressable.
TEST(Sizes, GemmOperandsBeyondTwoToThe62AreErrors) {
  float a = 0, b = 0, c = 0;
  const std::int64_t huge = std::int64_t{1} << 40;
  try {
    detail::sgemm(detail::Transpose::kNo, detail::Transpose::kNo, huge, 1, 1, 1.0f, &a, 1, &b, 1,
                  0.0f, &c, huge, 1);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'c (rows x ldc)'"), std::string::npos) << e.what();
  }
  EXPECT_EQ(c, 0.0f);
}

}  // namespace
}  // namespace seqattn
