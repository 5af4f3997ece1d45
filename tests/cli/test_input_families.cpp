// The accuracy input families (cli/input_families.hpp): deterministic, and with the structure
// each claims, measured on exact softmax weights in double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

#include "seqattn/error.hpp"
#include "src/cli/input_families.hpp"

namespace seqattn::cli {
namespace {

Workload family(InputFamily f, std::int64_t seq, std::uint64_t seed = 3) {
  Workload w(Shape{1, 2, 1, seq, 64, 64});  // GQA: two query heads share one kv head
  fill_inputs(w, f, seed);
  return w;
}

// Softmax weights (scale 1/√D, no mask) of query row i of head h, in double.
std::vector<double> weights(const Workload& w, std::int64_t h, std::int64_t i) {
  const Shape& s = w.shape;
  std::vector<double> p(static_cast<std::size_t>(s.seq));
  double max = -1e300, sum = 0;
  for (std::int64_t j = 0; j < s.seq; ++j) {
    double dot = 0;
    for (std::int64_t d = 0; d < s.dim; ++d) {
      dot += static_cast<double>(w.q[static_cast<std::size_t>((h * s.seq + i) * s.dim + d)]) *
             w.k[static_cast<std::size_t>(j * s.dim + d)];
    }
    p[static_cast<std::size_t>(j)] = dot / std::sqrt(static_cast<double>(s.dim));
    max = std::max(max, p[static_cast<std::size_t>(j)]);
  }
  for (double& x : p) sum += (x = std::exp(x - max));
  for (double& x : p) x /= sum;
  return p;
}

// Mean over rows 64, 96, ..., of the weight on keys within `reach` of the row, and on tokens 0-3.
struct Mass {
  double local = 0, sinks = 0;
};
Mass mass(const Workload& w, std::int64_t reach) {
  Mass m;
  int rows = 0;
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t i = 64; i < w.shape.seq; i += 32, ++rows) {
      const std::vector<double> p = weights(w, h, i);
      for (std::int64_t j = 0; j < w.shape.seq; ++j) {
        if (std::abs(j - i) <= reach) m.local += p[static_cast<std::size_t>(j)];
        if (j < 4) m.sinks += p[static_cast<std::size_t>(j)];
      }
    }
  }
  m.local /= rows;
  m.sinks /= rows;
  return m;
}

TEST(InputFamilies, AreDeterministicInTheSeed) {
  for (const InputFamily f : all_input_families()) {
    const Workload a = family(f, 100, 5), b = family(f, 100, 5), c = family(f, 100, 6);
    EXPECT_EQ(a.q, b.q) << to_string(f);
    EXPECT_EQ(a.k, b.k) << to_string(f);
    EXPECT_EQ(a.v, b.v) << to_string(f);
    EXPECT_NE(a.q, c.q) << to_string(f);
    EXPECT_EQ(parse_input_family(to_string(f), "--inputs"), f);
  }
  EXPECT_THROW(parse_input_family("gaussian", "--inputs"), Error);
}

TEST(InputFamilies, DecayingAttentionIsLocalAndAnchorsAreSinks) {
  const Mass uniform = mass(family(InputFamily::kUniform, 1024), 32);
  const Mass decaying = mass(family(InputFamily::kDecaying, 1024), 32);
  const Mass anchors = mass(family(InputFamily::kAnchors, 1024), 32);
  // 65 of 1024 keys: uniform attention puts about 6% there.
  EXPECT_LT(uniform.local, 0.15);
  EXPECT_GT(decaying.local, 0.8);
  EXPECT_LT(decaying.sinks, 0.01);
  EXPECT_GT(anchors.sinks, 0.02);
  EXPECT_GT(anchors.sinks, 10 * decaying.sinks);
}

TEST(InputFamilies, LowRankQueriesAndKeysHaveRankEight) {
  const Workload w = family(InputFamily::kLowRank, 64);
  // Gram-Schmidt over the first 12 key rows: 8 independent directions, then residuals ~0.
  std::vector<std::vector<double>> basis;
  int independent = 0;
  for (std::int64_t r = 0; r < 12; ++r) {
    std::vector<double> x(64);
    for (int d = 0; d < 64; ++d) x[d] = w.k[static_cast<std::size_t>(r * 64 + d)];
    const double norm0 = std::sqrt(std::inner_product(x.begin(), x.end(), x.begin(), 0.0));
    for (const auto& b : basis) {
      const double c = std::inner_product(x.begin(), x.end(), b.begin(), 0.0);
      for (int d = 0; d < 64; ++d) x[d] -= c * b[d];
    }
    const double norm = std::sqrt(std::inner_product(x.begin(), x.end(), x.begin(), 0.0));
    if (norm > 1e-4 * norm0) {
      ++independent;
      for (double& e : x) e /= norm;
      basis.push_back(x);
    }
  }
  EXPECT_EQ(independent, 8);
}

// Clustered: k is the first query head's q RMS-normalised (LSH's shared-QK keys), and each row's
// weight sits on a few dozen keys anywhere in the sequence, not near the row.
TEST(InputFamilies, ClusteredAttentionFollowsContentNotDistance) {
  const Workload w = family(InputFamily::kClustered, 1024);
  for (std::int64_t j = 0; j < 1024; j += 37) {
    double sum = 0;
    for (int d = 0; d < 64; ++d) sum += std::pow(w.q[static_cast<std::size_t>(j * 64 + d)], 2);
    const double inv = 1.0 / std::sqrt(sum / 64 + 1e-6);
    for (int d = 0; d < 64; ++d) {
      EXPECT_NEAR(w.k[static_cast<std::size_t>(j * 64 + d)],
                  w.q[static_cast<std::size_t>(j * 64 + d)] * inv, 1e-5)
          << j;
    }
  }
  double top = 0;
  int rows = 0;
  for (std::int64_t h = 0; h < 2; ++h) {
    for (std::int64_t i = 0; i < 1024; i += 32, ++rows) {
      std::vector<double> p = weights(w, h, i);
      std::sort(p.begin(), p.end(), std::greater<>());
      top += std::accumulate(p.begin(), p.begin() + 96, 0.0);
    }
  }
  EXPECT_GT(top / rows, 0.9);  // 96 of 1024 keys (clusters hold 32 on average)
  EXPECT_LT(mass(family(InputFamily::kClustered, 1024), 32).local, 0.15);
}

}  // namespace
}  // namespace seqattn::cli
