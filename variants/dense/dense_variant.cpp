// Dense attention: the variant object (checks, cost) and its kernel entry.
#include <cmath>
#include <limits>
#include <vector>

#include "variants/dense/dense_rows.hpp"
#include "variants/dense/flash_attention.hpp"
#include "variants/registry.hpp"
#include "variants/softmax_attention_cost.hpp"

namespace seqattn::detail {
namespace {

class DenseVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kDense; }

  void check(const Problem&, const VariantSpec&) const override {}  // honours every option

  // FLOPs: 2·D for each q·k and 2·D_v for each p·v over the visible (b, h, i, j) pairs,
  // counted as the full square (halved for causal self-attention) as is customary.
  Cost cost(const Problem& p, const VariantSpec&) const override {
    double pairs = static_cast<double>(p.batch()) * p.heads_q() * p.seq_q() * p.seq_k();
    if (p.mask->causal) pairs *= 0.5;
    return softmax_attention_cost(p, pairs);
  }

  void run(const Problem& p, const VariantSpec&) const override {
    softmax_forward(p, KeyPattern::dense());
  }
};

}  // namespace

// The weights come from a second pass over the scores with the kernel's own lse, so asking for
// them changes neither out nor lse (the kernel runs as it would without them).
void softmax_forward(const Problem& p, const KeyPattern& pattern) {
  if (!p.weights) {
    flash_forward(p, pattern);
    return;
  }
  Problem kernel = p;
  kernel.weights.reset();
  std::vector<float> lse_rows;
  if (!kernel.lse) {
    lse_rows.resize(static_cast<std::size_t>(p.batch() * p.heads_q() * p.seq_q()));
    kernel.lse = Tensor{lse_rows.data(),
                        {p.batch(), p.heads_q(), p.seq_q(), 1},
                        {p.heads_q() * p.seq_q(), p.seq_q(), 1, 1}};
  }
  flash_forward(kernel, pattern);
  dense_weights_forward(p, pattern, *kernel.lse);
}

const AttentionVariant& dense_variant() {
  static const DenseVariant instance;
  return instance;
}

}  // namespace seqattn::detail
