// Declared in the interface; the kernel is not built yet.
#include "variants/not_built_variant.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {

const AttentionVariant& linformer_variant() {
  static const NotBuiltVariant instance(Variant::kLinformer);
  return instance;
}

}  // namespace seqattn::detail
