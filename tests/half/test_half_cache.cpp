// bf16 and f16 KV caches on every compiled Highway target: the decode kernel widens the
// stored elements as it loads them (F16C, or integer operations on SSE4/SSSE3/SCALAR, which
// also covers f16 Inf/NaN), so over the rounded keys and values it matches the double
// reference as closely as an f32 cache does. Decode and chunk shapes, GQA, per-sequence
// lengths, rings, sliding windows, half queries/outputs, and append errors.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <string>

#include "half_support.hpp"
#include "src/simd/widen_halves.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

using testing::CacheSequence;
using testing::for_each_target;
using testing::make_zeros;
using testing::OwnedTensor;
using testing::suffix_error;

std::map<std::string, double> worst;

// Sequence b holds lengths[b] tokens (rounded to T, appended as T views in pieces); the last
// S_q queries of each are checked against the double reference over the rounded tokens.
template <class T, class TQ>
void check_cache(const char* name, double bound, std::int64_t heads_q, std::int64_t heads_kv,
                 std::int64_t dim, std::int64_t seq_q, const std::vector<std::int64_t>& lengths,
                 const VariantSpec& spec, bool causal, KvCacheMode mode = KvCacheMode::kLinear) {
  const std::int64_t batch = static_cast<std::int64_t>(lengths.size());
  const std::int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  for (const std::int64_t len : lengths) ASSERT_GE(len, seq_q) << "the queries are the last S_q";
  CacheSequence seq(batch, heads_q, heads_kv, longest, dim, dim + 8, 21);
  testing::round_in_place<T>(seq.k);
  testing::round_in_place<T>(seq.v);
  testing::round_in_place<TQ>(seq.q);
  const auto k = testing::rounded<T>(seq.k), v = testing::rounded<T>(seq.v);
  const std::int64_t capacity = mode == KvCacheMode::kRing ? 160 : longest + 3;
  KvCache cache({batch, heads_kv, capacity, dim, dim + 8, dtype_of<T>()}, mode);
  std::mt19937 gen(5);
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < lengths[b];) {
      const std::int64_t n = std::min<std::int64_t>(1 + gen() % 70, lengths[b] - t);
      auto piece = [&](const auto& h) {
        auto view = h.cview();
        view.data = h.view.ptr(b, 0, t);
        view.shape = {1, h.view.shape[1], n, h.view.shape[3]};
        return view;
      };
      cache.append(b, piece(k), piece(v));
      t += n;
    }
  }
  OwnedTensor q32 = make_zeros(batch, heads_q, seq_q, dim, testing::Layout::kBSHD);
  for (std::int64_t b = 0; b < batch; ++b)
    for (std::int64_t h = 0; h < heads_q; ++h)
      for (std::int64_t i = 0; i < seq_q; ++i)
        for (std::int64_t d = 0; d < dim; ++d)
          q32.view.at(b, h, i, d) = seq.q.view.at(b, h, lengths[b] - seq_q + i, d);
  const auto q = testing::rounded<TQ>(q32);
  auto out = testing::rounded<TQ>(make_zeros(batch, heads_q, seq_q, dim + 8));
  AttentionOptions options;
  options.variant = spec;
  options.mask.causal = causal;
  attend(q.cview(), cache, out.view, options);
  const OwnedTensor out32 = testing::widened(out);
  for (std::int64_t b = 0; b < batch; ++b) {
    const double err =
        suffix_error(out32.view, b, seq.reference(b, lengths[b], seq_q, spec, causal));
    worst[name] = std::max(worst[name], err);
    EXPECT_LE(err, bound) << name << " batch " << b << " length " << lengths[b];
  }
}

template <class T, class TQ>
void check_shapes(const char* name, double bound) {
  SCOPED_TRACE(name);
  for (const std::int64_t seq_q : {1, 3, 17}) {
    check_cache<T, TQ>(name, bound, 8, 2, 64, seq_q, {seq_q, 64, 200}, DenseSpec{}, true);
    check_cache<T, TQ>(name, bound, 3, 3, 80, seq_q, {129, 17}, DenseSpec{}, false);
    check_cache<T, TQ>(name, bound, 4, 1, 32, seq_q, {300}, SlidingWindowSpec{40, 0, {}}, true);
  }
  check_cache<T, TQ>(name, bound, 4, 2, 16, 1, {700, 90}, SlidingWindowSpec{100, 0, {}}, true,
                     KvCacheMode::kRing);
  // Long enough for the split-KV path (chunks of 512 keys merged).
  check_cache<T, TQ>(name, bound, 4, 1, 128, 1, {2100}, DenseSpec{}, true);
}

TEST(HalfCacheOracle, MatchesTheReferenceOverTheRoundedTokensOnEveryTarget) {
  for_each_target([] {
    check_shapes<bfloat16, float>("bf16 cache, f32 q/out", 1e-5);
    check_shapes<float16, float>("f16 cache, f32 q/out", 1e-5);
    check_shapes<bfloat16, bfloat16>("bf16 cache, bf16 q/out", 1e-2);
    check_shapes<float16, float16>("f16 cache, f16 q/out", 2e-3);
  });
  for (const auto& [name, err] : worst) std::printf("worst error, %s: %.3g\n", name.c_str(), err);
}

// f16 Inf and NaN survive the widening on every target (Highway 1.0.3's own SSE4 fallback
// would make them finite): a value column holding +Inf gives +Inf, a NaN gives NaN.
TEST(HalfCache, InfAndNanValuesPropagateOnEveryTarget) {
  for_each_target([] {
    KvCache cache({1, 1, 64, 16, 16, DType::kF16});
    std::vector<float16> k(16, float16(0.0f)), v(16, float16(1.0f));
    v[2] = float16::from_bits(0x7c00);  // +Inf
    v[5] = float16::from_bits(0x7e00);  // NaN
    cache.append(bhsd<const float16>(k.data(), 1, 1, 1, 16),
                 bhsd<const float16>(v.data(), 1, 1, 1, 16));
    std::vector<float> q(16, 0.5f), out(16, 0.0f);
    attend(bhsd<const float>(q.data(), 1, 1, 1, 16), cache, bhsd(out.data(), 1, 1, 1, 16));
    EXPECT_EQ(out[0], 1.0f);
    EXPECT_EQ(out[2], std::numeric_limits<float>::infinity());
    EXPECT_TRUE(std::isnan(out[5]));
  });
}

// The SIMD widening (the staging of half arguments, and FloatOps::LoadWide under the cache
// kernel) gives the scalar conversion's float for every 16-bit pattern on every target.
TEST(HalfCache, SimdWideningEqualsTheScalarConversionOnEveryTarget) {
  std::vector<bfloat16> b(65536 + 3);
  std::vector<float16> h(65536 + 3);
  for (std::uint32_t i = 0; i < b.size(); ++i) {
    b[i] = bfloat16::from_bits(static_cast<std::uint16_t>(i));
    h[i] = float16::from_bits(static_cast<std::uint16_t>(i));
  }
  for_each_target([&] {
    std::vector<float> wb(b.size()), wh(h.size());
    detail::widen_bf16(b.data(), wb.data(), static_cast<std::int64_t>(b.size()));
    detail::widen_f16(h.data(), wh.data(), static_cast<std::int64_t>(h.size()));
    for (std::size_t i = 0; i < b.size(); ++i) {
      const float sb = static_cast<float>(b[i]), sh = static_cast<float>(h[i]);
      if (std::isnan(sb)) {
        ASSERT_TRUE(std::isnan(wb[i])) << i;
      } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(wb[i]), std::bit_cast<std::uint32_t>(sb)) << i;
      }
      if (std::isnan(sh)) {
        ASSERT_TRUE(std::isnan(wh[i])) << i;
      } else {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(wh[i]), std::bit_cast<std::uint32_t>(sh)) << i;
      }
    }
  });
}

TEST(HalfCache, StoresHalfTheBytesAndRoundsAppendedFloats) {
  KvCache f32({2, 4, 100, 64, 48});
  KvCache bf16({2, 4, 100, 64, 48, DType::kBF16});
  EXPECT_EQ(bf16.bytes() * 2, f32.bytes());
  EXPECT_EQ(bf16.shape().dtype, DType::kBF16);
  // fp32 tokens appended to a bf16 cache are rounded to nearest even: attention over one
  // token returns its value row, rounded.
  KvCache one({1, 1, 8, 4, 4, DType::kBF16});
  const float k[4] = {0, 0, 0, 0}, v[4] = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f, -3.1f, 1e-3f};
  one.append(bhsd<const float>(k, 1, 1, 1, 4), bhsd<const float>(v, 1, 1, 1, 4));
  float q[4] = {1, 1, 1, 1}, out[4] = {};
  attend(bhsd<const float>(q, 1, 1, 1, 4), one, bhsd(out, 1, 1, 1, 4));
  for (int d = 0; d < 4; ++d) EXPECT_EQ(out[d], static_cast<float>(bfloat16(v[d]))) << d;
}

TEST(HalfCache, AppendErrorsChangeNothing) {
  KvCache cache({1, 2, 16, 8, 8, DType::kF16});
  std::vector<float16> k(2 * 3 * 8), v(2 * 3 * 8);
  std::vector<bfloat16> v_bf16(2 * 3 * 8);
  try {
    cache.append(bhsd<const float16>(k.data(), 1, 2, 3, 8),
                 bhsd<const bfloat16>(v_bf16.data(), 1, 2, 3, 8));
    ADD_FAILURE() << "no error for k and v of different dtypes";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "v.dtype") << e.what();
  }
  EXPECT_EQ(cache.length(0), 0);
  try {
    KvCache bad({1, 1, 16, 8, 8, static_cast<DType>(5)});
    ADD_FAILURE() << "no error for a bad dtype";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "shape.dtype") << e.what();
  }
  cache.append(bhsd<const float16>(k.data(), 1, 2, 3, 8),
               bhsd<const float16>(v.data(), 1, 2, 3, 8));
  EXPECT_EQ(cache.length(0), 3);
}

}  // namespace
}  // namespace seqattn
