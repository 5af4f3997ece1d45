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

  // The flash kernel never forms the weights; when they are asked for, the row-at-a-time
  // kernel (which materialises one row of scores) computes out, lse and weights together.
  void run(const Problem& p, const VariantSpec&) const override {
    if (p.weights) {
      dense_rows_forward(p, KeyPattern::dense());
    } else {
      flash_forward(p, KeyPattern::dense());
    }
  }
};

}  // namespace

const AttentionVariant& dense_variant() {
  static const DenseVariant instance;
  return instance;
}

}  // namespace seqattn::detail
