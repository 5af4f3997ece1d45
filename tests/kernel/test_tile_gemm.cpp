// The bf16 tile GEMM behind MultiHeadAttention's projections (src/gemm/gemm_bf16_tiles.hpp),
// through the emulated tiles on any CPU and the AMX instructions where the CPU has them: against
// double-precision products of the bf16-rounded operands on odd shapes around the 32 × 32
// block and the depth step, padded leading dimensions (nothing outside C's [m, n] written),
// thread-count determinism and argument errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/half.hpp"
#include "src/gemm/gemm_bf16_tiles.hpp"
#include "src/kernel/amx/amx_permission.hpp"
#include "src/kernel/amx/tile_backend.hpp"
#include "src/runtime/cpu_features.hpp"

namespace seqattn {
namespace {

using detail::tile_gemm;
using detail::TilePackedA;
using detail::TilePackedB;

constexpr float kSentinel = -12345.0f;

struct Shape {
  std::int64_t m, n, k;
};

struct Problem {
  std::int64_t m, n, k, lda, ldb, ldc;
  std::vector<float> a, b;
};

Problem make_problem(const Shape& s, std::uint32_t seed) {
  Problem p{s.m, s.n, s.k, s.k + 3, s.n + 5, s.n + 7, {}, {}};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  p.a.resize(static_cast<std::size_t>(p.m * p.lda));
  p.b.resize(static_cast<std::size_t>(p.k * p.ldb));
  for (float& x : p.a) x = dist(rng);
  for (float& x : p.b) x = dist(rng);
  return p;
}

double rounded(float x) { return static_cast<double>(static_cast<float>(bfloat16(x))); }

// C computed on `backend` with `threads`, into an ldc-wide buffer of sentinels.
std::vector<float> run(const detail::amx::TileBackend& backend, const Problem& p, int threads) {
  TilePackedA a;
  a.pack(p.a.data(), p.lda, p.m, p.k, threads);
  const TilePackedB b(p.b.data(), p.ldb, p.k, p.n);
  std::vector<float> c(static_cast<std::size_t>(std::max<std::int64_t>(p.m, 1) * p.ldc), kSentinel);
  tile_gemm(backend, a, b, c.data(), p.ldc, threads);
  return c;
}

// Every element within fp32 accumulation's bound of the double product of the rounded operands
// (k roundings of a sum no larger than Σ|a·b|); every padding element still the sentinel.
void expect_product(const Problem& p, const std::vector<float>& c) {
  const double eps = std::ldexp(1.0, -24);
  for (std::int64_t i = 0; i < p.m; ++i) {
    for (std::int64_t j = 0; j < p.ldc; ++j) {
      const float got = c[static_cast<std::size_t>(i * p.ldc + j)];
      if (j >= p.n) {
        ASSERT_EQ(got, kSentinel) << "written outside C at (" << i << ", " << j << ")";
        continue;
      }
      double want = 0.0, magnitude = 0.0;
      for (std::int64_t t = 0; t < p.k; ++t) {
        const double x = rounded(p.a[static_cast<std::size_t>(i * p.lda + t)]) *
                         rounded(p.b[static_cast<std::size_t>(t * p.ldb + j)]);
        want += x;
        magnitude += std::fabs(x);
      }
      const double bound = 2.0 * static_cast<double>(p.k + 1) * eps * magnitude;
      ASSERT_LE(std::fabs(got - want), bound)
          << "C(" << i << ", " << j << ") of " << p.m << "x" << p.n << "x" << p.k;
    }
  }
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {{1, 1, 1},    {3, 17, 5},     {17, 80, 33},
                                             {80, 17, 64}, {33, 100, 300}, {64, 64, 64},
                                             {100, 3, 1},  {1, 300, 80},   {5, 7, 0}};
  return kShapes;
}

TEST(TileGemm, EmulatedOddShapesMatchTheDoubleProductOfRoundedOperands) {
  std::uint32_t seed = 1;
  for (const Shape& s : shapes()) {
    const Problem p = make_problem(s, seed++);
    expect_product(p, run(detail::amx::emulated_tile_backend(), p, 1));
  }
}

TEST(TileGemm, BitwiseTheSameForOneAndTwoThreads) {
  const Problem p = make_problem({70, 97, 65}, 42);
  const std::vector<float> one = run(detail::amx::emulated_tile_backend(), p, 1);
  const std::vector<float> two = run(detail::amx::emulated_tile_backend(), p, 2);
  ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0);
}

TEST(TileGemm, PackedActivationsAreReusedAcrossShapes) {
  // One TilePackedA packed first with k = 48, then k = 33: the same padded depth (64), so the
  // stale columns 33..47 of the first pack would enter every product unless the second pack
  // zeroes the depth padding again; and fewer rows, whose stale rows must not reach C.
  const Problem big = make_problem({64, 40, 48}, 7), small = make_problem({5, 40, 33}, 8);
  TilePackedA a;
  a.pack(big.a.data(), big.lda, big.m, big.k, 1);
  a.pack(small.a.data(), small.lda, small.m, small.k, 1);
  ASSERT_EQ(a.depth_pad(), 64u);
  const TilePackedB b(small.b.data(), small.ldb, small.k, small.n);
  std::vector<float> c(static_cast<std::size_t>(small.m * small.ldc), kSentinel);
  tile_gemm(detail::amx::emulated_tile_backend(), a, b, c.data(), small.ldc, 1);
  expect_product(small, c);
}

TEST(TileGemm, MismatchedOperandsAreErrorsThatWriteNothing) {
  const Problem p = make_problem({4, 6, 8}, 3);
  TilePackedA a;
  a.pack(p.a.data(), p.lda, p.m, p.k, 1);
  const TilePackedB b(p.b.data(), p.ldb, 7, p.n);  // k = 7, A has 8 columns
  std::vector<float> c(static_cast<std::size_t>(p.m * p.ldc), kSentinel);
  try {
    tile_gemm(detail::amx::emulated_tile_backend(), a, b, c.data(), p.ldc, 1);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "b.k");
  }
  const TilePackedB fits(p.b.data(), p.ldb, p.k, p.n);
  try {
    tile_gemm(detail::amx::emulated_tile_backend(), a, fits, c.data(), p.n - 1, 1);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "ldc");
  }
  for (const float x : c) ASSERT_EQ(x, kSentinel);
  try {
    TilePackedA bad;
    bad.pack(p.a.data(), 2, p.m, p.k, 1);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "lda");
  }
}

TEST(TileGemm, AmxInstructionsOnThisCpu) {
  const detail::CpuFeatures& cpu = detail::cpu_features();
  if (!(cpu.amx_bf16 && cpu.amx_tile && cpu.os_amx)) {
    GTEST_SKIP() << "CPU has no AMX (" << cpu.describe()
                 << "): the tile GEMM on AmxTiles was compiled but not run";
  }
  if (detail::amx::request_amx_permission(true) != detail::amx::AmxPermission::kGranted) {
    GTEST_SKIP() << "CPU has AMX but Linux refused the tile state: AmxTiles not run";
  }
  std::uint32_t seed = 100;
  for (const Shape& s : shapes()) {
    const Problem p = make_problem(s, seed++);
    expect_product(p, run(detail::amx::amx_tile_backend(), p, 2));
  }
}

}  // namespace
}  // namespace seqattn
