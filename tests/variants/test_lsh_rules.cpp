// Reformer's LSH attention, its rules beside the reference comparison (test_lsh.cpp): the
// seeded rotations' stream, the same bits for any thread count, the cost, the NaN rules, and
// the options it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/variants/lsh_test_support.hpp"

namespace seqattn::testing {
namespace {

using namespace lsh;  // NOLINT: the LSH tests' own helpers

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
