// The list of attention variants. Explicit rather than self-registering through static
// initialisers: those are dropped by the linker when seqattn is linked as a static library.
#include "variants/registry.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

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
    case Variant::kAuto:
      break;
  }
  throw Error(ErrorKind::kInvalidArgument, "variant", "a concrete variant (auto is resolved first)",
              std::string(to_string(id)));
}

}  // namespace seqattn::detail
