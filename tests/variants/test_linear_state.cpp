// The recurrent form: stepping a LinearAttentionState through a sequence, in pieces of any
// length, equals attend() with causal linear attention over the whole sequence.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "linear_test_cases.hpp"
#include "target_loop.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

// Rows [s0, s0 + n) of a view (same strides).
template <class T>
TensorView<T> rows(const TensorView<T>& t, std::int64_t s0, std::int64_t n) {
  TensorView<T> r = t;
  r.data = t.ptr(0, 0, s0);
  r.shape[2] = n;
  return r;
}

// Runs the state over the sequence in the given piece lengths (cycled) and returns the output.
OwnedTensor run_steps(const LinearCase& c, const LinearInputs& in,
                      const std::vector<std::int64_t>& pieces) {
  LinearAttentionState state(in.spec, {c.batch, c.heads_q, c.heads_kv, c.dim, c.dim_v});
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v, c.layout, c.pad);
  std::size_t next = 0;
  for (std::int64_t s0 = 0; s0 < c.seq_q;) {
    const std::int64_t n = std::min(pieces[next++ % pieces.size()], c.seq_q - s0);
    state.step(rows(in.q.cview(), s0, n), rows(in.k.cview(), s0, n), rows(in.v.cview(), s0, n),
               rows(out.view, s0, n));
    s0 += n;
  }
  EXPECT_EQ(state.position(), c.seq_q);
  return out;
}

OwnedTensor run_batch(const LinearCase& c, const LinearInputs& in) {
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v, c.layout, c.pad);
  AttentionOptions opt;
  opt.variant = in.spec;
  opt.mask.causal = true;
  attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
  return out;
}

double max_difference(const OwnedTensor& a, const OwnedTensor& b) {
  double err = 0, scale = 1e-30;
  for (std::size_t i = 0; i < a.storage.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a.storage[i]) - b.storage[i]));
    scale = std::max(scale, std::abs(static_cast<double>(b.storage[i])));
  }
  return err / scale;
}

LinearCase stream_case(FeatureMap map) {
  LinearCase c;
  c.map = map;
  c.features = map == FeatureMap::kFavor ? 24 : 0;
  c.causal = true;
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq_q = c.seq_k = 150;
  c.dim = 17;
  c.dim_v = 9;
  return c;
}

TEST(LinearState, StepsEqualBatchCausalOnEveryTarget) {
  for (FeatureMap map : {FeatureMap::kElu1, FeatureMap::kRelu, FeatureMap::kFavor}) {
    const LinearCase c = stream_case(map);
    const LinearInputs in = make_linear_inputs(c, 7);
    const reference::Result ref = linear_reference(c, in);
    for_each_target([&] {
      const OwnedTensor batch = run_batch(c, in);
      for (const auto& pieces : std::vector<std::vector<std::int64_t>>{{1}, {3, 17}, {64, 65, 1}}) {
        const OwnedTensor steps = run_steps(c, in, pieces);
        EXPECT_LE(max_difference(steps, batch), kTolerance) << describe(c);
        const double error = reference::max_relative_error(steps.view, ref);
        worst_error.add(error);
        EXPECT_LE(error, kTolerance) << describe(c);
      }
    });
  }
}

TEST(LinearState, BshdPaddedViews) {
  LinearCase c = stream_case(FeatureMap::kElu1);
  c.layout = Layout::kBSHD;
  c.pad = 3;
  c.dim = c.dim_v = 64;
  const LinearInputs in = make_linear_inputs(c, 8);
  EXPECT_LE(max_difference(run_steps(c, in, {5, 40}), run_batch(c, in)), kTolerance);
}

TEST(LinearState, FavorStabiliserRescalesWhenKeysGrow) {
  // Later keys have larger norms, so the running key stabiliser rises during the stream and
  // the stored state is rescaled many times.
  LinearCase c = stream_case(FeatureMap::kFavor);
  c.dim = 64;
  LinearInputs in = make_linear_inputs(c, 9);
  for (std::int64_t b = 0; b < c.batch; ++b)
    for (std::int64_t h = 0; h < c.heads_kv; ++h)
      for (std::int64_t s = 0; s < c.seq_k; ++s)
        for (std::int64_t d = 0; d < c.dim; ++d) in.k.view.at(b, h, s, d) *= 1.0f + s / 40.0f;
  const reference::Result ref = linear_reference(c, in);
  const OwnedTensor steps = run_steps(c, in, {1, 7});
  EXPECT_LE(reference::max_relative_error(steps.view, ref), 1e-4);
  EXPECT_LE(max_difference(steps, run_batch(c, in)), 1e-4);
}

TEST(LinearState, ResetAndShapeErrors) {
  const LinearCase c = stream_case(FeatureMap::kElu1);
  const LinearInputs in = make_linear_inputs(c, 10);
  LinearAttentionState state(in.spec, {c.batch, c.heads_q, c.heads_kv, c.dim, c.dim_v});
  OwnedTensor a = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v);
  OwnedTensor b = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v);
  state.step(in.q.cview(), in.k.cview(), in.v.cview(), a.view);
  state.reset();
  EXPECT_EQ(state.position(), 0);
  state.step(in.q.cview(), in.k.cview(), in.v.cview(), b.view);
  EXPECT_EQ(a.storage, b.storage);

  OwnedTensor wrong = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v + 1);
  EXPECT_THROW(state.step(in.q.cview(), in.k.cview(), in.v.cview(), wrong.view), Error);
  const OwnedTensor short_k = make_zeros(c.batch, c.heads_kv, c.seq_q - 1, c.dim);
  try {
    state.step(in.q.cview(), short_k.cview(), in.v.cview(), a.view);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "k.shape");
  }
  EXPECT_EQ(state.position(), c.seq_q);  // failed steps consume nothing
  EXPECT_THROW(LinearAttentionState(in.spec, {1, 3, 2, 4, 4}), Error);
  LinearSpec bad;
  bad.feature_map = FeatureMap::kFavor;
  bad.num_features = -1;
  EXPECT_THROW(LinearAttentionState(bad, {1, 1, 1, 4, 4}), Error);
}

}  // namespace
}  // namespace seqattn::testing
