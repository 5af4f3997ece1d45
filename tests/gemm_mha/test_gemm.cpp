// The packed GEMM engine against a double-precision naive product, on every compiled Highway
// target: odd shapes around the micro-tile and cache-block edges, both transposes, alpha/beta,
// padded leading dimensions, NaN-filled C with beta = 0, thread-count determinism, errors.
#include <gtest/gtest.h>
#include <hwy/aligned_allocator.h>
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <hwy/tests/hwy_gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "src/gemm/gemm.hpp"
#include "tests/reference/reference.hpp"

namespace seqattn {
namespace {

using detail::sgemm;
using detail::Transpose;

struct Case {
  std::int64_t m, n, k;
  Transpose ta, tb;
  float alpha, beta;
  std::int64_t pad;  // extra floats after every stored row of A, B and C
};

struct Operands {
  std::vector<float> a, b, c;
  std::int64_t lda, ldb, ldc;
};

std::vector<float> random_floats(std::size_t count, std::uint32_t seed) {
  std::vector<float> x(count);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(gen);
  return x;
}

Operands make_operands(const Case& t, std::uint32_t seed) {
  Operands o;
  const bool ta = t.ta == Transpose::kYes, tb = t.tb == Transpose::kYes;
  o.lda = (ta ? t.m : t.k) + t.pad;
  o.ldb = (tb ? t.k : t.n) + t.pad;
  o.ldc = t.n + t.pad;
  o.a = random_floats(static_cast<std::size_t>((ta ? t.k : t.m) * o.lda), seed);
  o.b = random_floats(static_cast<std::size_t>((tb ? t.n : t.k) * o.ldb), seed + 1);
  o.c = random_floats(static_cast<std::size_t>(t.m * o.ldc), seed + 2);
  if (t.beta == 0.0f) std::fill(o.c.begin(), o.c.end(), std::numeric_limits<float>::quiet_NaN());
  return o;
}

// The expected C (only the m × n logical elements, row-major, contiguous).
std::vector<double> naive_gemm(const Case& t, const Operands& o) {
  const bool ta = t.ta == Transpose::kYes, tb = t.tb == Transpose::kYes;
  std::vector<double> out(static_cast<std::size_t>(t.m * t.n));
  for (std::int64_t i = 0; i < t.m; ++i) {
    for (std::int64_t j = 0; j < t.n; ++j) {
      double acc = 0.0;
      for (std::int64_t p = 0; p < t.k; ++p) {
        const double a = ta ? o.a[static_cast<std::size_t>(p * o.lda + i)]
                            : o.a[static_cast<std::size_t>(i * o.lda + p)];
        const double b = tb ? o.b[static_cast<std::size_t>(j * o.ldb + p)]
                            : o.b[static_cast<std::size_t>(p * o.ldb + j)];
        acc += a * b;
      }
      double value = t.alpha * acc;
      if (t.beta != 0.0f)
        value += t.beta * static_cast<double>(o.c[static_cast<std::size_t>(i * o.ldc + j)]);
      out[static_cast<std::size_t>(i * t.n + j)] = value;
    }
  }
  return out;
}

std::vector<float> logical_c(const Case& t, const std::vector<float>& c, std::int64_t ldc) {
  std::vector<float> out(static_cast<std::size_t>(t.m * t.n));
  for (std::int64_t i = 0; i < t.m; ++i) {
    for (std::int64_t j = 0; j < t.n; ++j)
      out[static_cast<std::size_t>(i * t.n + j)] = c[static_cast<std::size_t>(i * ldc + j)];
  }
  return out;
}

// Runs one case and checks C (including that padding after each row is untouched).
void check_case(const Case& t, int threads = 1) {
  SCOPED_TRACE(::testing::Message()
               << "m=" << t.m << " n=" << t.n << " k=" << t.k << " ta=" << (t.ta == Transpose::kYes)
               << " tb=" << (t.tb == Transpose::kYes) << " alpha=" << t.alpha << " beta=" << t.beta
               << " pad=" << t.pad << " threads=" << threads);
  Operands o = make_operands(t, static_cast<std::uint32_t>(t.m * 131 + t.n * 7 + t.k));
  const std::vector<double> expected = naive_gemm(t, o);
  const std::vector<float> before = o.c;
  sgemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, t.beta,
        o.c.data(), o.ldc, threads);
  EXPECT_LE(reference::max_relative_error(logical_c(t, o.c, o.ldc), expected), 1e-5);
  for (std::int64_t i = 0; i < t.m; ++i) {
    for (std::int64_t j = t.n; j < o.ldc; ++j) {
      const std::size_t at = static_cast<std::size_t>(i * o.ldc + j);
      ASSERT_TRUE(std::memcmp(&o.c[at], &before[at], sizeof(float)) == 0)
          << "padding written at row " << i;
    }
  }
}

// Around mr (14/6/4), nr (32/16/8/4), kc (256), mc (336/144/128) and nc (4096/2048/1024).
const std::vector<std::array<std::int64_t, 3>> kShapes = {
    {1, 1, 1},     {3, 17, 5},   {17, 3, 255}, {14, 32, 256}, {15, 33, 257}, {80, 80, 80},
    {255, 65, 17}, {257, 31, 3}, {29, 257, 1}, {337, 20, 9},  {5, 4130, 7},  {13, 97, 600},
};

class GemmOnTarget : public hwy::TestWithParamTarget {};
HWY_TARGET_INSTANTIATE_TEST_SUITE_P(GemmOnTarget);

TEST_P(GemmOnTarget, DispatchesToTheRequestedTarget) {
  EXPECT_EQ(detail::gemm_blocking().target, hwy::TargetName(GetParam()));
}

TEST_P(GemmOnTarget, OddShapesEveryTransposition) {
  for (const auto& [m, n, k] : kShapes) {
    for (Transpose ta : {Transpose::kNo, Transpose::kYes}) {
      for (Transpose tb : {Transpose::kNo, Transpose::kYes})
        check_case({m, n, k, ta, tb, 1.0f, 0.0f, 0});
    }
  }
}

TEST_P(GemmOnTarget, AlphaBetaAndStridedLeadingDimensions) {
  for (const auto& [m, n, k] : kShapes) {
    check_case({m, n, k, Transpose::kNo, Transpose::kNo, 0.5f, 1.0f, 3});
    check_case({m, n, k, Transpose::kYes, Transpose::kNo, -1.5f, 0.25f, 5});
    check_case({m, n, k, Transpose::kNo, Transpose::kYes, 2.0f, -1.0f, 1});
  }
}

TEST_P(GemmOnTarget, TwoThreadsMatch) {
  check_case({255, 257, 300, Transpose::kNo, Transpose::kNo, 1.0f, 0.5f, 2}, 2);
  check_case({700, 40, 20, Transpose::kYes, Transpose::kYes, 1.0f, 0.0f, 0}, 2);
}

// A caller's packing scratch (pack) of exactly sgemm_pack_floats(m, n, k, threads) floats gives
// the bits of a call that allocates its own, and nothing is written past it: shapes inside one
// cache block, across the kc, mc and nc edges, and split among two threads.
TEST_P(GemmOnTarget, CallersPackGivesTheSameBits) {
  for (const Case& t : {Case{1, 1, 1, Transpose::kNo, Transpose::kNo, 1.0f, 0.0f, 0},
                        Case{17, 80, 3, Transpose::kYes, Transpose::kNo, 1.0f, 0.5f, 1},
                        Case{700, 300, 400, Transpose::kNo, Transpose::kYes, 0.5f, 0.0f, 3},
                        Case{40, 4200, 200, Transpose::kNo, Transpose::kNo, 1.0f, 1.0f, 0}}) {
    for (const int threads : {1, 2}) {
      SCOPED_TRACE(::testing::Message()
                   << t.m << "x" << t.n << "x" << t.k << ", " << threads << " threads");
      Operands own = make_operands(t, 77), given = make_operands(t, 77);
      sgemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, own.a.data(), own.lda, own.b.data(), own.ldb,
            t.beta, own.c.data(), own.ldc, threads);
      const std::size_t floats = detail::sgemm_pack_floats(t.m, t.n, t.k, threads);
      ASSERT_EQ(floats % 16, 0u);
      constexpr std::size_t kGuard = 64;
      hwy::AlignedFreeUniquePtr<float[]> pack = hwy::AllocateAligned<float>(floats + kGuard);
      std::fill(pack.get(), pack.get() + floats + kGuard, std::numeric_limits<float>::quiet_NaN());
      pack[floats] = 12345.0f;  // a guard value NaN garbage in the pack cannot produce
      sgemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, given.a.data(), given.lda, given.b.data(),
            given.ldb, t.beta, given.c.data(), given.ldc, threads, {pack.get(), floats});
      EXPECT_EQ(std::memcmp(own.c.data(), given.c.data(), own.c.size() * sizeof(float)), 0);
      EXPECT_EQ(pack[floats], 12345.0f);
      EXPECT_TRUE(std::all_of(pack.get() + floats + 1, pack.get() + floats + kGuard, [](float x) {
        return std::isnan(x);
      })) << "written past the pack";
    }
  }
}

// The k-reduction order must not depend on how C is split among threads.
TEST(Gemm, BitwiseIdenticalForEveryThreadCount) {
  const Case t{301, 517, 530, Transpose::kNo, Transpose::kYes, 0.75f, 0.5f, 1};
  std::vector<std::vector<float>> results;
  for (int threads : {1, 2, 3, 4}) {
    Operands o = make_operands(t, 42);
    sgemm(t.ta, t.tb, t.m, t.n, t.k, t.alpha, o.a.data(), o.lda, o.b.data(), o.ldb, t.beta,
          o.c.data(), o.ldc, threads);
    results.push_back(o.c);
  }
  for (std::size_t r = 1; r < results.size(); ++r) {
    EXPECT_EQ(std::memcmp(results[0].data(), results[r].data(), results[0].size() * sizeof(float)),
              0)
        << "threads variant " << r;
  }
}

TEST(Gemm, DegenerateSizes) {
  // m = 0 or n = 0: nothing is read or written; only empty operands may be null.
  std::vector<float> b(15, 1.0f);
  EXPECT_NO_THROW(sgemm(Transpose::kNo, Transpose::kNo, 0, 5, 3, 1.0f, nullptr, 3, b.data(), 5,
                        0.0f, nullptr, 5));
  EXPECT_NO_THROW(sgemm(Transpose::kNo, Transpose::kNo, 4, 0, 3, 1.0f, b.data(), 3, nullptr, 1,
                        0.0f, nullptr, 1));
  EXPECT_THROW(sgemm(Transpose::kNo, Transpose::kNo, 0, 5, 3, 1.0f, nullptr, 3, nullptr, 5, 0.0f,
                     nullptr, 5),
               Error);
  // k = 0: C = beta·C (and beta = 0 clears NaN garbage).
  std::vector<float> c = {1.0f, 2.0f, 3.0f, 4.0f};
  sgemm(Transpose::kNo, Transpose::kNo, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0.5f, 1.0f, 1.5f, 2.0f}));
  std::fill(c.begin(), c.end(), std::numeric_limits<float>::quiet_NaN());
  sgemm(Transpose::kNo, Transpose::kNo, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>(4, 0.0f)));
}

// Expects an Error naming `argument` and leaves C untouched.
template <class F>
void expect_error(const char* argument, F&& call, const std::vector<float>& c, float c0) {
  try {
    call();
    ADD_FAILURE() << "no error for " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
    EXPECT_EQ(e.argument(), argument) << e.what();
  }
  EXPECT_EQ(c[0], c0);
}

TEST(Gemm, BadArgumentsThrowAndWriteNothing) {
  std::vector<float> a(64, 1.0f), b(64, 1.0f), c(64, 7.0f);
  const auto call = [&](std::int64_t m, std::int64_t n, std::int64_t k, const float* pa,
                        std::int64_t lda, const float* pb, std::int64_t ldb, float* pc,
                        std::int64_t ldc, int threads) {
    return [=] {
      sgemm(Transpose::kNo, Transpose::kNo, m, n, k, 1.0f, pa, lda, pb, ldb, 0.0f, pc, ldc,
            threads);
    };
  };
  expect_error("m", call(-1, 4, 4, a.data(), 4, b.data(), 4, c.data(), 4, 1), c, 7.0f);
  expect_error("n", call(4, -2, 4, a.data(), 4, b.data(), 4, c.data(), 4, 1), c, 7.0f);
  expect_error("k", call(4, 4, -3, a.data(), 4, b.data(), 4, c.data(), 4, 1), c, 7.0f);
  expect_error("lda", call(4, 4, 4, a.data(), 3, b.data(), 4, c.data(), 4, 1), c, 7.0f);
  expect_error("ldb", call(4, 4, 4, a.data(), 4, b.data(), 2, c.data(), 4, 1), c, 7.0f);
  expect_error("ldc", call(4, 4, 4, a.data(), 4, b.data(), 4, c.data(), 1, 1), c, 7.0f);
  expect_error("a", call(4, 4, 4, nullptr, 4, b.data(), 4, c.data(), 4, 1), c, 7.0f);
  expect_error("b", call(4, 4, 4, a.data(), 4, nullptr, 4, c.data(), 4, 1), c, 7.0f);
  expect_error("c", call(4, 4, 4, a.data(), 4, b.data(), 4, nullptr, 4, 1), c, 7.0f);
  expect_error("threads", call(4, 4, 4, a.data(), 4, b.data(), 4, c.data(), 4, -1), c, 7.0f);
  // A caller's pack one 64-byte line short, or misaligned.
  const std::size_t need = detail::sgemm_pack_floats(4, 4, 4, 1);
  hwy::AlignedFreeUniquePtr<float[]> pack = hwy::AllocateAligned<float>(need + 16);
  expect_error(
      "pack",
      [&] {
        sgemm(Transpose::kNo, Transpose::kNo, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f,
              c.data(), 4, 1, {pack.get(), need - 16});
      },
      c, 7.0f);
  expect_error(
      "pack",
      [&] {
        sgemm(Transpose::kNo, Transpose::kNo, 4, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f,
              c.data(), 4, 1, {pack.get() + 1, need});
      },
      c, 7.0f);
  // Transposed A is stored [k, m]: lda must cover m.
  try {
    sgemm(Transpose::kYes, Transpose::kNo, 5, 4, 4, 1.0f, a.data(), 4, b.data(), 4, 0.0f, c.data(),
          4);
    ADD_FAILURE() << "no error for a short lda with transposed A";
  } catch (const Error& e) {
    EXPECT_EQ(e.argument(), "lda");
    EXPECT_NE(std::string(e.what()).find(">= 5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace seqattn
