// Shared pieces of the reliability tests: views with any strides and any start offset over a
// buffer whose other elements hold a sentinel, the double reference for any spec, the problem
// shapes of the stride / broadcast / alignment tests for each row's cases (every row of the
// variant table, tests/support/variant_test_rows.hpp), and error expectations.
#pragma once

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/variant_test_rows.hpp"

namespace seqattn::reliability {

using testing::every_variant_case;
using testing::VariantTestCase;

using Extents = std::array<std::int64_t, 4>;

constexpr double kTolerance = 1e-5;  // the suite's f32 bound against the double reference
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kOutSentinel = 1234.5f;  // what an output buffer holds outside its view

// Strides of a [B, H, S, D] view laid out in BHSD (or BSHD) order whose neighbouring elements
// of the last axis are `step` elements apart.
inline Extents strides_for(const Extents& s, std::int64_t step, bool bshd = false) {
  if (bshd) return {s[2] * s[1] * s[3] * step, s[3] * step, s[1] * s[3] * step, step};
  return {s[1] * s[2] * s[3] * step, s[2] * s[3] * step, s[3] * step, step};
}

// Storage behind one view of any shape and strides. Element 0 of the view sits `offset`
// elements past a 64-byte aligned address; every element the view does not cover (gaps,
// the offset, 16 elements of tail) holds `fill`. Move-only: the view points into storage.
template <class T>
struct Buffer {
  std::vector<T> storage;
  std::size_t first = 0;  // storage index of the view's element [0, 0, 0, 0]
  TensorView<T> view;

  Buffer() = default;
  Buffer(Buffer&&) = default;
  Buffer& operator=(Buffer&&) = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  TensorView<const T> cview() const { return view; }
  std::uintptr_t address() const { return reinterpret_cast<std::uintptr_t>(view.data); }

  // Storage indices the view covers (several elements may share one with stride 0).
  std::vector<bool> covered() const {
    std::vector<bool> c(storage.size(), false);
    const auto& n = view.shape;
    for (std::int64_t b = 0; b < n[0]; ++b)
      for (std::int64_t h = 0; h < n[1]; ++h)
        for (std::int64_t s = 0; s < n[2]; ++s)
          for (std::int64_t d = 0; d < n[3]; ++d)
            c[static_cast<std::size_t>(view.ptr(b, h, s, d) - storage.data())] = true;
    return c;
  }
};

template <class T>
Buffer<T> make_buffer(const Extents& shape, const Extents& strides, std::int64_t offset, T fill) {
  Buffer<T> buf;
  std::int64_t last = 0;
  for (int a = 0; a < 4; ++a) last += (shape[a] - 1) * strides[a];
  const auto slack = static_cast<std::int64_t>(64 / sizeof(T));
  buf.storage.assign(static_cast<std::size_t>(slack + offset + last + 1 + 16), fill);
  const auto base = reinterpret_cast<std::uintptr_t>(buf.storage.data());
  buf.first = static_cast<std::size_t>((64 - base % 64) % 64 / sizeof(T) + offset);
  buf.view = {buf.storage.data() + buf.first, shape, strides};
  return buf;
}

// The view's elements set from `values` (same shape, any strides), converted to T.
template <class T>
void copy_into(const ConstTensor& values, Buffer<T>& buf) {
  const auto& n = values.shape;
  for (std::int64_t b = 0; b < n[0]; ++b)
    for (std::int64_t h = 0; h < n[1]; ++h)
      for (std::int64_t s = 0; s < n[2]; ++s)
        for (std::int64_t d = 0; d < n[3]; ++d)
          buf.view.at(b, h, s, d) = static_cast<T>(values.at(b, h, s, d));
}

// Random values in [lo, hi), written through the view in (b, h, s, d) order (with stride 0 the
// last write to an address wins: the view reads one value there, as the reference does).
template <class T>
void fill_random(Buffer<T>& buf, std::uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  const auto& n = buf.view.shape;
  for (std::int64_t b = 0; b < n[0]; ++b)
    for (std::int64_t h = 0; h < n[1]; ++h)
      for (std::int64_t s = 0; s < n[2]; ++s)
        for (std::int64_t d = 0; d < n[3]; ++d) buf.view.at(b, h, s, d) = T(dist(gen));
}

// A contiguous random f32 tensor (the values every layout of a case copies).
inline Buffer<float> random_tensor(const Extents& shape, std::uint32_t seed) {
  Buffer<float> buf = make_buffer<float>(shape, strides_for(shape, 1), 0, kNaN);
  fill_random(buf, seed);
  return buf;
}

// The fp32 values of a half buffer, same layout (the reference's input for half runs).
template <class T>
Buffer<float> widened(const Buffer<T>& h) {
  Buffer<float> w;
  w.storage.reserve(h.storage.size());
  for (const T x : h.storage) w.storage.push_back(static_cast<float>(x));
  w.first = h.first;
  w.view = {w.storage.data() + w.first, h.view.shape, h.view.strides};
  return w;
}

// Every element outside the view still holds the bits it was filled with.
template <class T>
void expect_untouched_outside(const Buffer<T>& buf, T fill, const std::string& what) {
  const std::vector<bool> covered = buf.covered();
  std::int64_t changed = 0;
  for (std::size_t n = 0; n < buf.storage.size(); ++n) {
    if (!covered[n] && std::memcmp(&buf.storage[n], &fill, sizeof(T)) != 0) ++changed;
  }
  EXPECT_EQ(changed, 0) << what << ": elements outside the view were written";
}

// The view's elements, in (b, h, s, d) order.
template <class T>
std::vector<std::remove_const_t<T>> elements(const TensorView<T>& v) {
  std::vector<std::remove_const_t<T>> e;
  for (std::int64_t b = 0; b < v.shape[0]; ++b)
    for (std::int64_t h = 0; h < v.shape[1]; ++h)
      for (std::int64_t s = 0; s < v.shape[2]; ++s)
        for (std::int64_t d = 0; d < v.shape[3]; ++d) e.push_back(v.at(b, h, s, d));
  return e;
}

// The bits of a view's elements, for bitwise comparisons of any element type.
template <class T>
std::vector<std::uint32_t> bits_of(const TensorView<T>& v) {
  std::vector<std::uint32_t> bits;
  for (const auto x : elements(v)) {
    std::uint32_t u = 0;
    std::memcpy(&u, &x, sizeof(x));
    bits.push_back(u);
  }
  return bits;
}

// How many elements of two bit patterns differ (-1 when the sizes differ): a count, so that a
// failing bitwise comparison does not print thousands of elements.
inline std::int64_t bit_differences(const std::vector<std::uint32_t>& a,
                                    const std::vector<std::uint32_t>& b) {
  if (a.size() != b.size()) return -1;
  std::int64_t n = 0;
  for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
  return n;
}

// The scale attend() defaults to (computed in float, as the library does).
inline double default_scale(std::int64_t dim) {
  return static_cast<double>(1.0f / std::sqrt(static_cast<float>(dim)));
}

// The double reference of any explicit spec (reference::variant: the matrices a spec leaves
// to its seed are drawn as the library draws them).
inline reference::Result reference_for(const ConcreteSpec& spec, const ConstTensor& q,
                                       const ConstTensor& k, const ConstTensor& v,
                                       const Mask& mask) {
  return reference::variant(q, k, v, spec, mask, std::nullopt);
}

// max |lse - ref| / max |ref| over the rows (-inf must match exactly).
inline double lse_error(const ConstTensor& lse, const reference::Result& ref) {
  double err = 0, scale = 1e-30;
  for (std::int64_t b = 0; b < ref.batch; ++b)
    for (std::int64_t h = 0; h < ref.heads; ++h)
      for (std::int64_t i = 0; i < ref.seq_q; ++i) {
        const double want = ref.lse_at(b, h, i), got = lse.at(b, h, i, 0);
        if (std::isinf(want)) {
          if (got != want) return std::numeric_limits<double>::infinity();
          continue;
        }
        scale = std::max(scale, std::abs(want));
        err = std::isnan(got) ? std::numeric_limits<double>::infinity()
                              : std::max(err, std::abs(got - want));
      }
  return err / scale;
}

// The extents of one suite's problem for one row's case: GQA, cross attention (S_q != S_k,
// except for a row that is self-attention only, which gets S_q = S_k), D != D_v, two batches.
struct Dims {
  std::int64_t batch, heads_q, heads_kv, seq_q, seq_k, dim, dim_v;
};
struct Shapes {
  Extents q, k, v, out, lse, weights;
  std::int64_t seq_q;
  Shapes(const Dims& d, const VariantTestCase& c) : seq_q(c.seq_q_for(d.seq_q, d.seq_k)) {
    q = {d.batch, d.heads_q, seq_q, d.dim};
    k = {d.batch, d.heads_kv, d.seq_k, d.dim};
    v = {d.batch, d.heads_kv, d.seq_k, d.dim_v};
    out = {d.batch, d.heads_q, seq_q, d.dim_v};
    lse = {d.batch, d.heads_q, seq_q, 1};
    weights = {d.batch, d.heads_q, seq_q, d.seq_k};
  }
};

inline LinearSpec linear_spec(FeatureMap map, std::int64_t features = 0) {
  LinearSpec s;
  s.feature_map = map;
  s.num_features = features;
  s.seed = 17;
  return s;
}

// Runs fn and expects a seqattn::Error of `kind` naming `argument` (in argument() and in the
// message).
template <class Fn>
void expect_error(const Fn& fn, const std::string& argument,
                  ErrorKind kind = ErrorKind::kInvalidArgument) {
  try {
    fn();
    ADD_FAILURE() << "no Error; expected one naming '" << argument << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_EQ(e.argument(), argument) << e.what();
    EXPECT_NE(std::string(e.what()).find("'" + argument + "'"), std::string::npos) << e.what();
  }
}

}  // namespace seqattn::reliability
