// Dense attention: the variant object (checks, cost) and its kernel entry.
#include <cmath>
#include <limits>

#include "src/kernel/flash_attention.hpp"
#include "src/kernel/softmax_attention_cost.hpp"
#include "variants/registry.hpp"

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
    if (p.mask.causal) pairs *= 0.5;
    return softmax_attention_cost(p, pairs);
  }

  void run(const Problem& p, const VariantSpec&) const override {
    softmax_forward(p, AllKeys(p.seq_k()));
  }
};

}  // namespace

const AttentionVariant& dense_variant() {
  static const DenseVariant instance;
  return instance;
}

}  // namespace seqattn::detail
