// The NumPy walk-through of ../shared/seeds/000_c51916faba2c7d8a.txt: X (3 tokens, d_in = 2),
// W_Q, W_K, W_V → Q, K, V → softmax(Q Kᵀ/√2) → weights and output.
#include <gtest/gtest.h>

#include <array>
#include <cmath>

#include "seqattn/seqattn.hpp"

namespace seqattn {
namespace {

using Mat = std::array<std::array<double, 2>, 3>;
using W = std::array<std::array<double, 2>, 2>;

constexpr Mat kX = {{{1.0, 0.0}, {1.0, 1.0}, {0.1, 1.0}}};
constexpr W kWq = {{{1.0, 0.0}, {0.0, 1.0}}};
constexpr W kWk = {{{1.0, 1.0}, {1.0, 1.0}}};
constexpr W kWv = {{{1.0, 0.0}, {1.0, 1.0}}};

std::array<float, 6> project(const W& w) {  // X @ W, as float [3, 2]
  std::array<float, 6> r{};
  for (int i = 0; i < 3; ++i)
    for (int c = 0; c < 2; ++c)
      r[i * 2 + c] = static_cast<float>(kX[i][0] * w[0][c] + kX[i][1] * w[1][c]);
  return r;
}

TEST(DocumentExample, WeightsAndOutputMatchTheNumpyWalkthrough) {
  auto q = project(kWq), k = project(kWk), v = project(kWv);
  std::array<float, 6> out{};
  std::array<float, 9> weights{};
  AttentionOptions options;
  options.weights = matrix(weights.data(), 3, 3);
  const RunRecord rec =
      attend(matrix<const float>(q.data(), 3, 2), matrix<const float>(k.data(), 3, 2),
             matrix<const float>(v.data(), 3, 2), matrix(out.data(), 3, 2), options);
  EXPECT_EQ(rec.variant, Variant::kDense);

  // The document's three steps, in double: scores = Q Kᵀ / √d_k, stable softmax, weights @ V.
  for (int i = 0; i < 3; ++i) {
    std::array<double, 3> s{};
    double mx = -INFINITY, sum = 0;
    for (int j = 0; j < 3; ++j) {
      s[j] = (q[i * 2] * k[j * 2] + q[i * 2 + 1] * k[j * 2 + 1]) / std::sqrt(2.0);
      mx = std::max(mx, s[j]);
    }
    for (double& x : s) sum += (x = std::exp(x - mx));
    for (int c = 0; c < 2; ++c) {
      double o = 0;
      for (int j = 0; j < 3; ++j) o += s[j] / sum * v[j * 2 + c];
      EXPECT_NEAR(out[i * 2 + c], o, 1e-4) << i << "," << c;
    }
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(weights[i * 3 + j], s[j] / sum, 1e-4);
  }
  // The values NumPy prints for the document's code (np.round(..., 4)).
  EXPECT_NEAR(weights[0 * 3 + 1], 0.4945, 1e-4);
  EXPECT_NEAR(weights[1 * 3 + 1], 0.6565, 1e-4);
  EXPECT_NEAR(out[2 * 2 + 0], 1.5366, 1e-4);
  EXPECT_NEAR(out[1 * 2 + 1], 0.8404, 1e-4);
}

}  // namespace
}  // namespace seqattn
