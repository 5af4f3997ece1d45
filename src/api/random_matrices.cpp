// Seeded random matrices for FAVOR+, Linformer and LSH attention. The generator is our own
// (splitmix64 + Box-Muller) because std::normal_distribution differs between standard libraries,
// and a seed must give the same matrix everywhere.
#include <cmath>
#include <cstdint>
#include <vector>

#include "seqattn/attention.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

class Gaussian {
 public:
  explicit Gaussian(std::uint64_t seed) : state_(seed ^ 0x5e9a77e5eedULL) {}
  double next() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    double u1 = uniform(), u2 = uniform();
    double r = std::sqrt(-2.0 * std::log(u1));
    spare_ = r * std::sin(2.0 * M_PI * u2);
    has_spare_ = true;
    return r * std::cos(2.0 * M_PI * u2);
  }

 private:
  std::uint64_t bits() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uniform() { return (static_cast<double>(bits() >> 11) + 0.5) * 0x1.0p-53; }  // (0, 1)

  std::uint64_t state_;
  double spare_ = 0;
  bool has_spare_ = false;
};

void check_positive(const char* name, std::int64_t x) {
  if (x < 1) detail::fail(name, ">= 1", std::to_string(x));
}

}  // namespace

std::vector<float> favor_random_matrix(std::int64_t m, std::int64_t d, std::uint64_t seed) {
  check_positive("m (num_features)", m);
  check_positive("d (head dim)", d);
  Gaussian g(seed);
  std::vector<float> w =
      detail::checked_vector<float>(detail::checked_product({m, d}, "m x d"), "m x d");
  std::vector<double> block =
      detail::checked_vector<double>(detail::checked_product({d, d}, "d x d"), "d x d");
  // Blocks of d orthogonal rows (Gram-Schmidt on Gaussian rows), each row then rescaled to the
  // norm of a Gaussian vector so that marginals stay N(0, I) (Performer's "orthogonal random
  // features").
  for (std::int64_t row0 = 0; row0 < m; row0 += d) {
    const std::int64_t rows = std::min(d, m - row0);
    for (std::int64_t r = 0; r < rows; ++r) {
      double* v = &block[static_cast<std::size_t>(r * d)];
      for (std::int64_t c = 0; c < d; ++c) v[c] = g.next();
      for (std::int64_t p = 0; p < r; ++p) {
        const double* u = &block[static_cast<std::size_t>(p * d)];
        double dot = 0;
        for (std::int64_t c = 0; c < d; ++c) dot += v[c] * u[c];
        for (std::int64_t c = 0; c < d; ++c) v[c] -= dot * u[c];
      }
      double norm = 0;
      for (std::int64_t c = 0; c < d; ++c) norm += v[c] * v[c];
      norm = std::sqrt(norm);
      for (std::int64_t c = 0; c < d; ++c) v[c] /= norm;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      double chi = 0;
      for (std::int64_t c = 0; c < d; ++c) {
        const double x = g.next();
        chi += x * x;
      }
      chi = std::sqrt(chi);
      for (std::int64_t c = 0; c < d; ++c) {
        w[static_cast<std::size_t>((row0 + r) * d + c)] =
            static_cast<float>(block[static_cast<std::size_t>(r * d + c)] * chi);
      }
    }
  }
  return w;
}

std::vector<float> linformer_random_projection(std::int64_t k, std::int64_t s, std::uint64_t seed) {
  check_positive("k (proj_len)", k);
  check_positive("s (sequence length)", s);
  Gaussian g(seed);
  const double sd = 1.0 / std::sqrt(static_cast<double>(k));
  std::vector<float> e =
      detail::checked_vector<float>(detail::checked_product({k, s}, "k x s"), "k x s");
  for (float& x : e) x = static_cast<float>(g.next() * sd);
  return e;
}

std::vector<float> lsh_random_rotations(std::int64_t hashes, std::int64_t d, std::int64_t buckets,
                                        std::uint64_t seed) {
  check_positive("hashes", hashes);
  check_positive("d (head dim)", d);
  if (buckets < 2 || buckets % 2 != 0)
    detail::fail("buckets", "an even number >= 2", std::to_string(buckets));
  return linformer_random_projection(
      1, detail::checked_product({hashes, d, buckets / 2}, "hashes x d x buckets/2"), seed);
}

}  // namespace seqattn
