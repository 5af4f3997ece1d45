// Views whose last axis is not contiguous (innermost stride 2 or 3 over a bigger buffer) for
// q, k, v and out, through every variant, on every compiled Highway target, against the
// double reference. The gaps of the inputs hold NaN, so a kernel that read them (by assuming
// stride 1) would put NaN into the output; the gaps of out hold a sentinel that must survive.
//
// The branches these views reach (read in the code):
//  - flash kernel (dense, sliding window, Linformer's dense step): PackKeyValueTile's
//    `k_step != 1` / `v_step != 1` loops (flash_packing_body.inc), load_queries' and
//    store_rows' `step != 1` loops (flash_worker_body.inc) — in FlashRun's dense and, for long
//    bands, banded paths;
//  - dense_rows.cpp (weights requested): its strided dot / accumulate loops;
//  - linear (linear_core.cpp, linear_simd-inl.h): scaled_map_rows with col_stride != 1 for
//    q and k (every feature map), value_rows' gather when v.col_stride != 1, divide_rows'
//    out_col_stride != 1 loop;
//  - Linformer (linformer_variant.cpp): project()'s gather of strided rows into a contiguous
//    copy before the GEMM (`t.strides[3] != 1 || ld < cols`);
//  - staging (staging.cpp, half inputs / outputs): copy_view's element loop for strided rows.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "reliability_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn::reliability {
namespace {

using seqattn::testing::for_each_target;

constexpr Dims kDims{2, 4, 2, 45, 70, 20, 12};

// Innermost strides of q, k, v and out (lse and weights take out's), and the axis order.
struct Layout {
  const char* name;
  std::int64_t q, k, v, out;
  bool bshd;
};
constexpr Layout kLayouts[] = {
    {"q step 2", 2, 1, 1, 1, false},        {"k step 2", 1, 2, 1, 1, false},
    {"v step 2", 1, 1, 2, 1, false},        {"out step 2", 1, 1, 1, 2, false},
    {"all step 3", 3, 3, 3, 3, false},      {"q3 k2 v3 out2, BSHD", 3, 2, 3, 2, true},
    {"k3 v2 only, BSHD", 1, 3, 2, 1, true},
};

struct Values {
  explicit Values(const Shapes& s)
      : q(random_tensor(s.q, 101)), k(random_tensor(s.k, 102)), v(random_tensor(s.v, 103)) {}
  Buffer<float> q, k, v;
};

// A copy of `values` in a buffer with innermost stride `step` (NaN in the gaps).
Buffer<float> spread(const Buffer<float>& values, std::int64_t step, bool bshd) {
  const Extents& shape = values.view.shape;
  Buffer<float> b = make_buffer<float>(shape, strides_for(shape, step, bshd), 0, kNaN);
  copy_into(values.cview(), b);
  return b;
}

void check_case(const VariantTestCase& c, bool with_weights) {
  SCOPED_TRACE(c.name + (with_weights ? " + weights" : ""));
  const Shapes s(kDims, c);
  const Values in(s);
  const AttentionOptions case_options = c.options(kDims.batch, kDims.seq_k);
  const reference::Result ref =
      reference_for(c.spec, in.q.cview(), in.k.cview(), in.v.cview(), case_options.mask);
  std::vector<float> ref_weights_f;
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.name);
    const Buffer<float> q = spread(in.q, l.q, l.bshd), k = spread(in.k, l.k, l.bshd),
                        v = spread(in.v, l.v, l.bshd);
    Buffer<float> out =
        make_buffer<float>(s.out, strides_for(s.out, l.out, l.bshd), 0, kOutSentinel);
    Buffer<float> lse = make_buffer<float>(s.lse, strides_for(s.lse, l.out), 0, kOutSentinel);
    Buffer<float> weights =
        make_buffer<float>(s.weights, strides_for(s.weights, l.out), 0, kOutSentinel);
    AttentionOptions options = case_options;
    if (c.supports("lse")) options.lse = lse.view;
    if (with_weights) options.weights = weights.view;
    for_each_target([&] {
      for (Buffer<float>* b : {&out, &lse, &weights})
        std::fill(b->storage.begin(), b->storage.end(), kOutSentinel);
      attend(q.cview(), k.cview(), v.cview(), out.view, options);
      const double error = reference::max_relative_error(out.view, ref);
      seqattn::testing::worst_error.add(error);
      EXPECT_LE(error, kTolerance);
      expect_untouched_outside(out, kOutSentinel, "out");
      if (c.supports("lse")) {
        EXPECT_LE(lse_error(lse.cview(), ref), kTolerance);
        expect_untouched_outside(lse, kOutSentinel, "lse");
      }
      if (with_weights) {
        EXPECT_LE(reference::max_relative_error(elements(weights.view), ref.weights), kTolerance);
        expect_untouched_outside(weights, kOutSentinel, "weights");
      }
    });
  }
}

TEST(InnermostStride, EveryVariantMatchesTheReference) {
  for (const VariantTestCase& c : every_variant_case()) check_case(c, false);
}

TEST(InnermostStride, EveryVariantWithWeightsMatchesTheReference) {
  for (const VariantTestCase& c : every_variant_case()) {
    if (c.supports("weights")) check_case(c, true);
  }
}

// Strided half-precision views go through staging's element loop (not the SIMD widening of
// contiguous rows). A half run is documented to be bit for bit the fp32 run on the widened
// inputs with the result rounded once (docs/architecture.md, "Half precision"): out is
// compared bitwise with T(fp32 out) of a contiguous fp32 run over the same rounded values.
template <class T>
void check_half_case(const VariantTestCase& c) {
  SCOPED_TRACE(c.name);
  const Shapes s(kDims, c);
  const Values in(s);
  auto halve = [](const Buffer<float>& values, std::int64_t step, bool bshd) {
    const Extents& shape = values.view.shape;
    Buffer<T> h = make_buffer<T>(shape, strides_for(shape, step, bshd), 0, T(kNaN));
    copy_into(values.cview(), h);
    return h;
  };
  const Buffer<T> q = halve(in.q, 2, false), k = halve(in.k, 3, true), v = halve(in.v, 2, true);
  const Buffer<float> q32 = widened(q), k32 = widened(k), v32 = widened(v);
  // Contiguous fp32 copies of the rounded values: the run the half run must equal.
  Buffer<float> qc = spread(q32, 1, false), kc = spread(k32, 1, false), vc = spread(v32, 1, false);
  const AttentionOptions options = c.options(kDims.batch, kDims.seq_k);
  const reference::Result ref =
      reference_for(c.spec, qc.cview(), kc.cview(), vc.cview(), options.mask);
  for_each_target([&] {
    Buffer<float> expected = make_buffer<float>(s.out, strides_for(s.out, 1), 0, kOutSentinel);
    attend(qc.cview(), kc.cview(), vc.cview(), expected.view, options);
    EXPECT_LE(reference::max_relative_error(expected.view, ref), kTolerance);
    // f32 out, step 2, from strided half inputs.
    Buffer<float> out32 = make_buffer<float>(s.out, strides_for(s.out, 2), 0, kOutSentinel);
    attend(q.cview(), k.cview(), v.cview(), out32.view, options);
    EXPECT_EQ(bit_differences(bits_of(out32.view), bits_of(expected.view)), 0);
    expect_untouched_outside(out32, kOutSentinel, "f32 out");
    // Half out, step 3: the fp32 result rounded once.
    const T sentinel(kOutSentinel);
    Buffer<T> out = make_buffer<T>(s.out, strides_for(s.out, 3, true), 0, sentinel);
    attend(q.cview(), k.cview(), v.cview(), out.view, options);
    std::vector<T> rounded;
    for (const float x : elements(expected.view)) rounded.push_back(T(x));
    const Buffer<float> got = widened(out);
    const TensorView<const T> want{rounded.data(), s.out, strides_for(s.out, 1)};
    EXPECT_EQ(bit_differences(bits_of(out.view), bits_of(want)), 0);
    const double bound = std::is_same_v<T, bfloat16> ? 1e-2 : 2e-3;  // the suite's half bounds
    EXPECT_LE(reference::max_relative_error(got.view, ref), bound);
    expect_untouched_outside(out, sentinel, "half out");
  });
}

// Each row's case with the most masks.
std::vector<VariantTestCase> half_cases() {
  std::vector<VariantTestCase> picked;
  for (const auto& row : testing::variant_test_rows()) picked.push_back(row.fullest_case());
  return picked;
}

TEST(InnermostStride, StridedBf16ViewsEqualTheFp32Run) {
  for (const VariantTestCase& c : half_cases()) check_half_case<bfloat16>(c);
}

TEST(InnermostStride, StridedF16ViewsEqualTheFp32Run) {
  for (const VariantTestCase& c : half_cases()) check_half_case<float16>(c);
}

}  // namespace
}  // namespace seqattn::reliability
