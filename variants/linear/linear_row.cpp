// Linear attention's row of the variant table. `feature_map` applies first: `features` and
// `seed` belong to FAVOR+ alone and `epsilon` to elu1 and relu, so a parameter the chosen map
// would ignore is refused rather than dropped.
#include "seqattn/error.hpp"
#include "variants/variant_row.hpp"

namespace seqattn::detail {
namespace {

void refuse_unless(bool honoured, const ParamReader& params, const char* name, const char* which) {
  if (honoured || !params.has(name)) return;
  throw Error(ErrorKind::kUnsupported, std::string("linear.") + name,
              std::string("a parameter of feature map ") + which, name + ("=" + params.text(name)),
              "drop it or choose a feature map that takes it");
}

void apply(const ParamReader& params, ConcreteSpec& spec) {
  auto& s = std::get<LinearSpec>(spec);
  if (params.has("feature_map")) {
    s.feature_map = parse_feature_map(params.text("feature_map"), "linear.feature_map");
  }
  const bool favor = s.feature_map == FeatureMap::kFavor;
  refuse_unless(favor, params, "features", "favor");
  refuse_unless(favor, params, "seed", "favor");
  refuse_unless(!favor, params, "epsilon", "elu1 or relu");
  params.read("features", s.num_features);
  params.read("seed", s.seed);
  if (params.has("epsilon")) s.epsilon = params.number("epsilon");
}

VariantParams params_of(const ConcreteSpec& spec) {
  const auto& s = std::get<LinearSpec>(spec);
  VariantParams p{{"feature_map", std::string(to_string(s.feature_map))}};
  if (s.feature_map != FeatureMap::kFavor) {
    p["epsilon"] = number_text(s.epsilon);
    return p;
  }
  if (s.favor_matrix.given()) {
    throw Error(ErrorKind::kUnsupported, "linear.favor_matrix",
                "a matrix drawn from the seed (parameters have no text for a caller's matrix)",
                "a caller-given matrix");
  }
  p["features"] = std::to_string(s.num_features);
  p["seed"] = std::to_string(s.seed);
  return p;
}

std::string describe(const ConcreteSpec& spec) {
  const auto& s = std::get<LinearSpec>(spec);
  std::string text = "feature map " + std::string(to_string(s.feature_map));
  if (s.feature_map == FeatureMap::kFavor && s.num_features > 0) {
    text += ", " + std::to_string(s.num_features) + " features";
  }
  return text;
}

}  // namespace

const VariantRow& linear_row() {
  static const VariantRow row{
      .parameters = {{"feature_map", "elu1|relu|favor", ParameterKind::kName},
                     {"features", "FAVOR+ random features m (0 = D)"},
                     {"seed", "FAVOR+ random matrix seed", ParameterKind::kUnsigned},
                     {"epsilon", "elu1/relu denominator guard", ParameterKind::kNumber}},
      .auto_may_choose = true,
      .apply = apply,
      .params_of = params_of,
      .describe = describe,
  };
  return row;
}

}  // namespace seqattn::detail
