// Shared fixtures of the linear-attention tests: a problem description, its random inputs and
// the double-precision reference for it.
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {

struct LinearCase {
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 17, seq_k = 17, dim = 17, dim_v = 17;
  FeatureMap map = FeatureMap::kElu1;
  std::int64_t features = 0;  // LinearSpec::num_features
  bool causal = false;
  Layout layout = Layout::kBHSD;
  std::int64_t pad = 0;
  std::vector<std::int64_t> key_lengths;
  float magnitude = 1.0f;  // inputs uniform in [-magnitude, magnitude]
};

inline std::string describe(const LinearCase& c) {
  std::ostringstream s;
  s << to_string(c.map) << " m=" << c.features << (c.causal ? " causal" : "") << " B=" << c.batch
    << " H=" << c.heads_q << "/" << c.heads_kv << " S=" << c.seq_q << "/" << c.seq_k
    << " D=" << c.dim << "/" << c.dim_v << (c.layout == Layout::kBSHD ? " BSHD" : " BHSD")
    << " pad=" << c.pad << " lengths=" << c.key_lengths.size();
  return s.str();
}

struct LinearInputs {
  OwnedTensor q, k, v;
  Mask mask;
  LinearSpec spec;
  std::vector<float> favor;  // the [m, D] matrix the kernel draws from spec.seed (FAVOR+)
};

inline LinearInputs make_linear_inputs(const LinearCase& c, std::uint32_t seed) {
  const float a = c.magnitude;
  LinearInputs in{
      make_tensor(c.batch, c.heads_q, c.seq_q, c.dim, c.layout, seed, c.pad, -a, a),
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim, c.layout, seed + 1, c.pad, -a, a),
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim_v, c.layout, seed + 2, c.pad),
      {},
      {},
      {}};
  in.mask.causal = c.causal;
  in.mask.key_lengths = c.key_lengths;
  in.spec.feature_map = c.map;
  in.spec.num_features = c.features;
  in.spec.seed = seed;
  if (c.map == FeatureMap::kFavor) {
    in.favor = favor_random_matrix(c.features == 0 ? c.dim : c.features, c.dim, seed);
  }
  return in;
}

// scale: the call's (nullopt when it set none).
inline reference::Result linear_reference(const LinearCase& c, const LinearInputs& in,
                                          std::optional<double> scale = std::nullopt) {
  const std::int64_t m = c.features == 0 ? c.dim : c.features;
  return reference::linear(in.q.cview(), in.k.cview(), in.v.cview(), c.map, in.favor, m,
                           in.spec.epsilon, in.mask, scale);
}

}  // namespace seqattn::testing
