// Dense attention's row of the variant table: no parameters.
#include "variants/variant_row.hpp"

namespace seqattn::detail {

const VariantRow& dense_row() {
  static const VariantRow row{
      .parameters = {},
      .auto_may_choose = true,
      .quadratic = true,
      .tile_kernel = true,
      .over_cache = [](const ConcreteSpec&) { return CacheRule{}; },  // every stored key
      .apply = [](const ParamReader&, ConcreteSpec&) {},
      .params_of = [](const ConcreteSpec&) { return VariantParams{}; },
      .describe = [](const ConcreteSpec&) { return std::string("exact"); },
  };
  return row;
}

}  // namespace seqattn::detail
