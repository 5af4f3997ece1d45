// Hierarchical attention's row of the variant table.
#include "variants/variant_row.hpp"

namespace seqattn::detail {

const VariantRow& hierarchical_row() {
  static const VariantRow row{
      .parameters = {{"block", "block size b (even)"},
                     {"levels", "coarse levels (0 = as many as the length needs)"}},
      .auto_may_choose = true,
      .tile_kernel = true,
      .apply =
          [](const ParamReader& params, ConcreteSpec& spec) {
            auto& s = std::get<HierarchicalSpec>(spec);
            params.read("block", s.block);
            params.read("levels", s.levels);
          },
      .params_of =
          [](const ConcreteSpec& spec) {
            const auto& s = std::get<HierarchicalSpec>(spec);
            return VariantParams{{"block", std::to_string(s.block)},
                                 {"levels", std::to_string(s.levels)}};
          },
      .describe =
          [](const ConcreteSpec& spec) {
            const auto& s = std::get<HierarchicalSpec>(spec);
            return "block " + std::to_string(s.block) +
                   (s.levels > 0 ? ", " + std::to_string(s.levels) + " levels" : std::string());
          },
  };
  return row;
}

}  // namespace seqattn::detail
