// Element-level mask rules shared by the variants' edge paths: which key a query may see and
// the additive bias it gets. Tile-level skipping lives in the kernels; this is the ground truth
// they must agree with.
#pragma once

#include <cstdint>

#include "src/core/problem.hpp"

namespace seqattn::detail {

class ElementMask {
 public:
  explicit ElementMask(const Problem& p) : mask_(p.mask), causal_offset_(p.seq_k() - p.seq_q()) {}

  // The last key index query i may see under the causal rule (i + S_k - S_q).
  std::int64_t causal_limit(std::int64_t i) const { return i + causal_offset_; }

  bool visible(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j,
               std::int64_t key_length) const {
    if (j >= key_length) return false;
    if (mask_.causal && j > causal_limit(i)) return false;
    if (mask_.keep) {
      const auto& m = *mask_.keep;
      if (*m.ptr(m.shape[0] == 1 ? 0 : b, m.shape[1] == 1 ? 0 : h, i, j) == 0) return false;
    }
    return true;
  }

  bool has_bias() const { return mask_.bias.has_value(); }
  float bias(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    const auto& m = *mask_.bias;
    return *m.ptr(m.shape[0] == 1 ? 0 : b, m.shape[1] == 1 ? 0 : h, i, j);
  }

 private:
  const ProblemMask& mask_;
  std::int64_t causal_offset_;
};

}  // namespace seqattn::detail
