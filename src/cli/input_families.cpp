#include "src/cli/input_families.hpp"

#include <algorithm>
#include <cmath>
#include <random>

#include "seqattn/error.hpp"
#include "src/runtime/positional.hpp"

namespace seqattn::cli {
namespace {

constexpr std::int64_t kAnchorTokens = 4;
constexpr std::int64_t kRank = 8;

// The library's RoPE (halves layout, theta 10000) of one row at position pos, in place: the
// decay with distance of a shared component comes from its pairs drifting out of phase.
// scratch: 2·D floats.
void rotate(const detail::RopeTables& rope, float* x, std::int64_t dim, std::int64_t pos,
            std::vector<float>& scratch) {
  float* row = scratch.data();
  float* cos = row + dim;
  std::copy(x, x + dim, row);
  detail::rope_angles(rope, pos, cos, cos + rope.half);
  detail::rotate_row(row, 1, dim, 1.0f, rope, cos, cos + rope.half, x);
}

// Per kv head: q_i = R(i)(c + a·u_i + 0.3·n_i) and k_j = R(j)(c + a·u_j + 0.3·n'_j), shared
// by the kv head and its query heads: u a unit-variance AR(1) process along the sequence
// (correlation e^(-|i-j|/16)), c ~ N(0, 0.25)^D a constant component whose RoPE phases drift
// apart with distance (RoFormer's long-range decay), n, n' independent noise. a² = 1.75 puts
// the diagonal score (scale 1/√D) near a²·√D = 14 at D = 64 against a far-field spread of
// about a² = 1.75: peaked attention over about a dozen tokens, with a tail. With anchors, the
// slowest rotary pair (dimensions D/2 - 1 and D - 1) is overwritten after rotation: 6.93 in
// every query and in the keys of tokens 0-3, 0 in the other keys, so those four keys score
// 2·48/√D = 12 (at D = 64) more than their content gives from every query, with no other key
// touched (an attention sink).
void decaying(Workload& w, bool anchors, std::uint64_t seed, std::mt19937_64& noise_gen) {
  const Shape& s = w.shape;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float rho = std::exp(-1.0f / 16.0f), innovation = std::sqrt(1.0f - rho * rho);
  const float a = std::sqrt(1.75f);
  std::vector<float> c(static_cast<std::size_t>(s.dim)), u(c.size());
  const std::int64_t group = s.heads / s.kv_heads;
  detail::RopeTables rope;
  detail::init_cache_rope(rope, RotaryEmbedding{}, s.dim);
  std::vector<float> scratch(static_cast<std::size_t>(2 * s.dim));
  const auto fill = [&](std::vector<float>& x, std::int64_t heads, bool queries) {
    for (std::int64_t bh = 0; bh < s.batch * heads; ++bh) {
      const std::int64_t b = bh / heads, h = bh % heads;
      const std::int64_t kv = b * s.kv_heads + (queries ? h / group : h);
      std::mt19937_64 shared(seed + 0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(kv + 1));
      for (float& e : c) e = 0.5f * normal(shared);
      for (float& e : u) e = normal(shared);
      for (std::int64_t i = 0; i < s.seq; ++i) {
        float* row = x.data() + (bh * s.seq + i) * s.dim;
        for (std::int64_t d = 0; d < s.dim; ++d) {
          if (i > 0) u[d] = rho * u[d] + innovation * normal(shared);
          row[d] = c[d] + a * u[d] + 0.3f * normal(noise_gen);
        }
        rotate(rope, row, s.dim, i, scratch);
        if (!anchors) continue;
        const float sink = queries || i < kAnchorTokens ? 6.93f : 0.0f;
        row[s.dim / 2 - 1] = row[s.dim - 1] = sink;
      }
    }
  };
  fill(w.q, s.heads, true);
  fill(w.k, s.kv_heads, false);
}

// Per head: x = Z·W, Z ~ N(0, 1)^(S×8), W ~ N(0, 4/8)^(8×D), so scores have spread ~2.
void low_rank(std::vector<float>& x, const Shape& s, std::int64_t heads, std::mt19937_64& gen) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> z(static_cast<std::size_t>(kRank)),
      wm(static_cast<std::size_t>(kRank * s.dim));
  for (std::int64_t h = 0; h < s.batch * heads; ++h) {
    for (float& e : wm) e = normal(gen) * 0.7071f;
    for (std::int64_t i = 0; i < s.seq; ++i) {
      for (float& e : z) e = normal(gen);
      float* row = x.data() + (h * s.seq + i) * s.dim;
      for (std::int64_t d = 0; d < s.dim; ++d) {
        float sum = 0;
        for (std::int64_t r = 0; r < kRank; ++r) sum += z[r] * wm[r * s.dim + d];
        row[d] = sum;
      }
    }
  }
}

// Per (batch, kv head): max(1, S/32) unit directions μ_u (Gaussian, normalised), each token
// assigned one at random (uniformly, not by position); every query head of the kv head has
// q_i = 10·μ(i) + 0.3·n_i and the kv head has k_j = q'_j / rms(q'_j), q'_j its first query
// head's row: the keys LSH attention's shared-QK mode makes of the queries, so that dense on
// this family is the attention LSH approximates. A same-cluster score is about 10·√D·0.95 /
// √D = 9.5, another cluster's about N(0, 10²/D): at D = 64 about 97% of each row's weight
// stays in its cluster of about 32 tokens, which may sit anywhere in the sequence.
void clustered(Workload& w, std::mt19937_64& gen) {
  const Shape& s = w.shape;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::int64_t clusters = std::max<std::int64_t>(1, s.seq / 32);
  const std::int64_t group = s.heads / s.kv_heads;
  std::vector<float> centres(static_cast<std::size_t>(clusters * s.dim));
  std::vector<std::int64_t> assigned(static_cast<std::size_t>(s.seq));
  for (std::int64_t kv = 0; kv < s.batch * s.kv_heads; ++kv) {
    for (std::int64_t u = 0; u < clusters; ++u) {
      float* mu = centres.data() + u * s.dim;
      double norm = 0;
      for (std::int64_t d = 0; d < s.dim; ++d) {
        mu[d] = normal(gen);
        norm += double{mu[d]} * mu[d];
      }
      const auto inv = static_cast<float>(1.0 / std::sqrt(std::max(norm, 1e-30)));
      for (std::int64_t d = 0; d < s.dim; ++d) mu[d] *= inv;
    }
    std::uniform_int_distribution<std::int64_t> pick(0, clusters - 1);
    for (std::int64_t& a : assigned) a = pick(gen);
    const std::int64_t b = kv / s.kv_heads, hk = kv % s.kv_heads;
    for (std::int64_t g = 0; g < group; ++g) {
      const std::int64_t h = hk * group + g;
      for (std::int64_t i = 0; i < s.seq; ++i) {
        float* q = w.q.data() + ((b * s.heads + h) * s.seq + i) * s.dim;
        const float* mu = centres.data() + assigned[static_cast<std::size_t>(i)] * s.dim;
        for (std::int64_t d = 0; d < s.dim; ++d) q[d] = 10.0f * mu[d] + 0.3f * normal(gen);
        if (g != 0) continue;
        double sum = 0;
        for (std::int64_t d = 0; d < s.dim; ++d) sum += double{q[d]} * q[d];
        const auto inv =
            static_cast<float>(1.0 / std::sqrt(sum / static_cast<double>(s.dim) + 1e-6));
        float* k = w.k.data() + (kv * s.seq + i) * s.dim;
        for (std::int64_t d = 0; d < s.dim; ++d) k[d] = q[d] * inv;
      }
    }
  }
}

}  // namespace

std::string_view to_string(InputFamily family) {
  switch (family) {
    case InputFamily::kUniform:
      return "uniform";
    case InputFamily::kDecaying:
      return "decaying";
    case InputFamily::kAnchors:
      return "anchors";
    case InputFamily::kLowRank:
      return "lowrank";
    case InputFamily::kClustered:
      return "clustered";
  }
  return "uniform";
}

InputFamily parse_input_family(std::string_view name, std::string_view argument) {
  for (const InputFamily f : all_input_families()) {
    if (name == to_string(f)) return f;
  }
  throw Error(ErrorKind::kInvalidArgument, std::string(argument),
              "decaying, anchors, lowrank, clustered or uniform", std::string(name));
}

const std::vector<InputFamily>& all_input_families() {
  static const std::vector<InputFamily> families = {InputFamily::kUniform, InputFamily::kDecaying,
                                                    InputFamily::kAnchors, InputFamily::kLowRank,
                                                    InputFamily::kClustered};
  return families;
}

void fill_inputs(Workload& w, InputFamily family, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float& e : w.v) e = uniform(gen);
  switch (family) {
    case InputFamily::kUniform:
      for (auto* x : {&w.q, &w.k}) {
        for (float& e : *x) e = uniform(gen);
      }
      return;
    case InputFamily::kDecaying:
    case InputFamily::kAnchors:
      decaying(w, family == InputFamily::kAnchors, seed, gen);
      return;
    case InputFamily::kLowRank:
      low_rank(w.q, w.shape, w.shape.heads, gen);
      low_rank(w.k, w.shape, w.shape.kv_heads, gen);
      return;
    case InputFamily::kClustered:
      clustered(w, gen);
      return;
  }
}

}  // namespace seqattn::cli
