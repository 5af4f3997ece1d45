// Bad RoPE / ALiBi options: each an Error naming the option, the expected and the actual
// value, with the output left untouched and the cache unchanged.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>

#include "seqattn/seqattn.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn {
namespace {

using testing::Layout;
using testing::make_tensor;
using testing::make_zeros;
using testing::OwnedTensor;

constexpr float kSentinel = 777.0f;

struct Fixture {
  OwnedTensor q = make_tensor(1, 4, 9, 16, Layout::kBHSD, 1);
  OwnedTensor k = make_tensor(1, 2, 9, 16, Layout::kBHSD, 2);
  OwnedTensor v = make_tensor(1, 2, 9, 16, Layout::kBHSD, 3);
  OwnedTensor out = make_zeros(1, 4, 9, 16);
  Fixture() { std::fill(out.storage.begin(), out.storage.end(), kSentinel); }

  // attend() with `o` must throw an Error of `kind` naming `argument` and write nothing.
  void expect_error(const AttentionOptions& o, const std::string& argument,
                    ErrorKind kind = ErrorKind::kInvalidArgument) {
    try {
      attend(q.view, k.view, v.view, out.view, o);
      ADD_FAILURE() << "no error for " << argument;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), kind) << e.what();
      EXPECT_EQ(e.argument(), argument) << e.what();
      EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
    }
    for (const float x : out.storage) ASSERT_EQ(x, kSentinel) << "output written on error";
  }
};

AttentionOptions with_rope(const RotaryEmbedding& r) {
  AttentionOptions o;
  o.rope = r;
  return o;
}

TEST(PositionalErrors, BadRotaryOptions) {
  Fixture f;
  for (const double theta : {0.0, -1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    RotaryEmbedding r;
    r.theta = theta;
    f.expect_error(with_rope(r), "options.rope.theta");
  }
  for (const std::int64_t dims : {-2, 1, 3, 15, 18, 32}) {  // odd, negative or > D = 16
    RotaryEmbedding r;
    r.dims = dims;
    f.expect_error(with_rope(r), "options.rope.dims");
  }
  for (const double scaling : {0.0, -2.0, std::nan("")}) {
    RotaryEmbedding r;
    r.linear_scaling = scaling;
    f.expect_error(with_rope(r), "options.rope.linear_scaling");
  }
  RotaryEmbedding r;
  r.offset = -1;
  f.expect_error(with_rope(r), "options.rope.offset");
  r = {};
  r.q_positions = {0, 1, 2};  // 3 for S_q = 9
  f.expect_error(with_rope(r), "options.rope.q_positions.size()");
  r = {};
  r.k_positions.assign(9, 4);
  r.k_positions[5] = -3;
  f.expect_error(with_rope(r), "options.rope.k_positions[5]");
}

TEST(PositionalErrors, OddHeadDimNeedsExplicitDims) {
  const OwnedTensor q = make_tensor(1, 1, 4, 5, Layout::kBHSD, 1);
  const OwnedTensor k = make_tensor(1, 1, 4, 5, Layout::kBHSD, 2);
  OwnedTensor out = make_zeros(1, 1, 4, 5);
  AttentionOptions o;
  o.rope = RotaryEmbedding{};
  EXPECT_THROW(attend(q.view, k.view, k.view, out.view, o), Error);
  o.rope->dims = 4;  // the first 4 of 5 dimensions rotate
  EXPECT_NO_THROW(attend(q.view, k.view, k.view, out.view, o));
}

TEST(PositionalErrors, BadAlibiSlopes) {
  Fixture f;
  AttentionOptions o;
  o.alibi = Alibi{{0.5f, 0.25f}, {}};  // 2 slopes for 4 query heads
  f.expect_error(o, "options.alibi.slopes.size()");
  o.alibi = Alibi{{0.5f, 0.25f, std::nanf(""), 0.1f}, {}};
  f.expect_error(o, "options.alibi.slopes[2]");
  EXPECT_THROW(alibi_slopes(0), Error);
}

// Linear attention and Linformer take RoPE (validated as for dense) but have no key distance
// for ALiBi to bias: kUnsupported, naming options.alibi.
TEST(PositionalErrors, LinearAndLinformerRefuseAlibi) {
  Fixture f;
  for (const VariantSpec& spec : {VariantSpec{LinearSpec{}}, VariantSpec{LinformerSpec{4, 1}}}) {
    AttentionOptions o;
    o.variant = spec;
    o.alibi = Alibi{};
    f.expect_error(o, "options.alibi", ErrorKind::kUnsupported);
    RotaryEmbedding bad;
    bad.theta = -1.0;
    o = with_rope(bad);
    o.variant = spec;
    f.expect_error(o, "options.rope.theta");
  }
}

TEST(PositionalErrors, CacheAndPlanMustRotateAlike) {
  RotaryEmbedding r;
  r.dims = 8;
  RotaryEmbedding negative;
  negative.theta = -5.0;
  EXPECT_THROW(KvCache({1, 1, 64, 16, 16, DType::kF32, negative}), Error);
  RotaryEmbedding positioned = r;
  positioned.k_positions = {1};
  EXPECT_THROW(KvCache({1, 1, 64, 16, 16, DType::kF32, positioned}), Error);

  KvCache plain({1, 1, 64, 16, 16});
  KvCache rotated({1, 1, 64, 16, 16, DType::kF32, r});
  const OwnedTensor tok = make_tensor(1, 1, 3, 16, Layout::kBHSD, 5);
  plain.append(tok.view, tok.view);
  rotated.append(tok.view, tok.view);
  const OwnedTensor q = make_tensor(1, 1, 1, 16, Layout::kBHSD, 6);
  OwnedTensor out = make_zeros(1, 1, 1, 16);
  std::fill(out.storage.begin(), out.storage.end(), kSentinel);
  const auto expect = [&](const KvCache& cache, const AttentionOptions& o) {
    try {
      attend(q.view, cache, out.view, o);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.argument().rfind("options.rope", 0), 0u) << e.what();
    }
    for (const float x : out.storage) ASSERT_EQ(x, kSentinel);
    EXPECT_EQ(cache.length(0), 3);
  };
  expect(plain, with_rope(r));          // rope over a cache without
  expect(rotated, AttentionOptions{});  // a cache with rope, a plan without
  RotaryEmbedding other = r;
  other.theta = 500.0;
  expect(rotated, with_rope(other));  // another theta
  RotaryEmbedding explicit_q = r;
  explicit_q.q_positions = {2};
  expect(rotated, with_rope(explicit_q));  // explicit positions over a cache
  EXPECT_NO_THROW(attend(q.view, rotated, out.view, with_rope(r)));
}

TEST(Sinusoidal, AddsVaswaniEncoding) {
  OwnedTensor x = make_tensor(2, 1, 7, 11, Layout::kBHSD, 9, 2);  // strided rows, odd d_model
  const std::vector<float> before = x.storage;
  add_sinusoidal_positions(x.view, 5);
  for (std::int64_t b = 0; b < 2; ++b) {
    for (std::int64_t s = 0; s < 7; ++s) {
      for (std::int64_t c = 0; c < 11; ++c) {
        const double angle = (5.0 + s) / std::pow(10000.0, (c - c % 2) / 11.0);
        const double pe = c % 2 == 0 ? std::sin(angle) : std::cos(angle);
        const size_t at = static_cast<size_t>((b * 7 + s) * 13 + c);
        EXPECT_NEAR(x.storage[at], before[at] + pe, 1e-6);
      }
    }
  }
  OwnedTensor bad = make_zeros(1, 2, 3, 4);
  EXPECT_THROW(add_sinusoidal_positions(bad.view), Error);
  OwnedTensor fine = make_zeros(1, 1, 3, 4);
  EXPECT_THROW(add_sinusoidal_positions(fine.view, -1), Error);
}

}  // namespace
}  // namespace seqattn
