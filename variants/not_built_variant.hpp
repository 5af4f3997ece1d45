// Placeholder for a variant whose kernel is declared in the interface but not built yet: it
// refuses every call with a kNotImplemented error rather than falling back to another variant.
#pragma once

#include <string>

#include "seqattn/error.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

class NotBuiltVariant final : public AttentionVariant {
 public:
  explicit NotBuiltVariant(Variant id) : id_(id) {}
  Variant id() const override { return id_; }
  void check(const Problem&, const VariantSpec&) const override {
    throw Error(ErrorKind::kNotImplemented, "variant", "a built variant",
                "'" + std::string(to_string(id_)) + "'",
                "this variant is declared but not implemented yet; use variant=dense");
  }
  Cost cost(const Problem&, const VariantSpec&) const override { return {}; }
  void run(const Problem& p, const VariantSpec& s) const override { check(p, s); }

 private:
  Variant id_;
};

}  // namespace seqattn::detail
