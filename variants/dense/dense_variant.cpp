// Dense attention: the variant object (checks, cost) and its kernel entry.
#include <cmath>
#include <cstddef>
#include <limits>
#include <memory>
#include <optional>

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

  bool cost_counts_key_lengths() const override { return false; }

  void run(const Problem& p, const VariantSpec&) const override {
    softmax_forward(p, AllKeys(p.seq_k()));
  }

  // A plan keeps the structure, and with it the kernel's tables (built on its first run).
  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec&) const override {
    return std::make_shared<Prepared>(p.seq_k());
  }

 private:
  class Prepared final : public PreparedVariant {
   public:
    explicit Prepared(std::int64_t seq_k) : keys_(seq_k) {}
    void run(const Problem& p) const override { softmax_forward(p, keys_); }
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      return softmax_workspace_bytes(planned, keys_);
    }
    std::optional<std::size_t> weights_workspace_bytes(const Problem& planned) const override {
      return softmax_weights_workspace_bytes(planned, keys_);
    }

   private:
    AllKeys keys_;
  };
};

}  // namespace

const AttentionVariant& dense_variant() {
  static const DenseVariant instance;
  return instance;
}

}  // namespace seqattn::detail
