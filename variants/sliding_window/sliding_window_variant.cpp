// Declared in the interface; the kernel is not built yet.
#include "variants/not_built_variant.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {

const AttentionVariant& sliding_window_variant() {
  static const NotBuiltVariant instance(Variant::kSlidingWindow);
  return instance;
}

}  // namespace seqattn::detail
