// Hierarchical attention against the double reference written from its definition, on every
// compiled Highway target; its block structure (every pair seen at exactly one level), the
// causal form's independence from later tokens, determinism, and the options it refuses.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"
#include "variants/hierarchical/hierarchy.hpp"

namespace seqattn::testing {
namespace {

constexpr double kTolerance = 1e-5;

struct HierarchicalCase {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq = 17, dim = 16, dim_v = 16;
  HierarchicalSpec spec{4, 0};
  bool causal = false;
  Layout layout = Layout::kBHSD;
  std::int64_t pad = 0;
  std::vector<std::int64_t> key_lengths;
  float range = 2.0f;  // inputs uniform in [-range, range]: peaked enough to tell keys apart
};

std::string describe(const HierarchicalCase& c) {
  std::ostringstream s;
  s << "B=" << c.batch << " H=" << c.heads_q << "/" << c.heads_kv << " S=" << c.seq
    << " D=" << c.dim << "/" << c.dim_v << " b=" << c.spec.block << " levels=" << c.spec.levels
    << " causal=" << c.causal << " pad=" << c.pad << " lengths=" << c.key_lengths.size();
  return s.str();
}

struct Inputs {
  OwnedTensor q, k, v;
  Inputs(const HierarchicalCase& c, std::uint32_t seed)
      : q(make_tensor(c.batch, c.heads_q, c.seq, c.dim, c.layout, seed, c.pad, -c.range, c.range)),
        k(make_tensor(c.batch, c.heads_kv, c.seq, c.dim, c.layout, seed + 1, c.pad, -c.range,
                      c.range)),
        v(make_tensor(c.batch, c.heads_kv, c.seq, c.dim_v, c.layout, seed + 2, c.pad)) {}
};

AttentionOptions options_of(const HierarchicalCase& c) {
  AttentionOptions opt;
  opt.variant = c.spec;
  opt.mask.causal = c.causal;
  opt.mask.key_lengths = c.key_lengths;
  return opt;
}

void expect_matches_reference(const HierarchicalCase& c, std::uint32_t seed) {
  const Inputs in(c, seed);
  const AttentionOptions base = options_of(c);
  const double scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  const reference::Result ref =
      reference::hierarchical(in.q.cview(), in.k.cview(), in.v.cview(), c.spec, base.mask, scale);
  for_each_target([&] {
    OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v, c.layout, c.pad);
    OwnedTensor lse = make_zeros(c.batch, c.heads_q, c.seq, 1);
    AttentionOptions opt = base;
    opt.lse = lse.view;
    const RunRecord record = attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
    EXPECT_EQ(record.variant, Variant::kHierarchical);
    const double error = reference::max_relative_error(out.view, ref);
    worst_error.add(error);
    EXPECT_LE(error, kTolerance) << describe(c);
    for (size_t r = 0; r < ref.lse.size(); ++r) {
      const double expected = ref.lse[r], actual = lse.storage[r];
      if (std::isinf(expected)) {
        EXPECT_EQ(actual, expected) << describe(c) << " row " << r;
      } else {
        EXPECT_NEAR(actual, expected, 1e-5 * std::max(1.0, std::abs(expected))) << describe(c);
      }
    }
  });
}

TEST(Hierarchical, MatchesReferenceOnOddShapes) {
  for (const std::int64_t s : {1, 3, 17, 80, 257}) {
    for (const std::int64_t block : {2, 4, 16}) {
      for (const bool causal : {false, true}) {
        HierarchicalCase c;
        c.seq = s;
        c.spec = {block, 0};
        c.causal = causal;
        c.dim = s == 80 ? 64 : 17;
        c.dim_v = s == 80 ? 80 : 3;
        expect_matches_reference(c, static_cast<std::uint32_t>(s * 10 + block));
      }
    }
  }
}

TEST(Hierarchical, LevelsKeyLengthsGqaAndStridedLayouts) {
  HierarchicalCase c;
  c.batch = 3;
  c.heads_q = 4;
  c.heads_kv = 2;
  c.seq = 300;
  c.dim = 33;
  c.dim_v = 17;
  c.key_lengths = {0, 101, 300};
  for (const std::int64_t levels : {0, 1, 2, 30}) {
    for (const bool causal : {false, true}) {
      c.spec = {8, levels};
      c.causal = causal;
      c.layout = levels % 2 == 0 ? Layout::kBSHD : Layout::kBHSD;
      c.pad = levels % 2 == 0 ? 3 : 0;
      expect_matches_reference(c, static_cast<std::uint32_t>(levels + 7));
    }
  }
}

// Long enough for the kernel's segmented (ring) path at level 0 and many levels above it; the
// key length ends well inside the sequence.
TEST(HierarchicalOracle, LongSequenceAndBlockOf64) {
  HierarchicalCase c;
  c.seq = 4999;
  c.dim = 64;
  c.dim_v = 64;
  c.heads_q = 2;
  c.spec = {64, 0};
  c.key_lengths = {4321};
  for (const bool causal : {false, true}) {
    c.causal = causal;
    expect_matches_reference(c, causal ? 11u : 12u);
  }
}

// Level 0 runs in windows of 1024 rows, each coarsened and its ready coarse blocks attended
// right after: a block size that does not divide the window (blocks straddle windows at every
// level), a key length ending inside a window, GQA, several batches.
TEST(HierarchicalOracle, WindowsWithBlocksThatStraddleThem) {
  HierarchicalCase c;
  c.batch = 2;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.seq = 3001;
  c.dim = 8;
  c.dim_v = 5;
  c.key_lengths = {3001, 1777};
  for (const std::int64_t block : {6, 22}) {
    for (const bool causal : {false, true}) {
      c.spec = {block, 0};
      c.causal = causal;
      c.layout = causal ? Layout::kBSHD : Layout::kBHSD;
      expect_matches_reference(c, static_cast<std::uint32_t>(block + (causal ? 1 : 0)));
    }
  }
}

// Levels above the windows' reach (S > 2·b·2^kWindowLevels): coarsened from the last windowed
// level after the windows, then attended in a segment of their own (non-causal) or window by
// window again (causal, whose fine queries are copied, with RoPE rotated, a second time). With
// b = 2 level 11's first keys are seen from row 4096 on; S = 5200 gives two windows that see
// them, so a window reading another window's queries fails.
TEST(HierarchicalOracle, LevelsAboveTheWindows) {
  HierarchicalCase c;
  c.heads_q = 2;
  c.heads_kv = 1;
  c.seq = 5200;
  c.dim = 8;
  c.dim_v = 5;
  c.key_lengths = {5150};
  c.spec = {2, 0};
  ASSERT_GT(detail::levels_needed(c.seq, c.spec.block), detail::kWindowLevels);
  const Inputs in(c, 41);
  for (const bool causal : {false, true}) {
    c.causal = causal;
    expect_matches_reference(c, causal ? 42 : 43);
    AttentionOptions opt = options_of(c);
    RotaryEmbedding rope;
    rope.theta = 500;
    opt.rope = rope;
    const reference::Result ref =
        reference::hierarchical(in.q.cview(), in.k.cview(), in.v.cview(), c.spec, opt.mask,
                                1.0 / std::sqrt(static_cast<double>(c.dim)), rope);
    for_each_target([&] {
      OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v);
      attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
      EXPECT_LE(reference::max_relative_error(out.view, ref), kTolerance)
          << "RoPE, causal=" << causal;
    });
  }
}

// Up to twice the block every pair is at level 0: the result is exact dense attention.
TEST(Hierarchical, ShortSequencesAreExactAttention) {
  const OwnedTensor q = make_tensor(1, 2, 32, 8, Layout::kBHSD, 1);
  const OwnedTensor k = make_tensor(1, 2, 32, 8, Layout::kBHSD, 2);
  const OwnedTensor v = make_tensor(1, 2, 32, 8, Layout::kBHSD, 3);
  for (const bool causal : {false, true}) {
    OwnedTensor out = make_zeros(1, 2, 32, 8);
    AttentionOptions opt;
    opt.variant = HierarchicalSpec{16, 0};
    opt.mask.causal = causal;
    attend(q.cview(), k.cview(), v.cview(), out.view, opt);
    const reference::Result dense =
        reference::dense(q.cview(), k.cview(), v.cview(), opt.mask, 1.0 / std::sqrt(8.0));
    EXPECT_LE(reference::max_relative_error(out.view, dense), kTolerance);
  }
}

// The block structure: with levels = 0 every (query, key) pair (causal: every past pair) is
// seen at exactly one level, through the ranges the kernel is given.
TEST(Hierarchical, EveryPairIsSeenAtExactlyOneLevel) {
  using detail::LevelSide;
  for (const std::int64_t seq : {1, 5, 64, 130, 777}) {
    for (const std::int64_t block : {2, 6, 16}) {
      const std::int64_t levels = detail::levels_needed(seq, block);
      for (std::int64_t i = 0; i < seq; ++i) {
        std::vector<int> seen(static_cast<size_t>(seq), 0);
        const detail::KeyRangeOfRow r0 = detail::level0_range(i, block, seq);
        for (std::int64_t j = r0.lo; j < r0.hi; ++j) ++seen[static_cast<size_t>(j)];
        for (std::int64_t l = 1; l <= levels; ++l) {
          const std::int64_t len = detail::level_length(seq, l);
          for (const LevelSide side : {LevelSide::kLeft, LevelSide::kRight}) {
            const detail::KeyRangeOfRow r = detail::coarse_range(i >> l, block, side, len);
            for (std::int64_t u = r.lo; u < r.hi; ++u) {
              for (std::int64_t j = u << l; j < std::min((u + 1) << l, seq); ++j) {
                ++seen[static_cast<size_t>(j)];
                if (side == LevelSide::kLeft) {
                  EXPECT_LT(j, i) << "a left coarse key must precede the query";
                } else {
                  EXPECT_GT(j, i);
                }
              }
            }
          }
        }
        for (std::int64_t j = 0; j < seq; ++j) {
          ASSERT_EQ(seen[static_cast<size_t>(j)], 1)
              << "S=" << seq << " b=" << block << " i=" << i << " j=" << j;
        }
      }
    }
  }
}

// The stored order makes each row's two sides one range: the stored positions a row visits
// hold exactly its left and right coarse keys (causal: the left ones), plus dummies only.
TEST(Hierarchical, StoredOrderGivesEachRowOneRangeOfItsKeys) {
  using detail::LevelSide;
  for (const std::int64_t len : {1, 2, 7, 64, 100, 333}) {
    for (const std::int64_t block : {2, 4, 6, 16}) {
      for (const bool causal : {false, true}) {
        const detail::LevelLayout layout = detail::make_level_layout(len, block, !causal);
        std::vector<std::int64_t> token_at(static_cast<size_t>(layout.key_rows), -1);
        for (std::int64_t u = 0; u < len; ++u) {
          const std::int64_t p = layout.key_at(u);
          ASSERT_LT(p, layout.key_rows);
          ASSERT_EQ(token_at[static_cast<size_t>(p)], -1) << "two tokens share a position";
          token_at[static_cast<size_t>(p)] = u;
        }
        EXPECT_EQ(layout.key_dummies.size(), static_cast<size_t>(layout.key_rows - len));
        for (std::int64_t t = 0; t < len; ++t) {
          std::vector<std::int64_t> expected, seen;
          for (const LevelSide side : {LevelSide::kLeft, LevelSide::kRight}) {
            if (causal && side == LevelSide::kRight) continue;
            const detail::KeyRangeOfRow r = detail::coarse_range(t, block, side, len);
            for (std::int64_t u = r.lo; u < r.hi; ++u) expected.push_back(u);
          }
          const detail::KeyRangeOfRow stored = layout.row_keys(t);
          for (std::int64_t p = stored.lo; p < stored.hi; ++p) {
            if (token_at[static_cast<size_t>(p)] >= 0)
              seen.push_back(token_at[static_cast<size_t>(p)]);
          }
          std::sort(seen.begin(), seen.end());
          EXPECT_EQ(seen, expected)
              << "len=" << len << " b=" << block << " t=" << t << " causal=" << causal;
        }
      }
    }
  }
}

// The non-causal schedule lists every coarse query of every level exactly once, each in a run
// of consecutive rows whose keys (relative to the run's first key) stay inside the run's keys.
TEST(Hierarchical, ScheduleListsEveryCoarseQueryOnce) {
  for (const std::int64_t seq : {5, 1024, 3001, 9000}) {
    for (const std::int64_t block : {2, 6, 64}) {
      for (const std::int64_t ring : {0, 2, 3}) {
        const std::int64_t levels = detail::levels_needed(seq, block);
        std::vector<detail::LevelLayout> layouts;
        for (std::int64_t l = 1; l <= levels; ++l) {
          layouts.push_back(
              detail::make_level_layout(detail::level_length(seq, l), block, true, ring));
        }
        const std::vector<std::int64_t> key_base = detail::level_key_bases(layouts);
        for (const std::int64_t window : {std::int64_t{1024}, seq}) {
          const auto windows = detail::level0_windows(seq, block, window, false);
          const std::int64_t window_levels =
              window == seq ? levels : std::min<std::int64_t>(levels, 10);
          const detail::CoarseSchedule s = detail::coarse_schedule(layouts, windows, window_levels);
          ASSERT_EQ(s.segments.size(), windows.size() + 1);
          // Each schedule row: the run holding it, and the query row the run reads for it.
          std::vector<std::int64_t> query_of(static_cast<size_t>(s.rows), -1);
          std::int64_t next = 0;
          for (const auto& segment : s.segments) {
            for (const detail::CoarseRun& run : segment) {
              EXPECT_EQ(run.first_row, next) << "runs follow each other";
              for (std::int64_t r = 0; r < run.rows; ++r) {
                query_of[static_cast<size_t>(next + r)] = run.first_query + r;
                const detail::KeyRange keys = run.pattern.row_keys(r);
                if (keys.empty()) continue;
                EXPECT_GE(keys.lo, 0);
                EXPECT_LE(keys.hi, run.keys);
              }
              next += run.rows;
            }
          }
          EXPECT_EQ(next, s.rows);
          std::vector<int> listed(static_cast<size_t>(s.rows), 0);
          for (size_t level = 0; level < s.row.size(); ++level) {
            for (size_t t = 0; t < s.row[level].size(); ++t) {
              const std::int64_t r = s.row[level][t];
              ASSERT_GE(r, 0) << "S=" << seq << " b=" << block;
              ASSERT_LT(r, s.rows);
              ++listed[static_cast<size_t>(r)];
              EXPECT_EQ(query_of[static_cast<size_t>(r)],
                        key_base[level] + layouts[level].query_at(static_cast<std::int64_t>(t)))
                  << "S=" << seq << " b=" << block << " ring=" << ring << " l=" << level + 1
                  << " t=" << t;
            }
          }
          EXPECT_EQ(std::count(listed.begin(), listed.end(), 1), s.rows);
        }
      }
    }
  }
}

// In a ring of block slots (the levels the windows coarsen), a row's stored range still holds
// exactly its coarse keys (the right block through the mirror of slot 0 when it wrapped), plus
// dummies of the last block only.
TEST(Hierarchical, RingSlotsGiveEachRowOneRangeOfItsKeys) {
  using detail::LevelSide;
  for (const std::int64_t len : {7, 64, 100, 333, 1000}) {
    for (const std::int64_t block : {2, 6, 16}) {
      for (const bool causal : {false, true}) {
        for (const std::int64_t ring : {1, 2, 3, 5}) {
          if (!causal && ring < 2) continue;  // paired rows read two blocks of a parity
          const detail::LevelLayout layout = detail::make_level_layout(len, block, !causal, ring);
          std::vector<std::int64_t> dummies = layout.key_dummies;
          std::sort(dummies.begin(), dummies.end());
          for (std::int64_t t = 0; t < len; ++t) {
            std::vector<std::int64_t> expected;
            for (const LevelSide side : {LevelSide::kLeft, LevelSide::kRight}) {
              if (causal && side == LevelSide::kRight) continue;
              const detail::KeyRangeOfRow r = detail::coarse_range(t, block, side, len);
              for (std::int64_t u = r.lo; u < r.hi; ++u) expected.push_back(u);
            }
            const detail::KeyRangeOfRow stored = layout.row_keys(t);
            const std::int64_t width = std::max<std::int64_t>(stored.hi - stored.lo, 0);
            // The last block's empty positions count only where the row reads that block
            // (in a ring, its slot holds other blocks at other times).
            const std::int64_t I = t / block, last = layout.blocks - 1;
            const bool reads_last = I - 1 == last || (!causal && I + 1 == last);
            std::int64_t dummy_count = 0;
            for (const std::int64_t d : dummies)
              dummy_count += reads_last && d >= stored.lo && d < stored.hi;
            EXPECT_EQ(width, static_cast<std::int64_t>(expected.size()) + dummy_count)
                << "len=" << len << " b=" << block << " t=" << t << " ring=" << ring;
            for (const std::int64_t u : expected) {
              const std::int64_t at = layout.key_at(u), mirror = layout.key_mirror(u);
              const bool inside = (at >= stored.lo && at < stored.hi) ||
                                  (mirror >= stored.lo && mirror < stored.hi);
              EXPECT_TRUE(inside) << "len=" << len << " b=" << block << " t=" << t << " u=" << u
                                  << " ring=" << ring << " causal=" << causal;
              EXPECT_LT(std::max(at, mirror), layout.key_rows);
            }
          }
        }
      }
    }
  }
}

// RoPE rotates q and k at their positions before any averaging: level 0 on rotated copies of
// each window's rows, the coarse levels' means taken over the same rotated rows. Both layouts,
// partial rotary, offset, scaling, explicit positions, key lengths, GQA, causal or not; one
// window (S = 150) and three, with blocks that straddle the windows' edges (S = 2100).
TEST(HierarchicalOracle, RopeRotatesBeforeAveraging) {
  for (const std::int64_t seq : {150, 2100}) {
    HierarchicalCase c;
    c.batch = 2;
    c.heads_q = 4;
    c.heads_kv = 2;
    c.seq = seq;
    c.dim = 24;
    c.dim_v = 9;
    c.spec = {6, 0};
    c.key_lengths = {seq, seq * 77 / 150};
    const Inputs in(c, 31);
    for (const bool causal : {false, true}) {
      for (const RopeLayout layout : {RopeLayout::kHalves, RopeLayout::kInterleaved}) {
        RotaryEmbedding rope;
        rope.theta = 300;
        rope.layout = layout;
        rope.dims = causal ? 8 : 0;
        rope.offset = causal ? 1000 : 3;
        rope.linear_scaling = causal ? 2.0 : 1.0;
        if (layout == RopeLayout::kInterleaved && !causal) {
          for (std::int64_t i = 0; i < c.seq; ++i) {
            rope.q_positions.push_back((i * 37) % 1001);
            rope.k_positions.push_back((i * 37) % 1001);
          }
        }
        c.causal = causal;
        AttentionOptions opt = options_of(c);
        opt.rope = rope;
        const double scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
        const reference::Result ref = reference::hierarchical(
            in.q.cview(), in.k.cview(), in.v.cview(), c.spec, opt.mask, scale, rope);
        for_each_target([&] {
          OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v);
          attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
          const double error = reference::max_relative_error(out.view, ref);
          worst_error.add(error);
          EXPECT_LE(error, kTolerance)
              << "S=" << seq << " causal=" << causal << " layout=" << int(layout);
          OwnedTensor plain = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v);
          attend(in.q.cview(), in.k.cview(), in.v.cview(), plain.view, options_of(c));
          double diff = 0;
          for (size_t e = 0; e < out.storage.size(); ++e)
            diff = std::max(diff, static_cast<double>(std::abs(out.storage[e] - plain.storage[e])));
          EXPECT_GT(diff, 1e-3) << "RoPE must change the result";
        });
      }
    }
  }
}

// Causal outputs never depend on a later token: changing q, k and v after position p leaves
// rows <= p bitwise unchanged (a group's mean query would leak later queries; see the spec).
TEST(Hierarchical, CausalRowsIgnoreLaterTokens) {
  HierarchicalCase c;
  c.seq = 200;
  c.spec = {4, 0};
  c.causal = true;
  for_each_target([&] {
    Inputs a(c, 5), changed(c, 5);
    const std::int64_t p = 77;
    for (OwnedTensor* t : {&changed.q, &changed.k, &changed.v}) {
      for (std::int64_t i = p + 1; i < c.seq; ++i) {
        for (std::int64_t d = 0; d < t->view.shape[3]; ++d) t->view.at(0, 0, i, d) += 0.5f;
      }
    }
    OwnedTensor out_a = make_zeros(1, 1, c.seq, c.dim_v), out_b = make_zeros(1, 1, c.seq, c.dim_v);
    const AttentionOptions opt = options_of(c);
    attend(a.q.cview(), a.k.cview(), a.v.cview(), out_a.view, opt);
    attend(changed.q.cview(), changed.k.cview(), changed.v.cview(), out_b.view, opt);
    for (std::int64_t i = 0; i < c.seq; ++i) {
      for (std::int64_t d = 0; d < c.dim_v; ++d) {
        if (i <= p) {
          ASSERT_EQ(out_a.view.at(0, 0, i, d), out_b.view.at(0, 0, i, d)) << "row " << i;
        }
      }
    }
    EXPECT_NE(out_a.view.at(0, 0, c.seq - 1, 0), out_b.view.at(0, 0, c.seq - 1, 0));
  });
}

TEST(Hierarchical, SameBitsForAnyThreadCount) {
  // Four (batch, kv head) pairs: each thread takes whole pairs. One pair: every call (and
  // RoPE's rotation of each window) is split across the threads.
  for (const std::int64_t pairs : {4, 1}) {
    HierarchicalCase c;
    c.batch = pairs == 4 ? 2 : 1;
    c.heads_q = pairs == 4 ? 2 : 1;
    c.seq = 2000;
    c.dim = 32;
    c.dim_v = 32;
    c.spec = {16, 0};
    const Inputs in(c, 9);
    for (const bool causal : {false, true}) {
      for (const bool rope : {false, true}) {
        c.causal = causal;
        std::vector<std::vector<float>> outs;
        for (const int threads : {1, 2, 3}) {
          OwnedTensor out = make_zeros(c.batch, c.heads_q, c.seq, c.dim_v);
          AttentionOptions opt = options_of(c);
          opt.threads = threads;
          if (rope) opt.rope = RotaryEmbedding{};
          attend(in.q.cview(), in.k.cview(), in.v.cview(), out.view, opt);
          outs.push_back(out.storage);
        }
        EXPECT_EQ(outs[0], outs[1])
            << "pairs=" << pairs << " causal=" << causal << " rope=" << rope;
        EXPECT_EQ(outs[0], outs[2])
            << "pairs=" << pairs << " causal=" << causal << " rope=" << rope;
      }
    }
  }
}

struct ErrorFixture {
  OwnedTensor q = make_tensor(1, 1, 17, 8, Layout::kBHSD, 1);
  OwnedTensor k = make_tensor(1, 1, 17, 8, Layout::kBHSD, 2);
  OwnedTensor v = make_tensor(1, 1, 17, 8, Layout::kBHSD, 3);
  OwnedTensor out = make_zeros(1, 1, 17, 8);
  AttentionOptions opt;
  ErrorFixture() {
    std::fill(out.storage.begin(), out.storage.end(), 42.0f);
    opt.variant = HierarchicalSpec{4, 0};
  }
  Error call(const ConstTensor& query) {
    try {
      attend(query, k.cview(), v.cview(), out.view, opt);
    } catch (const Error& e) {
      EXPECT_TRUE(
          std::all_of(out.storage.begin(), out.storage.end(), [](float x) { return x == 42.0f; }));
      return e;
    }
    ADD_FAILURE() << "no error";
    return Error(ErrorKind::kIo, "", "", "");
  }
  Error call() { return call(q.cview()); }
};

TEST(Hierarchical, RefusesBadSpecsAndOptionsItCannotHonour) {
  for (const std::int64_t block : {std::int64_t{0}, std::int64_t{1}, std::int64_t{3},
                                   std::int64_t{-2}, (std::int64_t{1} << 20) + 2}) {
    ErrorFixture f;
    f.opt.variant = HierarchicalSpec{block, 0};
    const Error e = f.call();
    EXPECT_EQ(e.argument(), "hierarchical.block") << block;
    EXPECT_NE(std::string(e.what()).find(std::to_string(block)), std::string::npos) << e.what();
  }
  for (const std::int64_t levels : {-1, 41}) {
    ErrorFixture f;
    f.opt.variant = HierarchicalSpec{4, levels};
    EXPECT_EQ(f.call().argument(), "hierarchical.levels");
  }
  {
    ErrorFixture f;  // cross attention (and decode shapes): S_q != S_k
    OwnedTensor out = make_zeros(1, 1, 1, 8);
    OwnedTensor q1 = make_tensor(1, 1, 1, 8, Layout::kBHSD, 4);
    try {
      attend(q1.cview(), f.k.cview(), f.v.cview(), out.view, f.opt);
      ADD_FAILURE() << "no error";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
      EXPECT_NE(std::string(e.what()).find("S_q = 1, S_k = 17"), std::string::npos) << e.what();
    }
  }
  std::vector<std::uint8_t> keep(17 * 17, 1);
  std::vector<float> bias(17 * 17, 0.0f);
  OwnedTensor weights = make_zeros(1, 1, 17, 17);
  {
    ErrorFixture f;
    f.opt.mask.keep =
        TensorView<const std::uint8_t>{keep.data(), {1, 1, 17, 17}, {289, 289, 17, 1}};
    EXPECT_EQ(f.call().argument(), "mask.keep");
  }
  {
    ErrorFixture f;
    f.opt.mask.bias = ConstTensor{bias.data(), {1, 1, 17, 17}, {289, 289, 17, 1}};
    EXPECT_EQ(f.call().argument(), "mask.bias");
  }
  {
    ErrorFixture f;
    f.opt.weights = weights.view;
    EXPECT_EQ(f.call().argument(), "weights");
  }
  {
    ErrorFixture f;
    f.opt.alibi = Alibi{};
    const Error e = f.call();
    EXPECT_EQ(e.argument(), "options.alibi");
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
  }
  {
    ErrorFixture f;  // RoPE options are validated as for every variant
    RotaryEmbedding rope;
    rope.theta = -1;
    f.opt.rope = rope;
    EXPECT_EQ(f.call().argument(), "options.rope.theta");
  }
}

}  // namespace
}  // namespace seqattn::testing
