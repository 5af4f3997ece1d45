#include "variants/dense/dense_rows.hpp"

#include <cmath>
#include <limits>

#include "variants/element_mask.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One row of weights: exp(score - lse) for the keys the row sees, 0 for the others (and for
// a row with no visible key, whose lse is -inf).
void weights_row(const Problem& p, const ElementMask& mask, const KeyPattern& pattern,
                 std::int64_t b, std::int64_t h, std::int64_t i, float lse) {
  const std::int64_t hk = h / p.group();
  const std::int64_t len = p.key_length(b);
  const float* q = p.q.ptr(b, h, i);
  for (std::int64_t j = 0; j < p.seq_k(); ++j) {
    float w = 0;
    if (lse != kNegInf && mask.visible(b, h, i, j, len) &&
        pattern.allows(i, j, p.seq_k() - p.seq_q())) {
      const float* k = p.k.ptr(b, hk, j);
      float dot = 0;
      for (std::int64_t d = 0; d < p.dim(); ++d)
        dot += q[d * p.q.strides[3]] * k[d * p.k.strides[3]];
      float s = dot * p.scale;
      if (mask.has_bias()) s += mask.bias(b, h, i, j);
      w = std::exp(s - lse);
    }
    p.weights->at(b, h, i, j) = w;
  }
}

}  // namespace

void dense_weights_forward(const Problem& p, const KeyPattern& pattern, const Tensor& lse) {
  const ElementMask mask(p);
  const std::int64_t rows = p.batch() * p.heads_q() * p.seq_q();
#pragma omp parallel for schedule(static) num_threads(p.threads)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t i = r % p.seq_q();
    const std::int64_t h = (r / p.seq_q()) % p.heads_q();
    const std::int64_t b = r / (p.seq_q() * p.heads_q());
    weights_row(p, mask, pattern, b, h, i, lse.at(b, h, i, 0));
  }
}

}  // namespace seqattn::detail
