// Linformer's row of the variant table. Auto never chooses it: it refuses causal masks, keep
// masks and weights, which a policy cannot know a caller will not pass.
#include "seqattn/error.hpp"
#include "variants/variant_row.hpp"

namespace seqattn::detail {

const VariantRow& linformer_row() {
  static const VariantRow row{
      .parameters = {{"proj_len", "projected length k"},
                     {"seed", "random projection seed", ParameterKind::kUnsigned}},
      .auto_may_choose = false,
      .tile_kernel = true,  // its exact softmax over the projected keys
      .apply =
          [](const ParamReader& params, ConcreteSpec& spec) {
            auto& s = std::get<LinformerSpec>(spec);
            params.read("proj_len", s.proj_len);
            params.read("seed", s.seed);
          },
      .params_of =
          [](const ConcreteSpec& spec) {
            const auto& s = std::get<LinformerSpec>(spec);
            if (s.e.given() || s.f.given()) {
              throw Error(ErrorKind::kUnsupported, "linformer.e/f",
                          "projections drawn from the seed (parameters have no text for a "
                          "caller's matrix)",
                          "a caller-given matrix");
            }
            return VariantParams{{"proj_len", std::to_string(s.proj_len)},
                                 {"seed", std::to_string(s.seed)}};
          },
      .describe =
          [](const ConcreteSpec& spec) {
            return "k = " + std::to_string(std::get<LinformerSpec>(spec).proj_len);
          },
  };
  return row;
}

}  // namespace seqattn::detail
