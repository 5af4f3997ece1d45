// The int8 KV cache's integer products: the AVX512-VNNI micro-kernels (Q·Kᵀ on vpdpbusd, P·V
// on vpdpwssd) against exact scalar integer references (rows 1-6, odd depths and widths,
// extreme values, strided rows, prefetch off and into L1 or L2), skipped where the CPU has no
// AVX512-VNNI; the paced requests' bookkeeping; and the decode output over an int8 cache on
// every compiled Highway target, bitwise between the VNNI path and the portable one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <hwy/aligned_allocator.h>

#include "src/kernel/decode/int8_products_avx512vnni.hpp"
#include "src/kernel/decode/paced_requests.hpp"
#include "src/runtime/cpu_features.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

constexpr std::size_t kQuadRow = 256;  // bytes from one quad of a 64-key block to the next

// Whether the library runs its VNNI micro-kernels here (the CPU has them, the OS saves ZMM).
bool cpu_has_vnni() {
  const detail::CpuFeatures& cpu = detail::cpu_features();
  return cpu.avx512_vnni && cpu.os_avx512;
}
constexpr const char* kNoVnni =
    "skipped: no AVX512-VNNI (the portable micro-kernels are tested on every target) on ";

// The paced requests' bookkeeping (the requests themselves change no result, and the decode
// checks on every target run them under SEQATTN_DECODE_PREFETCH=l2+near16+paced): a run of
// lines is taken whole lines at a time and never past its end, whatever is asked.
TEST(PacedLines, TakesWholeLinesUpToItsEnd) {
  alignas(64) static std::int8_t tile[64 * 144];
  const simd::Prefetch far{static_cast<std::ptrdiff_t>(sizeof tile), simd::CacheLevel::kL2};
  detail::PacedLines lines(tile, 3072, far);  // 48 lines
  EXPECT_EQ(lines.taken_bytes(), 0u);
  lines.Take(4);
  EXPECT_EQ(lines.taken_bytes(), 256u);
  lines.Take(1);
  EXPECT_EQ(lines.taken_bytes(), 320u);
  lines.Take(1000);
  EXPECT_EQ(lines.taken_bytes(), 3072u);
  lines.TakeAll();
  EXPECT_EQ(lines.taken_bytes(), 3072u);
  detail::PacedLines ragged(tile, 100, far);  // a partial last line: two requests, 100 bytes
  ragged.Take(1);
  EXPECT_EQ(ragged.taken_bytes(), 64u);
  ragged.TakeAll();
  EXPECT_EQ(ragged.taken_bytes(), 100u);
  detail::PacedLines none;
  none.TakeAll();
  EXPECT_EQ(none.taken_bytes(), 0u);
}

// The far requests in address order: each visit asks for the lines due by its share of the
// visits, whole lines, and the last visit has asked for the run's every line; with the far
// requests off, none.
TEST(OrderedLines, AsksInProportionAndEndsWithEveryLine) {
  alignas(64) static std::int8_t tile[64 * 256];
  const simd::Prefetch far{static_cast<std::ptrdiff_t>(sizeof tile / 2), simd::CacheLevel::kL2};
  // AVX2's Q·Kᵀ: 32 quad rows of 256 bytes read in 4 passes, groups of 16 rows.
  simd::OrderedLines keys(tile, 32 * 256, far, 4 * 32);
  for (std::size_t group = 1; group <= 8; ++group) {
    keys.Visit(16);
    EXPECT_EQ(keys.asked_bytes(), group * 1024) << "group " << group;
  }
  keys.Visit(16);  // past the visits counted: nothing more
  EXPECT_EQ(keys.asked_bytes(), 32u * 256);
  // P·V with D_v 16 (pairs of 32 bytes, two to a line) from pair 3 of 33, one pass: 30 rows,
  // 960 bytes, 15 lines.
  simd::OrderedLines values(tile + 3 * 32, 30 * 32, far, 30);
  values.Visit(13);
  EXPECT_EQ(values.asked_bytes(), 448u);  // 13 rows × 32 due: 416 bytes, 7 lines
  values.Visit(17);
  EXPECT_EQ(values.asked_bytes(), 960u);  // 15 lines: 960 bytes rounded up to a line
  simd::OrderedLines off(tile, sizeof tile, simd::Prefetch{}, 8);
  off.Visit(8);
  EXPECT_EQ(off.asked_bytes(), 0u);
}

// No prefetch, `offset` bytes ahead into each cache level, and near requests 1 and 16 rows
// (row_stride bytes each) on (with and without the far ones): a request never changes a result.
std::array<simd::Prefetch, 5> PrefetchCases(std::ptrdiff_t offset, std::int32_t row_stride) {
  return {simd::Prefetch{}, simd::Prefetch{offset, simd::CacheLevel::kL2},
          simd::Prefetch{offset, simd::CacheLevel::kL1},
          simd::Prefetch{offset, simd::CacheLevel::kL2, 16 * row_stride},
          simd::Prefetch{0, simd::CacheLevel::kL2, row_stride}};
}

// Σ_d q[r][d]·k(t, d) in int64, keys in quads: element (t, d) at (d/4)·256 + 4t + d%4.
std::int64_t reference_dot(const std::int8_t* q, const std::int8_t* k, std::size_t quads,
                           std::size_t t) {
  std::int64_t sum = 0;
  for (std::size_t d = 0; d < quads * 4; ++d) sum += q[d] * k[d / 4 * kQuadRow + 4 * t + d % 4];
  return sum;
}

TEST(Int8Products, VnniMicroKernelIsExact) {
  if (!cpu_has_vnni()) GTEST_SKIP() << kNoVnni << detail::cpu_features().describe();
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> byte(-127, 127);
  for (const std::size_t quads : {1, 3, 5, 32, 33}) {
    for (std::size_t rows = 1; rows <= 6; ++rows) {
      const std::size_t q_stride = quads * 4 + 7;  // rows not packed back to back
      std::vector<std::int8_t> k(quads * kQuadRow + 256), q(rows * q_stride);
      for (auto& x : k) x = static_cast<std::int8_t>(byte(gen));
      for (auto& x : q) x = static_cast<std::int8_t>(byte(gen));
      // Extremes: a key of all -127 against a row of all 127 (and of all -127).
      for (std::size_t d = 0; d < quads * 4; ++d) {
        k[d / 4 * kQuadRow + 4 * 5 + d % 4] = -127;
        q[d] = 127;
        if (rows > 1) q[q_stride + d] = -127;
      }
      std::vector<std::int32_t> sums(rows);
      for (std::size_t r = 0; r < rows; ++r) {
        for (std::size_t d = 0; d < quads * 4; ++d) sums[r] += q[r * q_stride + d];
      }
      // Scores = float(dot) · key scale · query scale, multiplied in that order: the scales
      // are powers of two here and there (exact, so the dot itself is checked exactly) and
      // arbitrary in the last case (the order is checked, bitwise).
      alignas(64) float key_scales[64];
      std::array<float, 6> query_scales{};
      for (const bool exact : {true, false}) {
        for (std::size_t t = 0; t < 64; ++t)
          key_scales[t] = exact ? std::ldexp(1.0f, static_cast<int>(t % 7) - 3) : 0.01f * (t + 1);
        for (std::size_t r = 0; r < 6; ++r)
          query_scales[r] = exact ? std::ldexp(1.0f, -static_cast<int>(r)) : 0.37f / (r + 1);
        for (const simd::Prefetch prefetch :
             PrefetchCases(256, static_cast<std::int32_t>(kQuadRow))) {
          alignas(64) float out[6][64];
          std::memset(out, 0xff, sizeof out);
          const detail::QuadDotScores scores{&out[0][0], 64, key_scales, query_scales.data()};
          detail::QuadDot64Avx512Vnni(q.data(), q_stride, sums.data(), k.data(), kQuadRow, quads,
                                      rows, scores, prefetch, quads / 2);
          for (std::size_t r = 0; r < rows; ++r) {
            for (std::size_t t = 0; t < 64; ++t) {
              const auto dot =
                  static_cast<float>(reference_dot(q.data() + r * q_stride, k.data(), quads, t));
              const float keyed = dot * key_scales[t];
              ASSERT_EQ(out[r][t], keyed * query_scales[r])
                  << "quads " << quads << " rows " << rows << " row " << r << " key " << t;
            }
          }
        }
      }
    }
  }
}

// Σ_t w[t]·v(t, c) in int64, values in pairs: element (t, c) at (t/2)·pair_stride + 2c + t%2.
std::int64_t reference_pair_dot(const std::int16_t* w, const std::int8_t* v, std::size_t pairs,
                                std::size_t pair_stride, std::size_t c) {
  std::int64_t sum = 0;
  for (std::size_t t = 0; t < 2 * pairs; ++t) sum += w[t] * v[t / 2 * pair_stride + 2 * c + t % 2];
  return sum;
}

TEST(Int8Products, VnniPairKernelIsExact) {
  if (!cpu_has_vnni()) GTEST_SKIP() << kNoVnni << detail::cpu_features().describe();
  std::mt19937 gen(6);
  std::uniform_int_distribution<int> byte(-127, 127), weight(0, 32767);
  for (const std::size_t cols : {16, 48, 64, 80, 144}) {
    for (const std::size_t pairs : {1, 7, 32}) {
      for (std::size_t rows = 1; rows <= 6; ++rows) {
        const std::size_t pair_stride = 2 * cols, w_stride = 2 * pairs + 3;
        std::vector<std::int8_t> v(pairs * pair_stride + 256);
        std::vector<std::int16_t> w(rows * w_stride);
        for (auto& x : v) x = static_cast<std::int8_t>(byte(gen));
        for (auto& x : w) x = static_cast<std::int16_t>(weight(gen));
        for (std::size_t t = 0; t < 2 * pairs; ++t) {  // the extreme sum in column 3, row 0
          v[t / 2 * pair_stride + 2 * 3 + t % 2] = -127;
          w[t] = 32767;
        }
        // o = o · alpha + float(sum) · scale · unit (one FMA), or o + …: from o = 0 with
        // power-of-two factors the sum itself is checked exactly; from o = 1.5 (rows with unit
        // 1) or 3e-20 (unit 2^-64, where t is that small) with arbitrary ones the order, bitwise.
        std::array<float, 6> scale{}, unit{}, alpha{};
        for (const bool exact : {true, false}) {
          for (std::size_t r = 0; r < 6; ++r) {
            scale[r] = exact ? std::ldexp(1.0f, -15 - static_cast<int>(r)) : 3.1e-5f * (r + 1);
            unit[r] = r % 2 == 0 ? 1.0f : 0x1p-64f;
            alpha[r] = exact ? 0.5f : 0.71f / (r + 1);
          }
          auto start = [&](std::size_t r) { return exact ? 0.0f : r % 2 == 0 ? 1.5f : 3e-20f; };
          for (const bool rescale : {false, true}) {
            for (const simd::Prefetch prefetch :
                 PrefetchCases(128, static_cast<std::int32_t>(pair_stride))) {
              auto out = hwy::AllocateAligned<float>(rows * cols);  // the kernel stores aligned
              for (std::size_t i = 0; i < rows * cols; ++i) out.get()[i] = start(i / cols);
              const detail::PairDotUpdate update{out.get(), cols, scale.data(), unit.data(),
                                                 rescale ? alpha.data() : nullptr};
              // One line of `keys` per pass over a pair, carried across column passes (64
              // columns, then 16): a request changes no result, the count is checked.
              alignas(64) static std::int8_t key_lines[64 * 1024];
              detail::PacedLines keys(key_lines, sizeof key_lines, prefetch);
              const detail::PairRequests requests{prefetch, pairs / 2, keys};
              detail::PairDotAvx512Vnni(w.data(), w_stride, v.data(), pair_stride, pairs, rows,
                                        cols, update, requests);
              EXPECT_EQ(keys.taken_bytes(), 64 * pairs * (cols / 64 + cols % 64 / 16));
              for (std::size_t r = 0; r < rows; ++r) {
                for (std::size_t c = 0; c < cols; ++c) {
                  const auto sum = static_cast<float>(
                      reference_pair_dot(w.data() + r * w_stride, v.data(), pairs, pair_stride, c));
                  const float t = sum * scale[r] * unit[r];
                  const float expected = rescale ? std::fma(start(r), alpha[r], t) : start(r) + t;
                  ASSERT_EQ(out.get()[r * cols + c], expected)
                      << "cols " << cols << " pairs " << pairs << " rows " << rows << " row " << r
                      << " column " << c << " rescale " << rescale << " exact " << exact;
                }
              }
            }
          }
        }
      }
    }
  }
}

// One decode (S_q 1, the last token's queries) over an int8 cache holding a CacheSequence's
// tokens (its seed), with the values multiplied by value_scale and (nan_head >= 0) a NaN in that
// head's query, on every target: each target's output, keyed "highway:<target>". Checks the
// record's compute path on the way.
std::map<std::string, std::vector<float>> decode_on_every_target(
    std::int64_t heads, std::int64_t heads_kv, std::int64_t dim, std::int64_t length,
    std::uint32_t seed, float value_scale = 1.0f, std::int64_t nan_head = -1) {
  testing::CacheSequence seq(1, heads, heads_kv, length, dim, dim, seed);
  KvCache cache({1, heads_kv, length, dim, dim, DType::kI8});
  for (std::int64_t h = 0; h < heads_kv; ++h)
    for (std::int64_t t = 0; t < length; ++t)
      for (std::int64_t d = 0; d < dim; ++d) seq.v.view.at(0, h, t, d) *= value_scale;
  seq.append(cache, 0, 0, length);
  std::vector<float> q(static_cast<std::size_t>(heads * dim));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t d = 0; d < dim; ++d)
      q[static_cast<std::size_t>(h * dim + d)] =
          h == nan_head && d == 1 ? std::nanf("") : seq.q.view.at(0, h, length - 1, d);
  std::map<std::string, std::vector<float>> outs;
  testing::for_each_target([&] {
    std::vector<float> out(static_cast<std::size_t>(heads * dim));
    const RunRecord record = attend(bhsd<const float>(q.data(), 1, heads, 1, dim), cache,
                                    bhsd(out.data(), 1, heads, 1, dim));
    // "highway:AVX3", or "xsimd:<arch>+highway:AVX3" with the xsimd backend (same kernel).
    const std::string target(simd_target());
    const std::string name = target.substr(target.find("highway:") + 8);
    // vpdpbusd/vpdpwssd on a target from AVX3_DL up (Highway 1.0.3: AVX3_DL) of a VNNI CPU.
    const bool vnni =
        (name == "AVX3_DL" || name == "AVX3_ZEN4" || name == "AVX3_SPR") && cpu_has_vnni();
    EXPECT_EQ(record.compute_path, vnni ? "int8-vnni" : "int8") << target;
    outs["highway:" + name] = out;
  });
  return outs;
}

// AVX3 and AVX3_DL share the fp32 blocking (16 lanes) and differ only in the int8
// micro-kernels (portable pmaddwd pairs; vpdpbusd and vpdpwssd on a VNNI CPU): their outputs
// must be equal bit for bit, which shows the two give the same integers. Every target takes
// 64-key int8 tiles, so the others differ from the first by name only in their softmax's lanes
// (the order of the sums, an exp2 without FMA, so now and then a probability rounded to the
// next int16): within 1e-4, an empirical bound (this file printed at most 5.9e-6 on Zen 3 over
// AVX2, SSE4, SSSE3 and SCALAR; 2e-4 held when AVX2 took 16-key tiles). Group 4 (a 4-row
// micro-tile) and group 8 (6 rows and a 2-row remainder).
TEST(Int8Products, DecodeIsTheSameOnEveryTarget) {
  for (const std::int64_t heads : {8, 16}) {
    for (const std::int64_t dim : {17, 64, 130}) {
      SCOPED_TRACE("H " + std::to_string(heads) + " D " + std::to_string(dim));
      const auto outs = decode_on_every_target(heads, 2, dim, 300, 9);
      ASSERT_FALSE(outs.empty());
      const auto avx3 = outs.find("highway:AVX3"), avx3_dl = outs.find("highway:AVX3_DL");
      if (avx3 != outs.end() && avx3_dl != outs.end()) {
        const bool equal = std::memcmp(avx3->second.data(), avx3_dl->second.data(),
                                       avx3->second.size() * sizeof(float)) == 0;
        EXPECT_TRUE(equal) << "AVX3 and AVX3_DL differ";
        std::printf("int8 decode H %lld D %lld: AVX3 (portable) and AVX3_DL (%s) %s\n",
                    static_cast<long long>(heads), static_cast<long long>(dim),
                    cpu_has_vnni() ? "vpdpbusd, vpdpwssd" : "portable",
                    equal ? "bitwise equal" : "DIFFER");
      } else {
        std::printf(
            "int8 decode H %lld D %lld: bitwise check skipped: AVX3 and AVX3_DL not both "
            "run\n",
            static_cast<long long>(heads), static_cast<long long>(dim));
      }
      const std::vector<float>& first = outs.begin()->second;
      float scale = 0;
      for (const float x : first) scale = std::max(scale, std::fabs(x));
      for (const auto& [name, out] : outs) {
        float worst = 0;
        for (std::size_t i = 0; i < out.size(); ++i) {
          worst = std::max(worst, std::fabs(out[i] - first[i]));
          ASSERT_LE(std::fabs(out[i] - first[i]), 1e-4f * scale)
              << name << " vs " << outs.begin()->first << " at " << i;
        }
        if (name == outs.begin()->first) continue;
        std::printf("int8 decode H %lld D %lld: %s vs %s: %.3g of max|out|\n",
                    static_cast<long long>(heads), static_cast<long long>(dim), name.c_str(),
                    outs.begin()->first.c_str(), static_cast<double>(worst / scale));
      }
    }
  }
}

// Values 2^-100 times smaller: the weights fall below 2^-60, are rescaled by 2^64 before the
// int16 rounding and back after the sums, all by powers of two, so every output is exactly
// 2^-100 times the unscaled one (no precision lost to denormals).
TEST(Int8Products, TinyValuesScaleExactly) {
  const auto unit = decode_on_every_target(8, 2, 64, 200, 10);
  const auto tiny = decode_on_every_target(8, 2, 64, 200, 10, 0x1p-100f);
  for (const auto& [name, out] : unit) {
    const std::vector<float>& small = tiny.at(name);
    for (std::size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(small[i], std::ldexp(out[i], -100)) << name << " at " << i;
    }
  }
}

// A NaN in one query row makes that head's output NaN (as over a float cache) and leaves the
// other heads of its kv group, which share its tiles, bit for bit as without it.
TEST(Int8Products, ANanQueryStaysInItsRow) {
  const std::int64_t heads = 8, dim = 32, nan_head = 5;
  const auto clean = decode_on_every_target(heads, 2, dim, 150, 11);
  const auto dirty = decode_on_every_target(heads, 2, dim, 150, 11, 1.0f, nan_head);
  for (const auto& [name, out] : clean) {
    const std::vector<float>& bad = dirty.at(name);
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t d = 0; d < dim; ++d) {
        const auto i = static_cast<std::size_t>(h * dim + d);
        if (h == nan_head) {
          ASSERT_TRUE(std::isnan(bad[i])) << name << " head " << h << " d " << d;
        } else {
          ASSERT_EQ(bad[i], out[i]) << name << " head " << h << " d " << d;
        }
      }
    }
  }
}

}  // namespace
}  // namespace seqattn
