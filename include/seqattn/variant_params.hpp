// Variant parameters by name: the one description of each variant's parameters that the CLI
// flags, JSON profiles, `seqattn select` and the report share. Each variant's folder lists its
// parameters; these functions reach them through the variant table (variant_list.inc).
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/variant_specs.hpp"

namespace seqattn {

// Parameter values as text, by parameter name: integers in decimal ("256"), integer lists
// comma-separated ("0,1"), names as they are ("favor"). A JSON profile stores the same text.
using VariantParams = std::map<std::string, std::string, std::less<>>;

// How a parameter's text reads, for front ends that take typed values (the Python package
// converts and checks its keyword arguments by it): a decimal int64, a decimal uint64, a
// comma-separated list of int64, a float, or a name.
enum class ParameterKind { kInteger, kUnsigned, kIntegers, kNumber, kName };
std::string_view to_string(ParameterKind kind);  // "integer", "unsigned", "integers", ...

struct ParameterInfo {
  std::string name;  // e.g. "window_right"; the CLI flag is --window-right
  std::string help;  // one line, e.g. "keys on the right (0 = causal)"
  ParameterKind kind = ParameterKind::kInteger;
};

// The parameters `variant` takes, in the order they apply (kAuto: none).
std::vector<ParameterInfo> parameters_of(Variant variant);

// `variant`'s default spec with `params` applied in parameters_of order. Throws Error
// (kUnsupported) naming a parameter the variant does not take, and (kInvalidArgument) naming
// a value that does not parse; the spec's own ranges are checked when it runs.
ConcreteSpec make_spec(Variant variant, const VariantParams& params);
// `spec` with `params` applied (the same rules; params of other variants are refused).
ConcreteSpec with_params(ConcreteSpec spec, const VariantParams& params);

// The parameters that reproduce `spec` through make_spec: make_spec(variant_of(spec),
// params_of(spec)) == spec. Throws Error(kUnsupported) for parameters that have no text form
// (a caller-given FAVOR+ or Linformer matrix).
VariantParams params_of(const ConcreteSpec& spec);

// One line for tables and messages, e.g. "window 256+256", "feature map elu1".
std::string describe(const ConcreteSpec& spec);

// Whether the automatic choice may pick the variant from measurements (a profile's budget).
bool auto_may_choose(Variant variant);
// Whether the variant's cost grows as S_q·S_k (dense) rather than linearly in S: the report
// and benches give it shorter lengths and its own time cap.
bool grows_quadratically(Variant variant);

}  // namespace seqattn
