// Stride-0 (broadcast) views. Inputs may have stride 0 on any axis (check_view only asks for
// strides >= 0): the same K/V for every head or batch, one key or value row for the whole
// sequence, a row that is one repeated element. They must give the reference's answer over
// the same views, on every compiled Highway target. An output with stride 0 on an axis of
// extent > 1 aliases its own elements and must be refused (check_no_self_overlap in
// runtime/validate.cpp) with an Error naming the stride, writing nothing; on an axis of
// extent 1 a stride of 0 aliases nothing and is accepted.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reliability_support.hpp"
#include "tests/support/plan_call.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn::reliability {
namespace {

using seqattn::testing::for_each_target;

constexpr std::int64_t kB = 2, kHq = 4, kHkv = 2, kSq = 45, kSk = 70, kD = 20, kDv = 12;
const Extents kQ{kB, kHq, kSq, kD}, kK{kB, kHkv, kSk, kD}, kV{kB, kHkv, kSk, kDv};
const Extents kOut{kB, kHq, kSq, kDv}, kLse{kB, kHq, kSq, 1};

const Extents kQc = strides_for(kQ, 1), kKc = strides_for(kK, 1), kVc = strides_for(kV, 1);
constexpr Dims kDims{kB, kHq, kHkv, kSq, kSk, kD, kDv};

// Strides of q, k and v (out is contiguous).
struct Broadcast {
  std::string name;
  Extents q, k, v;
};

// The broadcasts over problem shapes `s` (S_q = S_k for a row that is self-attention only).
std::vector<Broadcast> broadcasts(const Shapes& s) {
  const std::int64_t sq = s.seq_q;
  const Extents qc = strides_for(s.q, 1), kc = strides_for(s.k, 1), vc = strides_for(s.v, 1);
  return {
      {"k, v head stride 0", qc, {kSk * kD, 0, kD, 1}, {kSk * kDv, 0, kDv, 1}},
      {"k, v batch stride 0", qc, {0, kSk * kD, kD, 1}, {0, kSk * kDv, kDv, 1}},
      {"k, v batch and head stride 0", qc, {0, 0, kD, 1}, {0, 0, kDv, 1}},
      {"q head stride 0", {sq * kD, 0, kD, 1}, kc, vc},
      {"k seq stride 0 (one key)", qc, {2 * kSk * kD, kSk * kD, 0, 1}, vc},
      {"v seq stride 0 (one value)", qc, kc, {2 * kSk * kDv, kSk * kDv, 0, 1}},
      {"q seq stride 0 (one query)", {kHq * kD, kD, 0, 1}, kc, vc},
      {"k innermost stride 0", qc, {kHkv * kSk, kSk, 1, 0}, vc},
      {"k, v every stride 0", qc, {0, 0, 0, 0}, {0, 0, 0, 0}},
  };
}
constexpr std::size_t kOneKey = 4, kOneValue = 5;  // indices into broadcasts()

template <class T = float>
Buffer<T> random_view(const Extents& shape, const Extents& strides, std::uint32_t seed) {
  Buffer<T> b = make_buffer<T>(shape, strides, 0, T(kNaN));
  fill_random(b, seed);
  return b;
}

TEST(StrideZero, BroadcastInputsMatchTheReferenceInEveryVariant) {
  for (const VariantTestCase& c : every_variant_case()) {
    SCOPED_TRACE(c.name);
    const Shapes s(kDims, c);
    const AttentionOptions options = c.options(kB, kSk);
    for (const Broadcast& bc : broadcasts(s)) {
      SCOPED_TRACE(bc.name);
      const Buffer<float> q = random_view(s.q, bc.q, 11), k = random_view(s.k, bc.k, 12),
                          v = random_view(s.v, bc.v, 13);
      const reference::Result ref =
          reference_for(c.spec, q.cview(), k.cview(), v.cview(), options.mask);
      for_each_target([&] {
        Buffer<float> out = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
        attend(q.cview(), k.cview(), v.cview(), out.view, options);
        const double error = reference::max_relative_error(out.view, ref);
        seqattn::testing::worst_error.add(error);
        EXPECT_LE(error, kTolerance);
      });
    }
  }
}

// Independent of the reference: with one key row for all positions every visible key has the
// same score, so softmax attention is the plain mean of the visible values; with one value row
// every row with a visible key is that row. For the rows whose keys are the caller's keys
// with per-key weights (those that report weights; Linformer mixes positions by E, linear
// attention's scores are no softmax, hierarchical's coarse keys are group means).
TEST(StrideZero, OneKeyGivesTheMeanOfTheValuesAndOneValueGivesThatValue) {
  for (const VariantTestCase& c : every_variant_case()) {
    if (!c.supports("weights")) continue;
    SCOPED_TRACE(c.name);
    const Shapes s(kDims, c);
    const std::vector<Broadcast> bcs = broadcasts(s);
    const Buffer<float> q = random_view(s.q, strides_for(s.q, 1), 21);
    const Buffer<float> v = random_view(s.v, strides_for(s.v, 1), 23);
    const Buffer<float> one_k = random_view(s.k, bcs[kOneKey].k, 22);
    const Buffer<float> k = random_view(s.k, strides_for(s.k, 1), 24);
    const Buffer<float> one_v = random_view(s.v, bcs[kOneValue].v, 25);
    const AttentionOptions options = c.options(kB, kSk);
    const reference::Result visible = reference_for(c.spec, q.cview(), k.cview(), v.cview(),
                                                    options.mask);  // only its weights' support
    for_each_target([&] {
      Buffer<float> mean = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
      Buffer<float> same = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
      attend(q.cview(), one_k.cview(), v.cview(), mean.view, options);
      attend(q.cview(), k.cview(), one_v.cview(), same.view, options);
      double err_mean = 0, err_same = 0;
      for (std::int64_t b = 0; b < kB; ++b)
        for (std::int64_t h = 0; h < kHq; ++h)
          for (std::int64_t i = 0; i < s.seq_q; ++i) {
            std::vector<double> sum(kDv, 0.0);
            std::int64_t n = 0;
            for (std::int64_t j = 0; j < kSk; ++j) {
              if (visible.weight_at(b, h, i, j) == 0) continue;  // hidden (exact 0 there)
              ++n;
              for (std::int64_t d = 0; d < kDv; ++d) sum[d] += v.view.at(b, h / 2, j, d);
            }
            for (std::int64_t d = 0; d < kDv; ++d) {
              const double want = n == 0 ? 0.0 : sum[d] / static_cast<double>(n);
              err_mean = std::max(err_mean, std::abs(mean.view.at(b, h, i, d) - want));
              const double row = n == 0 ? 0.0 : one_v.view.at(b, h / 2, 0, d);
              err_same = std::max(err_same, std::abs(same.view.at(b, h, i, d) - row));
            }
          }
      EXPECT_LE(err_mean, 1e-6);  // |v| < 1
      EXPECT_LE(err_same, 1e-6);
    });
  }
}

// The same data seen by both batches (batch stride 0 on q, k and v, no key lengths) gives the
// same rows bit for bit: every row is computed alone in a fixed order.
TEST(StrideZero, BatchBroadcastGivesBitwiseEqualBatches) {
  for (const VariantTestCase& c : every_variant_case()) {
    if (c.key_lengths) continue;
    SCOPED_TRACE(c.name);
    const Shapes s(kDims, c);
    const Buffer<float> q = random_view(s.q, {0, s.seq_q * kD, kD, 1}, 31);
    const Buffer<float> k = random_view(s.k, {0, kSk * kD, kD, 1}, 32);
    const Buffer<float> v = random_view(s.v, {0, kSk * kDv, kDv, 1}, 33);
    for_each_target([&] {
      Buffer<float> out = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
      attend(q.cview(), k.cview(), v.cview(), out.view, c.options(kB, kSk));
      TensorView<float> b0 = out.view, b1 = out.view;
      b0.shape[0] = b1.shape[0] = 1;
      b1.data = out.view.ptr(1, 0, 0);
      EXPECT_EQ(bit_differences(bits_of(b0), bits_of(b1)), 0);
    });
  }
}

// An out stride of 0 on an axis of extent > 1: refused, naming the stride, out untouched.
TEST(StrideZero, OutputWithStrideZeroIsRejectedWithoutWriting) {
  for (const VariantTestCase& c : every_variant_case()) {
    SCOPED_TRACE(c.name);
    const Shapes s(kDims, c);
    const Buffer<float> q = random_view(s.q, strides_for(s.q, 1), 41),
                        k = random_view(s.k, strides_for(s.k, 1), 42),
                        v = random_view(s.v, strides_for(s.v, 1), 43);
    const AttentionOptions options = c.options(kB, kSk);
    const testing::PlanCall call = testing::split_for_plan(options);
    const AttentionPlan plan = make_plan({kB, kHq, kHkv, s.seq_q, kSk, kD, kDv}, call.planned);
    for (int axis = 0; axis < 4; ++axis) {
      SCOPED_TRACE("axis " + std::to_string(axis));
      const std::string argument = "out.strides[" + std::to_string(axis) + "]";
      Extents strides = strides_for(s.out, 1);
      strides[axis] = 0;
      Buffer<float> out = make_buffer<float>(s.out, strides, 0, kOutSentinel);
      expect_error([&] { attend(q.cview(), k.cview(), v.cview(), out.view, options); }, argument);
      expect_error([&] { plan.run(q.cview(), k.cview(), v.cview(), out.view, call.args); },
                   argument);
      // A half out is checked before it is staged (F32Staging::output).
      Buffer<bfloat16> half = make_buffer<bfloat16>(s.out, strides, 0, bfloat16(kOutSentinel));
      expect_error([&] { attend(q.cview(), k.cview(), v.cview(), half.view, options); }, argument);
      EXPECT_EQ(out.storage[out.first], kOutSentinel);
      expect_untouched_outside(out, kOutSentinel, "out");
      EXPECT_EQ(half.storage[half.first].bits, bfloat16(kOutSentinel).bits);
    }
  }
}

TEST(StrideZero, LseAndWeightsWithStrideZeroAreRejected) {
  const Buffer<float> q = random_view(kQ, kQc, 51), k = random_view(kK, kKc, 52),
                      v = random_view(kV, kVc, 53);
  Buffer<float> out = make_buffer<float>(kOut, strides_for(kOut, 1), 0, kOutSentinel);
  for (int axis = 0; axis < 3; ++axis) {  // lse's last axis has extent 1
    Extents strides = strides_for(kLse, 1);
    strides[axis] = 0;
    Buffer<float> lse = make_buffer<float>(kLse, strides, 0, kOutSentinel);
    AttentionOptions options;
    options.lse = lse.view;
    expect_error([&] { attend(q.cview(), k.cview(), v.cview(), out.view, options); },
                 "lse.strides[" + std::to_string(axis) + "]");
  }
  const Extents w_shape{kB, kHq, kSq, kSk};
  for (int axis = 0; axis < 4; ++axis) {
    Extents strides = strides_for(w_shape, 1);
    strides[axis] = 0;
    Buffer<float> weights = make_buffer<float>(w_shape, strides, 0, kOutSentinel);
    AttentionOptions options;
    options.variant = SlidingWindowSpec{5, 5, {}};
    options.weights = weights.view;
    expect_error([&] { attend(q.cview(), k.cview(), v.cview(), out.view, options); },
                 "weights.strides[" + std::to_string(axis) + "]");
  }
  expect_untouched_outside(out, kOutSentinel, "out");
  EXPECT_EQ(out.storage[out.first], kOutSentinel);
}

// Over a KvCache the same rule holds (bind_outputs).
TEST(StrideZero, CacheRunOutputWithStrideZeroIsRejected) {
  KvCache cache({kB, kHkv, kSk, kD, kDv});
  const Buffer<float> k = random_view(kK, kKc, 61), v = random_view(kV, kVc, 62);
  cache.append(k.cview(), v.cview());
  const Buffer<float> q = random_view({kB, kHq, 3, kD}, strides_for({kB, kHq, 3, kD}, 1), 63);
  Extents strides = strides_for({kB, kHq, 3, kDv}, 1);
  strides[2] = 0;
  Buffer<float> out = make_buffer<float>({kB, kHq, 3, kDv}, strides, 0, kOutSentinel);
  expect_error([&] { attend(q.cview(), cache, out.view); }, "out.strides[2]");
  expect_untouched_outside(out, kOutSentinel, "out");
}

// Stride 0 on an axis of extent 1 aliases nothing: accepted, and the answer is the reference's.
TEST(StrideZero, OutputStrideZeroOnAnAxisOfExtentOneIsAccepted) {
  const Extents q_shape{1, kHq, kSq, kD}, k_shape{1, kHkv, kSk, kD}, v_shape{1, kHkv, kSk, kDv};
  const Extents o_shape{1, kHq, kSq, kDv}, l_shape{1, kHq, kSq, 1};
  const Buffer<float> q = random_view(q_shape, strides_for(q_shape, 1), 71);
  const Buffer<float> k = random_view(k_shape, strides_for(k_shape, 1), 72);
  const Buffer<float> v = random_view(v_shape, strides_for(v_shape, 1), 73);
  Buffer<float> out = make_buffer<float>(o_shape, {0, kSq * kDv, kDv, 1}, 0, kOutSentinel);
  Buffer<float> lse = make_buffer<float>(l_shape, {0, kSq, 1, 0}, 0, kOutSentinel);
  AttentionOptions options;
  options.lse = lse.view;
  attend(q.cview(), k.cview(), v.cview(), out.view, options);
  const reference::Result ref = reference_for(DenseSpec{}, q.cview(), k.cview(), v.cview(), {});
  EXPECT_LE(reference::max_relative_error(out.view, ref), kTolerance);
  EXPECT_LE(lse_error(lse.cview(), ref), kTolerance);
}

// Overlapping rows without a zero stride alias too (row stride 1 < D_v).
TEST(StrideZero, OverlappingOutputRowsAreRejected) {
  const Buffer<float> q = random_view(kQ, kQc, 81), k = random_view(kK, kKc, 82),
                      v = random_view(kV, kVc, 83);
  Buffer<float> out = make_buffer<float>(kOut, {kHq * kSq * kDv, kSq * kDv, 1, 1}, 0, 0.0f);
  try {
    attend(q.cview(), k.cview(), v.cview(), out.view);
    ADD_FAILURE() << "overlapping out rows accepted";
  } catch (const Error& e) {
    EXPECT_TRUE(e.argument() == "out.strides[2]" || e.argument() == "out.strides[3]") << e.what();
  }
}

}  // namespace
}  // namespace seqattn::reliability
