// Reformer's LSH attention against the double reference written from its definition, on every
// compiled Highway target, on inputs whose hash margin is safe (docs/architecture.md, "LSH
// attention", numerics); its reduction to dense attention with the self rule when a window
// holds every key, the seeded rotations' stream, the same bits for any thread count, the NaN
// rules, and the options it refuses.
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

namespace seqattn::testing {
namespace {

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

std::string describe(const LshCase& c) {
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

double hash_margin(const ConstTensor& x, const MatrixView<const float>& rot) {
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
std::optional<Inputs> safe_inputs(const LshCase& c, const MatrixView<const float>& rot,
                                  std::uint32_t seed) {
  for (std::uint32_t attempt = 0; attempt < 50; ++attempt) {
    Inputs in(c, seed + 7919 * attempt);
    double margin = hash_margin(in.q.cview(), rot);
    if (!c.spec.shared_qk) margin = std::min(margin, hash_margin(in.k.cview(), rot));
    if (margin >= kMinMargin) return in;
  }
  return std::nullopt;
}

AttentionOptions options_of(const LshCase& c, const MatrixView<const float>& rot) {
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
double finite_error(const std::vector<T>& actual, const std::vector<double>& expected) {
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

void expect_lse_near(const std::vector<float>& actual, const std::vector<double>& expected,
                     const std::string& what) {
  const double error = finite_error(actual, expected);
  worst_error.add(error);
  EXPECT_LE(error, kTolerance) << what << " (lse)";
}

struct Outputs {
  OwnedTensor out, lse;
};

Outputs run(const LshCase& c, const Inputs& in, AttentionOptions opt) {
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
void expect_matches_reference(const LshCase& c, std::uint32_t seed) {
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

TEST(Lsh, MatchesReferenceOnOddShapes) {
  const std::int64_t chunks[] = {2, 5, 7, 16}, buckets[] = {0, 6, 2, 32};
  std::uint32_t n = 0;
  for (const std::int64_t s : {1, 3, 17, 80, 257}) {
    for (const bool shared : {true, false}) {
      for (const bool causal : {false, true}) {
        const LshCase c{.seq = s,
                        .dim = s == 80 ? 64 : 17,
                        .dim_v = s == 80 ? 24 : (s == 257 ? 9 : 17),
                        .spec = {1 + n % 3, buckets[(n / 2) % 4], chunks[n % 4], shared, n, {}},
                        .causal = causal};
        expect_matches_reference(c, 100 * n + 1);
        ++n;
      }
    }
  }
}

TEST(Lsh, GqaKeyLengthsAndLayouts) {
  LshCase c{.batch = 3,
            .heads_q = 4,
            .heads_kv = 2,
            .seq = 257,
            .dim = 33,
            .dim_v = 24,
            .spec = {.hashes = 3, .chunk_length = 8, .shared_qk = false},
            .key_lengths = {0, 101, 257}};
  for (const bool causal : {false, true}) {
    c.causal = causal;
    c.layout = causal ? Layout::kBSHD : Layout::kBHSD;
    c.pad = causal ? 3 : 0;
    expect_matches_reference(c, causal ? 11 : 12);
  }
  // Shared keys need H_q = H_kv; a length of 1 leaves row 0 self-only in every round.
  c.heads_q = c.heads_kv = 2;
  c.spec.shared_qk = true;
  c.key_lengths = {1, 0, 100};
  for (const bool causal : {false, true}) {
    c.causal = causal;
    expect_matches_reference(c, causal ? 13 : 14);
  }
}

// Segments whose chunk windows start differently but have the same extents: the kernel gets
// one ChunkWindows per thread, its rows rewritten in place per segment, so the kernel must not
// keep the first segment's block mask (the windows' structure is not fixed). Key length 4106
// in chunks of 256 runs segments of 8, 8 and 1 chunks, the first after the short last chunk
// (10 keys); 4321 in chunks of 64 does the same on AVX2's 16-key tiles. Keeping the mask
// measurably dropped keys 0..191 of the middle segment.
TEST(Lsh, SegmentsOfEqualExtentsWithDifferentWindows) {
  for (const auto& [seq, chunk] : {std::pair<std::int64_t, std::int64_t>{4106, 256}, {4321, 64}}) {
    const LshCase c{.seq = seq,
                    .dim = 16,
                    .dim_v = 8,
                    .spec = {.hashes = 1, .buckets = 2, .chunk_length = chunk, .shared_qk = false}};
    expect_matches_reference(c, 21);
  }
}

// Given rotations, read through their row stride; a zero q and k row hash to bucket 0.
TEST(Lsh, GivenRotationsWithAPaddedStride) {
  for (const bool shared : {true, false}) {
    for (const std::int64_t hashes : {1, 3}) {
      for (const std::int64_t buckets : {0, 8}) {  // 0: from the columns; 8 = 2·4
        const LshCase c{.seq = 80,
                        .dim = 20,
                        .dim_v = 7,
                        .spec = {hashes, buckets, 6, shared, 5, {}},
                        .causal = buckets == 8,
                        .given_half = 4,
                        .zero_rows = true};
        expect_matches_reference(c, static_cast<std::uint32_t>(hashes * 10 + buckets));
      }
    }
  }
}

// Long enough for many chunks per round at the default parameters (128 buckets).
TEST(LshOracle, DefaultParametersOnALongSequence) {
  for (const bool shared : {true, false}) {
    const LshCase c{.seq = 4097,
                    .dim = 64,
                    .dim_v = 64,
                    .spec = {.hashes = 2, .shared_qk = shared},
                    .causal = !shared,
                    .key_lengths = {4000}};
    expect_matches_reference(c, shared ? 21 : 22);
  }
}

// With at most two chunks (c >= L / 2) every window holds every valid key, so each round is
// dense attention over j < L (j <= i when causal, j != i when shared, keys q RMS-normalised)
// and lse = dense lse + log n_hashes; a shared row seeing nothing is v_i with lse s_ii + log n.
TEST(Lsh, WindowHoldingEveryKeyIsDenseWithTheSelfRule) {
  for (const bool shared : {true, false}) {
    for (const std::int64_t seq : {1, 2, 9, 64}) {
      for (const bool causal : {false, true}) {
        for (const std::int64_t chunk : {seq, (seq + 1) / 2, std::int64_t{1} << 20}) {
          const LshCase c{
              .batch = 2,
              .heads_q = shared ? 2 : 4,
              .heads_kv = 2,
              .seq = seq,
              .dim = 8,
              .dim_v = 5,
              .spec = {chunk == seq ? 1 : 4, chunk == seq ? 16 : 0, chunk, shared, 3, {}},
              .causal = causal,
              .key_lengths = {seq, seq / 2}};
          const Inputs in(c, static_cast<std::uint32_t>(seq + chunk));
          // Shared keys: q RMS-normalised, rounded to float (q and normed are contiguous).
          OwnedTensor normed = make_zeros(c.batch, c.heads_q, seq, c.dim);
          for (size_t row = 0; row < normed.storage.size(); row += c.dim) {
            double ss = 0;
            for (std::int64_t d = 0; d < c.dim; ++d) ss += std::pow(in.q.storage[row + d], 2);
            const double rms = std::sqrt(ss / static_cast<double>(c.dim) + 1e-6);
            for (std::int64_t d = 0; d < c.dim; ++d)
              normed.storage[row + d] = static_cast<float>(in.q.storage[row + d] / rms);
          }
          const ConstTensor keys = shared ? normed.cview() : in.k.cview();
          const AttentionOptions opt = options_of(c, {});
          const double scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
          const auto length = [&](std::int64_t b) { return c.key_lengths[b]; };
          reference::Result expected =
              reference::dense(in.q.cview(), keys, in.v.cview(), opt.mask, scale,
                               [&](std::int64_t b, std::int64_t, std::int64_t i, std::int64_t j) {
                                 return i < length(b) && !(shared && j == i);
                               });
          const double log_n = std::log(static_cast<double>(c.spec.hashes));
          for (std::int64_t b = 0; b < c.batch; ++b) {
            for (std::int64_t h = 0; h < c.heads_q; ++h) {
              for (std::int64_t i = 0; i < seq; ++i) {
                double& lse = expected.lse[static_cast<size_t>((b * c.heads_q + h) * seq + i)];
                if (i >= length(b)) continue;
                if (!std::isinf(lse)) {
                  lse += log_n;
                  continue;
                }
                ASSERT_TRUE(shared) << "a separate row sees at least itself";
                double s_ii = 0;
                for (std::int64_t d = 0; d < c.dim; ++d) {
                  s_ii += double{in.q.view.at(b, h, i, d)} * normed.view.at(b, h, i, d);
                }
                lse = s_ii * scale + log_n;
                for (std::int64_t d = 0; d < c.dim_v; ++d) {
                  expected.out[static_cast<size_t>(((b * c.heads_q + h) * seq + i) * c.dim_v + d)] =
                      in.v.view.at(b, h, i, d);
                }
              }
            }
          }
          const std::string what = describe(c);
          const reference::Result ref =
              reference::lsh(in.q.cview(), in.k.cview(), in.v.cview(), c.spec, opt.mask, scale);
          EXPECT_LE(finite_error(ref.out, expected.out), 1e-6) << "reference: " << what;
          EXPECT_LE(finite_error(ref.lse, expected.lse), 1e-6) << "reference: " << what;
          for_each_target([&] {
            const Outputs o = run(c, in, opt);
            EXPECT_LE(reference::max_relative_error(o.out.view, expected), kTolerance) << what;
            expect_lse_near(o.lse.storage, expected.lse, what);
          });
        }
      }
    }
  }
}

// seqattn's Gaussian stream, written again from the definition: splitmix64 from
// seed ^ 0x5e9a77e5eed, uniforms (bits >> 11 + 0.5)·2^-53, Box-Muller r·cos then r·sin.
std::vector<double> gaussian_stream(std::uint64_t seed, size_t n) {
  std::uint64_t state = seed ^ 0x5e9a77e5eedULL;
  const auto uniform = [&] {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (static_cast<double>(z >> 11) + 0.5) * 0x1.0p-53;
  };
  std::vector<double> out;
  while (out.size() < n) {
    const double u1 = uniform(), u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    out.push_back(r * std::cos(2.0 * M_PI * u2));
    out.push_back(r * std::sin(2.0 * M_PI * u2));
  }
  out.resize(n);
  return out;
}

TEST(Lsh, SeededRotationsFollowTheGaussianStream) {
  // Golden values (a third implementation, in Python, rounded to float).
  const std::vector<double> golden0 = {-0.0705712661, -0.524540365, 0.392897695, -0.116674684};
  const std::vector<double> golden7 = {0.0937275887, -0.409671307, -0.120519005, 0.708570182};
  for (const auto& [seed, golden] : {std::pair{0, golden0}, std::pair{7, golden7}}) {
    const std::vector<float> r = lsh_random_rotations(1, 2, 4, static_cast<std::uint64_t>(seed));
    ASSERT_EQ(r.size(), 4u);
    for (size_t e = 0; e < 4; ++e) EXPECT_NEAR(r[e], golden[e], 1e-8) << seed << " " << e;
  }
  for (const std::uint64_t seed : {std::uint64_t{0}, std::uint64_t{7}, ~std::uint64_t{0} - 3}) {
    const std::vector<float> r = lsh_random_rotations(2, 5, 6, seed);  // 2·5·3 = 30 draws
    const std::vector<double> g = gaussian_stream(seed, 30);
    ASSERT_EQ(r.size(), g.size());
    for (size_t e = 0; e < g.size(); ++e) EXPECT_FLOAT_EQ(r[e], static_cast<float>(g[e])) << e;
  }
  struct Shape {
    std::int64_t hashes, dim, buckets;
    std::uint64_t seed;
  };
  for (const Shape s :
       {Shape{1, 2, 4, 0}, Shape{3, 17, 6, 5}, Shape{2, 64, 128, 0}, Shape{1, 3, 2, 9}}) {
    EXPECT_EQ(lsh_random_rotations(s.hashes, s.dim, s.buckets, s.seed),
              linformer_random_projection(1, s.hashes * s.dim * s.buckets / 2, s.seed));
  }
}

// Pairs in parallel (B = 2), and one pair on both threads (B = 1: hashing, gathers, merges and
// the kernel split across them; S = 4500 spans three segments of 2048 slots).
TEST(Lsh, SameBitsForAnyThreadCount) {
  for (const bool shared : {true, false}) {
    for (const bool causal : {false, true}) {
      for (const std::int64_t batch : {2, 1}) {
        const std::int64_t seq = batch == 2 ? 300 : 4500;
        const LshCase c{.batch = batch,
                        .heads_q = batch == 1 && shared ? 1 : 3,
                        .heads_kv = shared ? (batch == 1 ? 1 : 3) : 1,
                        .seq = seq,
                        .dim = 32,
                        .dim_v = 16,
                        .spec = {3, 0, 16, shared, 1, {}},
                        .causal = causal,
                        .key_lengths = batch == 2 ? std::vector<std::int64_t>{300, 211}
                                                  : std::vector<std::int64_t>{4321}};
        const Inputs in(c, 9);
        std::vector<std::vector<float>> outs, lses;
        for (const int threads : {1, 2}) {
          AttentionOptions opt = options_of(c, {});
          opt.threads = threads;
          Outputs o = run(c, in, opt);
          outs.push_back(std::move(o.out.storage));
          lses.push_back(std::move(o.lse.storage));
        }
        EXPECT_EQ(outs[0], outs[1]) << describe(c);
        EXPECT_EQ(lses[0], lses[1]) << describe(c);
      }
    }
  }
}

// cost(): hashes·(L·D·buckets + 2(D + D_v)·Σ_t |chunk t|·|window t|) per (batch, query head).
// S = 40, c = 16: chunks 16, 16, 8 with windows 16+8, 16+16, 8+16 (the last wraps to the first).
TEST(Lsh, CostCountsHashingAndEveryWindowPair) {
  const LshCase c{.batch = 2,
                  .heads_q = 2,
                  .heads_kv = 1,
                  .seq = 40,
                  .dim = 8,
                  .dim_v = 4,
                  .spec = {3, 6, 16, false, 1, {}},
                  .key_lengths = {40, 16}};
  const Inputs in(c, 5);
  OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v);
  const RunRecord r = attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, options_of(c, {}));
  const double pairs_40 = 16.0 * 24 + 16.0 * 32 + 8.0 * 24, pairs_16 = 16.0 * 16;
  const double per_head = (40.0 + 16.0) * 8 * 6 + 2.0 * (8 + 4) * (pairs_40 + pairs_16);
  EXPECT_DOUBLE_EQ(r.flops, 2 * 3 * per_head);
}

bool row_has_nan(const Tensor& t, std::int64_t b, std::int64_t h, std::int64_t i) {
  for (std::int64_t d = 0; d < t.shape[3]; ++d) {
    if (std::isnan(t.at(b, h, i, d))) return true;
  }
  return false;
}

// Padding positions (>= key_lengths) are neither hashed nor seen: NaN in their q, k and v
// reaches no row (those rows are 0, lse -inf), and shared attention never reads k.
TEST(Lsh, NanInPaddingReachesNoRow) {
  for (const bool shared : {true, false}) {
    for (const bool causal : {false, true}) {
      const LshCase c{.heads_q = 2,
                      .heads_kv = 2,
                      .dim = 8,
                      .dim_v = 8,
                      .spec = {3, 0, 4, shared, 2, {}},
                      .causal = causal,
                      .key_lengths = {10}};
      const RotationsOf rot(c);
      std::optional<Inputs> in = safe_inputs(c, rot.view, 30);
      ASSERT_TRUE(in.has_value());
      for (OwnedTensor* t : {&in->q, &in->k, &in->v}) {
        for (std::int64_t h = 0; h < 2; ++h) {
          for (std::int64_t i = 0; i < c.seq; ++i) {
            for (std::int64_t d = 0; d < t->view.shape[3]; ++d) {
              if (i >= 10 || (shared && t == &in->k)) t->view.at(0, h, i, d) = kNan;
            }
          }
        }
      }
      const AttentionOptions opt = options_of(c, {});
      const reference::Result ref = reference::lsh(in->q.cview(), in->k.cview(), in->v.cview(),
                                                   c.spec, opt.mask, 1.0f / std::sqrt(8.0f));
      for_each_target([&] {
        const Outputs o = run(c, *in, opt);
        EXPECT_LE(reference::max_relative_error(o.out.view, ref), kTolerance) << describe(c);
        expect_lse_near(o.lse.storage, ref.lse, describe(c));  // -inf past the length
      });
    }
  }
}

// A NaN value (or key, or query) reaches exactly the rows whose visible set holds it: with one
// chunk, by the rule (shared: not row j itself, which never sees its own key unless
// self-only); with small chunks, where the reference's rows are NaN, the finite rows equal it.
TEST(Lsh, NanReachesExactlyTheRowsThatSeeIt) {
  const std::int64_t j0 = 5;
  for (const bool shared : {true, false}) {
    for (const bool causal : {false, true}) {
      for (const std::int64_t chunk : {64, 4}) {
        for (const char where : {'v', 'k', 'q'}) {
          if (shared && where == 'k') continue;
          const LshCase c{.seq = 33,
                          .dim = 8,
                          .dim_v = 8,
                          .spec = {2, 0, chunk, shared, 4, {}},
                          .causal = causal};
          const RotationsOf rot(c);
          std::optional<Inputs> in = safe_inputs(c, rot.view, 50);
          ASSERT_TRUE(in.has_value());
          OwnedTensor& t = where == 'v' ? in->v : (where == 'k' ? in->k : in->q);
          for (std::int64_t d = 0; d < t.view.shape[3]; ++d) t.view.at(0, 0, j0, d) = kNan;
          const AttentionOptions opt = options_of(c, {});
          const reference::Result ref = reference::lsh(in->q.cview(), in->k.cview(), in->v.cview(),
                                                       c.spec, opt.mask, 1.0f / std::sqrt(8.0f));
          const std::string what = describe(c) + " NaN in " + where;
          for_each_target([&] {
            const Outputs o = run(c, *in, opt);
            double max_ref = 0, max_err = 0;
            for (std::int64_t i = 0; i < c.seq; ++i) {
              bool sees = std::isnan(ref.out_at(0, 0, i, 0));
              if (chunk >= c.seq) {  // one chunk: the rule alone
                if (where != 'q') {
                  sees = (!causal || j0 <= i) && !(shared && i == j0);
                } else {  // q_j0 is row j0's query, and when shared key j0 too
                  sees = i == j0 || (shared && (!causal || i > j0));
                }
                EXPECT_EQ(std::isnan(ref.out_at(0, 0, i, 0)), sees)
                    << what << " reference row " << i;
              }
              EXPECT_EQ(row_has_nan(o.out.view, 0, 0, i), sees) << what << " row " << i;
              if (sees) continue;
              for (std::int64_t d = 0; d < c.dim_v; ++d) {
                max_ref = std::max(max_ref, std::abs(ref.out_at(0, 0, i, d)));
                max_err =
                    std::max(max_err, std::abs(o.out.view.at(0, 0, i, d) - ref.out_at(0, 0, i, d)));
              }
            }
            EXPECT_LE(max_err / std::max(max_ref, 1e-30), kTolerance) << what;
          });
        }
      }
    }
  }
}

struct ErrorFixture {
  OwnedTensor q = make_tensor(1, 2, 17, 8, Layout::kBHSD, 1);
  OwnedTensor k = make_tensor(1, 2, 17, 8, Layout::kBHSD, 2);
  OwnedTensor v = make_tensor(1, 2, 17, 8, Layout::kBHSD, 3);
  OwnedTensor out = make_zeros(1, 2, 17, 8);
  AttentionOptions opt;
  ErrorFixture() { opt.variant = LshSpec{}; }
  LshSpec& spec() { return std::get<LshSpec>(opt.variant); }
  // The Error attend() throws, with out left as it was.
  Error call() {
    std::fill(out.storage.begin(), out.storage.end(), 7.0f);
    try {
      attend(q.cview(), k.cview(), v.cview(), out.view, opt);
    } catch (const Error& e) {
      EXPECT_TRUE(
          std::all_of(out.storage.begin(), out.storage.end(), [](float x) { return x == 7.0f; }))
          << "out written before refusing: " << e.what();
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorKind::kIo, "", "", "");
  }
};

void expect_error(ErrorFixture& f, ErrorKind kind, const std::string& argument_part,
                  const std::string& what) {
  const Error e = f.call();
  EXPECT_EQ(e.kind(), kind) << what << ": " << e.what();
  EXPECT_NE(e.argument().find(argument_part), std::string::npos)
      << what << ": argument '" << e.argument() << "' does not name " << argument_part;
}

TEST(Lsh, RefusesWhatItCannotHonour) {
  {
    ErrorFixture f;  // the fixture's own call is valid
    EXPECT_NO_THROW(attend(f.q.cview(), f.k.cview(), f.v.cview(), f.out.view, f.opt));
  }
  {
    ErrorFixture f;  // cross attention (and decode shapes): S_q != S_k
    f.q = make_tensor(1, 2, 1, 8, Layout::kBHSD, 4);
    f.out = make_zeros(1, 2, 1, 8);
    expect_error(f, ErrorKind::kUnsupported, "S_q", "S_q != S_k");
  }
  {
    ErrorFixture f;  // shared keys are the queries: H_q = H_kv
    f.q = make_tensor(1, 4, 17, 8, Layout::kBHSD, 4);
    f.out = make_zeros(1, 4, 17, 8);
    expect_error(f, ErrorKind::kUnsupported, "qk", "shared with H_q != H_kv");
  }
  std::vector<std::uint8_t> keep(2 * 17 * 17, 1);
  const OwnedTensor bias = make_zeros(1, 2, 17, 17);
  OwnedTensor weights = make_zeros(1, 2, 17, 17);
  const std::vector<std::pair<std::string, std::function<void(AttentionOptions&)>>> options = {
      {"mask.keep",
       [&](AttentionOptions& o) {
         o.mask.keep = bhsd<const std::uint8_t>(keep.data(), 1, 2, 17, 17);
       }},
      {"mask.bias", [&](AttentionOptions& o) { o.mask.bias = bias.cview(); }},
      {"weights", [&](AttentionOptions& o) { o.weights = weights.view; }},
      {"options.rope", [](AttentionOptions& o) { o.rope = RotaryEmbedding{}; }},
      {"options.alibi", [](AttentionOptions& o) { o.alibi = Alibi{}; }}};
  for (const auto& [name, set] : options) {
    ErrorFixture f;
    set(f.opt);
    expect_error(f, ErrorKind::kUnsupported, name, name);
  }
  for (const std::int64_t hashes : {0, 65, -1}) {
    ErrorFixture f;
    f.spec().hashes = hashes;
    expect_error(f, ErrorKind::kInvalidArgument, "hashes", "hashes " + std::to_string(hashes));
  }
  for (const std::int64_t buckets : {3, 65538, -2, 1}) {
    ErrorFixture f;
    f.spec().buckets = buckets;
    expect_error(f, ErrorKind::kInvalidArgument, "buckets", "buckets " + std::to_string(buckets));
  }
  for (const std::int64_t chunk :
       {std::int64_t{0}, std::int64_t{-1}, (std::int64_t{1} << 20) + 1}) {
    ErrorFixture f;
    f.spec().chunk_length = chunk;
    expect_error(f, ErrorKind::kInvalidArgument, "chunk_length",
                 "chunk_length " + std::to_string(chunk));
  }
  // Rotations: rows must be hashes·D (2·8), cols M >= 1 with 2M = buckets when buckets != 0.
  const std::vector<float> r(17 * 8, 0.5f);
  struct Given {
    std::int64_t rows, cols, stride, buckets;
  };
  for (const Given g : {Given{15, 4, 4, 0}, Given{17, 4, 4, 0}, Given{16, 3, 4, 8},
                        Given{16, 4, 4, 6}, Given{16, 0, 4, 0}, Given{16, 4, 3, 0}}) {
    ErrorFixture f;
    f.spec().hashes = 2;
    f.spec().buckets = g.buckets;
    f.spec().rotations = {r.data(), g.rows, g.cols, g.stride};
    expect_error(f, ErrorKind::kInvalidArgument, "lsh.rotations",
                 "rotations " + std::to_string(g.rows) + "x" + std::to_string(g.cols) + " stride " +
                     std::to_string(g.stride) + " buckets " + std::to_string(g.buckets));
  }
}

}  // namespace
}  // namespace seqattn::testing
