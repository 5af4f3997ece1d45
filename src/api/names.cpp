// String names of the public enums, shared by the CLI, the run record and JSON profiles.
#include <string>

#include "seqattn/error.hpp"
#include "seqattn/options.hpp"

namespace seqattn {
namespace {

// Appends rather than chaining operator+: GCC 12 reports a false -Wrestrict on the chain at -O2+.
std::string quoted(std::string_view name) {
  std::string s;
  s.reserve(name.size() + 2);
  s.push_back('\'');
  s.append(name);
  s.push_back('\'');
  return s;
}

}  // namespace

std::string_view to_string(Variant v) {
  switch (v) {
#define SEQATTN_VARIANT(id, name, Spec, stem) \
  case Variant::id:                           \
    return name;
#include "seqattn/variant_list.inc"
    case Variant::kAuto:
      return "auto";
  }
  return "unknown";
}

std::span<const Variant> concrete_variants() {
  static constexpr Variant kAll[] = {
#define SEQATTN_VARIANT(id, name, Spec, stem) Variant::id,
#include "seqattn/variant_list.inc"
  };
  return kAll;
}

Variant parse_variant(std::string_view name, std::string_view argument) {
  std::string names;
  for (const Variant v : concrete_variants()) {
    if (name == to_string(v)) return v;
    names += std::string(to_string(v)) + ", ";
  }
  if (name == to_string(Variant::kAuto)) return Variant::kAuto;
  throw Error(ErrorKind::kInvalidArgument, std::string(argument), "one of " + names + "auto",
              quoted(name));
}

std::string_view to_string(FeatureMap f) {
  switch (f) {
    case FeatureMap::kElu1:
      return "elu1";
    case FeatureMap::kRelu:
      return "relu";
    case FeatureMap::kFavor:
      return "favor";
  }
  return "unknown";
}

FeatureMap parse_feature_map(std::string_view name, std::string_view argument) {
  for (FeatureMap f : {FeatureMap::kElu1, FeatureMap::kRelu, FeatureMap::kFavor}) {
    if (name == to_string(f)) return f;
  }
  throw Error(ErrorKind::kInvalidArgument, std::string(argument), "one of elu1, relu, favor",
              quoted(name));
}

std::string_view to_string(Fp32Precision p) {
  switch (p) {
    case Fp32Precision::kIeee:
      return "ieee";
    case Fp32Precision::kBf16:
      return "bf16";
  }
  return "unknown";
}

Fp32Precision parse_fp32_precision(std::string_view name, std::string_view argument) {
  for (Fp32Precision p : {Fp32Precision::kIeee, Fp32Precision::kBf16}) {
    if (name == to_string(p)) return p;
  }
  throw Error(ErrorKind::kInvalidArgument, std::string(argument), "one of ieee, bf16",
              quoted(name));
}

Variant variant_of(const VariantSpec& spec) {
  return static_cast<Variant>(spec.index());  // VariantSpec lists the alternatives in enum order
}

Variant variant_of(const ConcreteSpec& spec) { return static_cast<Variant>(spec.index()); }

VariantSpec as_variant_spec(const ConcreteSpec& spec) {
  return std::visit([](const auto& s) { return VariantSpec(s); }, spec);
}

std::optional<ConcreteSpec> as_concrete_spec(const VariantSpec& spec) {
  return std::visit(
      [](const auto& s) -> std::optional<ConcreteSpec> {
        if constexpr (std::is_same_v<std::decay_t<decltype(s)>, AutoSpec>) {
          return std::nullopt;
        } else {
          return ConcreteSpec(s);
        }
      },
      spec);
}

}  // namespace seqattn

// The enum, ConcreteSpec and VariantSpec are expanded from the same rows, in the same order.
#define SEQATTN_VARIANT(id, name, Spec, stem)                                                   \
  static_assert(                                                                                \
      std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(seqattn::Variant::id), \
                                                seqattn::VariantSpec>,                          \
                     seqattn::Spec>);                                                           \
  static_assert(                                                                                \
      std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(seqattn::Variant::id), \
                                                seqattn::ConcreteSpec>,                         \
                     seqattn::Spec>);
#include "seqattn/variant_list.inc"
static_assert(
    std::is_same_v<std::variant_alternative_t<static_cast<std::size_t>(seqattn::Variant::kAuto),
                                              seqattn::VariantSpec>,
                   seqattn::AutoSpec>);
