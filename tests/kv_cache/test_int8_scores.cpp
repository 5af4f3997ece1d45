// The int8 KV cache's integer Q·Kᵀ: the AVX512-VNNI micro-kernel against an exact scalar
// integer reference (rows 1-6, 1 to 33 quads, extreme bytes, a strided query, prefetch on and
// off), skipped where the CPU has no AVX512-VNNI; and the decode output over an int8 cache
// on every compiled Highway target, bitwise between the VNNI path and the portable one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "src/kernel/decode/int8_scores_avx512vnni.hpp"
#include "src/runtime/cpu_features.hpp"
#include "tests/kv_cache/kv_cache_support.hpp"
#include "tests/variants/target_loop.hpp"

namespace seqattn {
namespace {

constexpr std::size_t kQuadRow = 256;  // bytes from one quad of a 64-key block to the next

// Σ_d q[r][d]·k(t, d) in int64, keys in quads: element (t, d) at (d/4)·256 + 4t + d%4.
std::int64_t reference_dot(const std::int8_t* q, const std::int8_t* k, std::size_t quads,
                           std::size_t t) {
  std::int64_t sum = 0;
  for (std::size_t d = 0; d < quads * 4; ++d) sum += q[d] * k[d / 4 * kQuadRow + 4 * t + d % 4];
  return sum;
}

TEST(Int8Scores, VnniMicroKernelIsExact) {
  const detail::CpuFeatures& cpu = detail::cpu_features();
  if (!cpu.avx512_vnni || !cpu.os_avx512) {
    GTEST_SKIP() << "skipped: this CPU (" << cpu.describe()
                 << ") has no AVX512-VNNI; the portable micro-kernel is tested on every target";
  }
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
      for (const std::ptrdiff_t prefetch : {std::ptrdiff_t{0}, std::ptrdiff_t{256}}) {
        alignas(64) float out[6][64];
        std::memset(out, 0xff, sizeof out);
        detail::QuadDot64Avx512Vnni(q.data(), q_stride, sums.data(), k.data(), kQuadRow, quads,
                                    rows, &out[0][0], 64, prefetch);
        for (std::size_t r = 0; r < rows; ++r) {
          for (std::size_t t = 0; t < 64; ++t) {
            const auto expected =
                static_cast<float>(reference_dot(q.data() + r * q_stride, k.data(), quads, t));
            ASSERT_EQ(out[r][t], expected)
                << "quads " << quads << " rows " << rows << " row " << r << " key " << t;
          }
        }
      }
    }
  }
}

// One decode over an int8 cache on every target. AVX3 and AVX3_DL share the fp32 blocking
// (16 lanes, 64-key tiles) and differ only in the Q·Kᵀ micro-kernel (portable int32 lanes;
// vpdpbusd on a VNNI CPU): their outputs must be equal bit for bit, which shows the two give
// the same integers. Narrower targets sum the softmax and P·V in another order: within 1e-6.
TEST(Int8Scores, DecodeIsTheSameOnEveryTarget) {
  for (const std::int64_t dim : {17, 64, 130}) {
    SCOPED_TRACE("D " + std::to_string(dim));
    const std::int64_t length = 300, heads = 8, heads_kv = 2;
    testing::CacheSequence seq(1, heads, heads_kv, length, dim, dim, 9);
    KvCache cache({1, heads_kv, length, dim, dim, DType::kI8});
    seq.append(cache, 0, 0, length);
    std::vector<float> q(static_cast<std::size_t>(heads * dim));
    for (std::int64_t h = 0; h < heads; ++h)
      for (std::int64_t d = 0; d < dim; ++d)
        q[static_cast<std::size_t>(h * dim + d)] = seq.q.view.at(0, h, length - 1, d);
    std::map<std::string, std::vector<float>> outs;
    testing::for_each_target([&] {
      std::vector<float> out(static_cast<std::size_t>(heads * dim));
      attend(bhsd<const float>(q.data(), 1, heads, 1, dim), cache,
             bhsd(out.data(), 1, heads, 1, dim));
      // "highway:AVX3", or "xsimd:<arch>+highway:AVX3" in the xsimd flavour (same kernel).
      const std::string target(simd_target());
      outs[target.substr(target.find("highway:"))] = out;
    });
    ASSERT_FALSE(outs.empty());
    const auto avx3 = outs.find("highway:AVX3"), avx3_dl = outs.find("highway:AVX3_DL");
    if (avx3 != outs.end() && avx3_dl != outs.end()) {
      EXPECT_EQ(0, std::memcmp(avx3->second.data(), avx3_dl->second.data(),
                               avx3->second.size() * sizeof(float)));
      std::printf("int8 decode D %lld: AVX3 (portable) and AVX3_DL (%s) bitwise equal\n",
                  static_cast<long long>(dim),
                  detail::cpu_features().avx512_vnni ? "vpdpbusd" : "portable: no VNNI here");
    } else {
      std::printf("int8 decode D %lld: bitwise check skipped: AVX3 and AVX3_DL not both run\n",
                  static_cast<long long>(dim));
    }
    const std::vector<float>& first = outs.begin()->second;
    float scale = 0;
    for (const float x : first) scale = std::max(scale, std::fabs(x));
    for (const auto& [name, out] : outs) {
      for (std::size_t i = 0; i < out.size(); ++i) {
        ASSERT_LE(std::fabs(out[i] - first[i]), 1e-6f * scale)
            << name << " vs " << outs.begin()->first << " at " << i;
      }
    }
  }
}

}  // namespace
}  // namespace seqattn
