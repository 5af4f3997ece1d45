// The list of attention variants. Explicit rather than self-registering through static
// initialisers: those are dropped by the linker when seqattn is linked as a static library.
#include "variants/registry.hpp"
#include "variants/attention_variant.hpp"

#include <memory>
#include <utility>

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

}  // namespace

std::shared_ptr<const PreparedVariant> AttentionVariant::prepare(const Problem&,
                                                                 const VariantSpec& spec) const {
  return std::make_shared<SpecRunner>(*this, spec);
}

const AttentionVariant& variant_for(Variant id) {
  switch (id) {
    case Variant::kDense:
      return dense_variant();
    case Variant::kSlidingWindow:
      return sliding_window_variant();
    case Variant::kLinear:
      return linear_variant();
    case Variant::kLinformer:
      return linformer_variant();
    case Variant::kHierarchical:
      return hierarchical_variant();
    case Variant::kAuto:
      break;
  }
  throw Error(ErrorKind::kInvalidArgument, "variant", "a concrete variant (auto is resolved first)",
              std::string(to_string(id)));
}

}  // namespace seqattn::detail
