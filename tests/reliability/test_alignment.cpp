// Misaligned pointers: every view starts one element past a 64-byte aligned address (4 bytes
// for f32, 2 bytes for bf16/f16), with row lengths that are whole vectors (D = 64, D_v = 32),
// so each row of every view is misaligned for every vector width. The kernels may only use
// unaligned loads and stores on caller memory (aligned ones are for their own packed tiles);
// results must match the double reference on every compiled Highway target.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reliability_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn::reliability {
namespace {

using seqattn::testing::for_each_target;

constexpr Dims kDims{2, 4, 2, 40, 70, 64, 32};
constexpr std::int64_t kB = kDims.batch, kHq = kDims.heads_q, kHkv = kDims.heads_kv,
                       kSk = kDims.seq_k, kD = kDims.dim, kDv = kDims.dim_v;

struct Values {
  explicit Values(const Shapes& s)
      : q(random_tensor(s.q, 201)), k(random_tensor(s.k, 202)), v(random_tensor(s.v, 203)) {}
  Buffer<float> q, k, v;
};

// A copy of `values` whose first element is `offset` elements past a 64-byte boundary.
template <class T>
Buffer<T> misaligned(const Buffer<float>& values, std::int64_t offset, bool bshd = false) {
  const Extents& shape = values.view.shape;
  Buffer<T> b = make_buffer<T>(shape, strides_for(shape, 1, bshd), offset, T(kNaN));
  copy_into(values.cview(), b);
  return b;
}

TEST(Misaligned, F32ViewsOneFloatPastAlignmentMatchTheReference) {
  for (const VariantTestCase& c : every_variant_case()) {
    const Shapes s(kDims, c);
    const Values in(s);
    const AttentionOptions case_options = c.options(kB, kSk);
    const reference::Result ref =
        reference_for(c.spec, in.q.cview(), in.k.cview(), in.v.cview(), case_options.mask);
    for (const bool bshd : {false, true}) {
      SCOPED_TRACE(c.name + (bshd ? " BSHD" : " BHSD"));
      const Buffer<float> q = misaligned<float>(in.q, 1, bshd),
                          k = misaligned<float>(in.k, 1, bshd),
                          v = misaligned<float>(in.v, 1, bshd);
      for (const Buffer<float>* b : {&q, &k, &v}) ASSERT_EQ(b->address() % 64, 4u);
      for_each_target([&] {
        Buffer<float> out = make_buffer<float>(s.out, strides_for(s.out, 1, bshd), 1, kOutSentinel);
        Buffer<float> lse = make_buffer<float>(s.lse, strides_for(s.lse, 1), 1, kOutSentinel);
        ASSERT_EQ(out.address() % 64, 4u);
        AttentionOptions options = case_options;
        if (c.supports("lse")) options.lse = lse.view;
        attend(q.cview(), k.cview(), v.cview(), out.view, options);
        const double error = reference::max_relative_error(out.view, ref);
        seqattn::testing::worst_error.add(error);
        EXPECT_LE(error, kTolerance);
        expect_untouched_outside(out, kOutSentinel, "out");
        if (c.supports("lse")) {
          EXPECT_LE(lse_error(lse.cview(), ref), kTolerance);
        }
        if (!c.supports("weights")) return;
        // The weights path (dense_rows.cpp) with misaligned out and weights.
        Buffer<float> w = make_buffer<float>(s.weights, strides_for(s.weights, 1), 1, kOutSentinel);
        options.weights = w.view;
        attend(q.cview(), k.cview(), v.cview(), out.view, options);
        EXPECT_LE(reference::max_relative_error(out.view, ref), kTolerance);
        EXPECT_LE(reference::max_relative_error(elements(w.view), ref.weights), kTolerance);
        expect_untouched_outside(w, kOutSentinel, "weights");
      });
    }
  }
}

// Half inputs one 2-byte element past alignment go through the SIMD widening of contiguous
// rows (widen_halves.cc, LoadWide) at a misaligned address; a half run is bit for bit the
// fp32 run on the widened inputs, rounded once into a half out.
template <class T>
void check_half_misaligned() {
  for (const VariantTestCase& c : every_variant_case()) {
    SCOPED_TRACE(c.name);
    const Shapes s(kDims, c);
    const Values in(s);
    const Buffer<T> q = misaligned<T>(in.q, 1), k = misaligned<T>(in.k, 1),
                    v = misaligned<T>(in.v, 1);
    for (const Buffer<T>* b : {&q, &k, &v}) ASSERT_EQ(b->address() % 64, 2u);
    const Buffer<float> q32 = widened(q), k32 = widened(k), v32 = widened(v);
    const AttentionOptions options = c.options(kB, kSk);
    const reference::Result ref =
        reference_for(c.spec, q32.cview(), k32.cview(), v32.cview(), options.mask);
    for_each_target([&] {
      Buffer<float> expected = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
      attend(q32.cview(), k32.cview(), v32.cview(), expected.view, options);
      Buffer<float> out32 = make_buffer<float>(s.out, strides_for(s.out, 1), 1, kOutSentinel);
      attend(q.cview(), k.cview(), v.cview(), out32.view, options);
      EXPECT_LE(reference::max_relative_error(out32.view, ref), kTolerance);
      EXPECT_EQ(bit_differences(bits_of(out32.view), bits_of(expected.view)), 0);
      const T sentinel(kOutSentinel);
      Buffer<T> out = make_buffer<T>(s.out, strides_for(s.out, 1), 1, sentinel);
      ASSERT_EQ(out.address() % 64, 2u);
      attend(q.cview(), k.cview(), v.cview(), out.view, options);
      std::vector<T> rounded;
      for (const float x : elements(expected.view)) rounded.push_back(T(x));
      const TensorView<const T> want{rounded.data(), s.out, strides_for(s.out, 1)};
      EXPECT_EQ(bit_differences(bits_of(out.view), bits_of(want)), 0);
      expect_untouched_outside(out, sentinel, "half out");
    });
  }
}

TEST(Misaligned, Bf16ViewsOneElementPastAlignmentEqualTheFp32Run) {
  check_half_misaligned<bfloat16>();
}

TEST(Misaligned, F16ViewsOneElementPastAlignmentEqualTheFp32Run) {
  check_half_misaligned<float16>();
}

// KvCache::append from misaligned (and strided) k/v, then decode queries and out that are
// misaligned too: the last S_q rows of causal dense attention over the whole sequence.
TEST(Misaligned, CacheAppendAndRunFromMisalignedViews) {
  const Values in(Shapes(kDims, testing::variant_test_row(Variant::kDense).cases.front()));
  const std::int64_t seq_q = 3;
  for (const DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(dtype == DType::kF32 ? "f32 cache" : "bf16 cache");
    KvCache cache({kB, kHkv, kSk, kD, kDv, dtype});
    // Appended as bf16 views misaligned by one element, in two pieces.
    const Buffer<bfloat16> k = misaligned<bfloat16>(in.k, 1, true);
    const Buffer<bfloat16> v = misaligned<bfloat16>(in.v, 1, true);
    auto rows = [](TensorView<const bfloat16> t, std::int64_t first, std::int64_t n) {
      t.data = t.ptr(0, 0, first);
      t.shape[2] = n;
      return t;
    };
    cache.append(rows(k.cview(), 0, 33), rows(v.cview(), 0, 33));
    cache.append(rows(k.cview(), 33, kSk - 33), rows(v.cview(), 33, kSk - 33));
    const Buffer<float> k32 = widened(k), v32 = widened(v);
    const Extents qs{kB, kHq, seq_q, kD}, os{kB, kHq, seq_q, kDv};
    Buffer<float> q = make_buffer<float>(qs, strides_for(qs, 1), 1, kNaN);
    fill_random(q, 204);
    Mask causal;
    causal.causal = true;
    const reference::Result ref =
        reference::dense(q.cview(), k32.cview(), v32.cview(), causal, default_scale(kD));
    AttentionOptions options;
    options.mask.causal = true;
    for_each_target([&] {
      Buffer<float> out = make_buffer<float>(os, strides_for(os, 1), 1, kOutSentinel);
      ASSERT_EQ(out.address() % 64, 4u);
      attend(q.cview(), cache, out.view, options);
      EXPECT_LE(reference::max_relative_error(out.view, ref), kTolerance);
      expect_untouched_outside(out, kOutSentinel, "out");
    });
  }
}

}  // namespace
}  // namespace seqattn::reliability
