// Reformer's LSH attention against the double reference written from its definition, on every
// compiled Highway target, on inputs whose hash margin is safe (docs/architecture.md, "LSH
// attention", numerics); its reduction to dense attention with the self rule when a window
// holds every key. test_lsh_rules.cpp has the seeded rotations' stream, the same bits for any
// thread count, the cost, the NaN rules, and the options it refuses.
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

// Segments whose chunk windows start differently but have the same extents: each geometry
// (rows, previous chunk, its length) has its own kept ChunkWindows (lsh_windows.hpp), so a
// segment must not get another's windows and block mask; when one structure was rewritten in
// place per segment, a kept mask dropped keys (the case below failed). Key length 4106
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

}  // namespace
}  // namespace seqattn::testing
