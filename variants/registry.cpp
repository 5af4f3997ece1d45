// The variant table's rows and implementations by id. Explicit rather than self-registering
// through static initialisers: those are dropped by the linker when seqattn is linked as a
// static library.
#include "variants/registry.hpp"

#include <memory>
#include <utility>

#include "seqattn/error.hpp"

namespace seqattn::detail {
namespace {

class SpecRunner final : public PreparedVariant {
 public:
  SpecRunner(const AttentionVariant& variant, VariantSpec spec)
      : variant_(variant), spec_(std::move(spec)) {}
  void run(const Problem& problem) const override { variant_.run(problem, spec_); }

 private:
  const AttentionVariant& variant_;
  VariantSpec spec_;
};

[[noreturn]] void not_concrete(Variant id) {
  throw Error(ErrorKind::kInvalidArgument, "variant", "a concrete variant (auto is resolved first)",
              std::string(to_string(id)));
}

}  // namespace

std::shared_ptr<const PreparedVariant> AttentionVariant::prepare(const Problem&,
                                                                 const VariantSpec& spec) const {
  return std::make_shared<SpecRunner>(*this, spec);
}

const AttentionVariant& variant_for(Variant id) {
  switch (id) {
#define SEQATTN_VARIANT(id, name, Spec, stem) \
  case Variant::id:                           \
    return stem##_variant();
#include "seqattn/variant_list.inc"
    case Variant::kAuto:
      break;
  }
  not_concrete(id);
}

const VariantRow& row_of(Variant id) {
  switch (id) {
#define SEQATTN_VARIANT(id, name, Spec, stem) \
  case Variant::id:                           \
    return stem##_row();
#include "seqattn/variant_list.inc"
    case Variant::kAuto:
      break;
  }
  not_concrete(id);
}

}  // namespace seqattn::detail
