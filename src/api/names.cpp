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
    case Variant::kDense:
      return "dense";
    case Variant::kSlidingWindow:
      return "sliding-window";
    case Variant::kLinear:
      return "linear";
    case Variant::kLinformer:
      return "linformer";
    case Variant::kHierarchical:
      return "hierarchical";
    case Variant::kAuto:
      return "auto";
  }
  return "unknown";
}

Variant parse_variant(std::string_view name, std::string_view argument) {
  for (Variant v : {Variant::kDense, Variant::kSlidingWindow, Variant::kLinear, Variant::kLinformer,
                    Variant::kHierarchical, Variant::kAuto}) {
    if (name == to_string(v)) return v;
  }
  throw Error(ErrorKind::kInvalidArgument, std::string(argument),
              "one of dense, sliding-window, linear, linformer, hierarchical, auto", quoted(name));
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

Variant variant_of(const VariantSpec& spec) {
  return static_cast<Variant>(spec.index());  // VariantSpec lists the alternatives in enum order
}

}  // namespace seqattn

static_assert(
    std::is_same_v<std::variant_alternative_t<0, seqattn::VariantSpec>, seqattn::DenseSpec>);
static_assert(std::is_same_v<std::variant_alternative_t<1, seqattn::VariantSpec>,
                             seqattn::SlidingWindowSpec>);
static_assert(
    std::is_same_v<std::variant_alternative_t<2, seqattn::VariantSpec>, seqattn::LinearSpec>);
static_assert(
    std::is_same_v<std::variant_alternative_t<3, seqattn::VariantSpec>, seqattn::LinformerSpec>);
static_assert(
    std::is_same_v<std::variant_alternative_t<4, seqattn::VariantSpec>, seqattn::HierarchicalSpec>);
static_assert(
    std::is_same_v<std::variant_alternative_t<5, seqattn::VariantSpec>, seqattn::AutoSpec>);
