// What the LSH attention tests share (test_lsh.cpp, test_lsh_rules.cpp): the cases, inputs at a
// safe hash margin, the rotations the library uses, runs on every compiled target, and the
// error measures against the float64 reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing::lsh {

constexpr double kTolerance = 1e-5;
// Top-2 gap of z = [x·R, -x·R] over |x|·max|R|·√D below which fp32 and float64 may disagree on
// the bucket (fp32 rounding measures <= 1e-7 in that unit).
constexpr double kMinMargin = 1e-6;
constexpr float kNan = std::numeric_limits<float>::quiet_NaN();

struct LshCase {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq = 17, dim = 17, dim_v = 17;
  LshSpec spec{};
  bool causal = false;
  Layout layout = Layout::kBHSD;
  std::int64_t pad = 0;
  std::vector<std::int64_t> key_lengths{};
  std::int64_t given_half = 0;  // > 0: pass rotations [hashes·D, given_half], row stride + 3
  bool zero_rows = false;       // q row 1 and k row 2 of (0, 0) zero: every z ties, bucket 0
};

inline std::string describe(const LshCase& c) {
  std::ostringstream s;
  s << "B=" << c.batch << " H=" << c.heads_q << "/" << c.heads_kv << " S=" << c.seq
    << " D=" << c.dim << "/" << c.dim_v << " hashes=" << c.spec.hashes
    << " buckets=" << c.spec.buckets << " c=" << c.spec.chunk_length
    << " shared=" << c.spec.shared_qk << " seed=" << c.spec.seed << " causal=" << c.causal
    << " pad=" << c.pad << " lengths=" << c.key_lengths.size() << " given=" << c.given_half;
  return s.str();
}

// The rotations the library uses for c: given ones (drawn from another seed, in rows whose
// padding would change the buckets if it were read) or the spec's seed's.
struct RotationsOf {
  std::vector<float> storage;
  MatrixView<const float> view;
  explicit RotationsOf(const LshCase& c) {
    const std::int64_t rows = c.spec.hashes * c.dim;
    if (c.given_half > 0) {
      const std::int64_t stride = c.given_half + 3;
      storage = linformer_random_projection(1, rows * stride, c.spec.seed + 1000);
      view = {storage.data(), rows, c.given_half, stride};
      return;
    }
    const std::int64_t buckets =
        c.spec.buckets != 0 ? c.spec.buckets
                            : std::min<std::int64_t>(
                                  128, 2 * std::max<std::int64_t>(1, c.seq / c.spec.chunk_length));
    storage = lsh_random_rotations(c.spec.hashes, c.dim, buckets, c.spec.seed);
    view = {storage.data(), rows, buckets / 2, buckets / 2};
  }
  RotationsOf(const RotationsOf&) = delete;
};

inline double hash_margin(const ConstTensor& x, const MatrixView<const float>& rot) {
  return reference::lsh_hash_margin(x, rot);
}

struct Inputs {
  OwnedTensor q, k, v;
  Inputs(const LshCase& c, std::uint32_t seed)
      : q(make_tensor(c.batch, c.heads_q, c.seq, c.dim, c.layout, seed, c.pad, -1.5f, 1.5f)),
        k(make_tensor(c.batch, c.heads_kv, c.seq, c.dim, c.layout, seed + 1, c.pad, -1.5f, 1.5f)),
        v(make_tensor(c.batch, c.heads_kv, c.seq, c.dim_v, c.layout, seed + 2, c.pad)) {}
};

// Inputs for c, redrawn from further seeds until every vector the library may hash (q, and k
// when separate) is at a safe margin from a bucket boundary.
inline std::optional<Inputs> safe_inputs(const LshCase& c, const MatrixView<const float>& rot,
                                         std::uint32_t seed) {
  for (std::uint32_t attempt = 0; attempt < 50; ++attempt) {
    Inputs in(c, seed + 7919 * attempt);
    double margin = hash_margin(in.q.cview(), rot);
    if (!c.spec.shared_qk) margin = std::min(margin, hash_margin(in.k.cview(), rot));
    if (margin >= kMinMargin) return in;
  }
  return std::nullopt;
}

inline AttentionOptions options_of(const LshCase& c, const MatrixView<const float>& rot) {
  AttentionOptions opt;
  LshSpec spec = c.spec;
  if (c.given_half > 0) spec.rotations = rot;
  opt.variant = spec;
  opt.mask.causal = c.causal;
  opt.mask.key_lengths = c.key_lengths;
  return opt;
}

// max|x - ref| / max|ref| over ref's finite entries; infinite unless x is -inf exactly where
// ref is (or when x is NaN where ref is finite).
template <class T>
inline double finite_error(const std::vector<T>& actual, const std::vector<double>& expected) {
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  double max_ref = 0, max_err = 0;
  for (size_t r = 0; r < expected.size(); ++r) {
    const double err = std::abs(actual[r] - expected[r]);
    if (std::isinf(expected[r]) && actual[r] == expected[r]) continue;
    if (std::isinf(expected[r]) || std::isnan(err)) return std::numeric_limits<double>::infinity();
    max_ref = std::max(max_ref, std::abs(expected[r]));
    max_err = std::max(max_err, err);
  }
  return max_err / std::max(max_ref, 1e-30);
}

inline void expect_lse_near(const std::vector<float>& actual, const std::vector<double>& expected,
                            const std::string& what) {
  const double error = finite_error(actual, expected);
  worst_error.add(error);
  EXPECT_LE(error, kTolerance) << what << " (lse)";
}

struct Outputs {
  OwnedTensor out, lse;
};

inline Outputs run(const LshCase& c, const Inputs& in, AttentionOptions opt) {
  Outputs o{make_zeros(c.batch, c.heads_q, c.seq, c.dim_v, c.layout, c.pad),
            make_zeros(c.batch, c.heads_q, c.seq, 1)};
  opt.lse = o.lse.view;
  const RunRecord record = attend(in.q.cview(), in.k.cview(), in.v.cview(), o.out.view, opt);
  EXPECT_EQ(record.variant, Variant::kLsh);
  return o;
}

// The library (every target) and the reference agree on c's inputs (k passed to the library
// even when shared: it must not be read). The reference through the variant table's entry
// (reference::lsh at the default scale 1/√D).
inline void expect_matches_reference(const LshCase& c, std::uint32_t seed) {
  const RotationsOf rot(c);
  std::optional<Inputs> in = safe_inputs(c, rot.view, seed);
  ASSERT_TRUE(in.has_value()) << "no inputs with a safe hash margin in 50 draws: " << describe(c);
  for (std::int64_t d = 0; d < c.dim && c.zero_rows; ++d) {
    in->q.view.at(0, 0, 1, d) = 0.0f;
    in->k.view.at(0, 0, 2, d) = 0.0f;
  }
  const AttentionOptions opt = options_of(c, rot.view);
  const reference::Result ref =
      reference::variant(in->q.cview(), in->k.cview(), in->v.cview(),
                         ConcreteSpec{std::get<LshSpec>(opt.variant)}, opt.mask, std::nullopt);
  for_each_target([&] {
    const Outputs o = run(c, *in, opt);
    const double error = reference::max_relative_error(o.out.view, ref);
    worst_error.add(error);
    EXPECT_LE(error, kTolerance) << describe(c);
    expect_lse_near(o.lse.storage, ref.lse, describe(c));
  });
}

}  // namespace seqattn::testing::lsh
