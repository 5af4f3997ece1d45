// Variant parameters by name (seqattn/variant_params.hpp): the generic part. Each variant's
// parameters are in its row (variants/<stem>/<stem>_row.cpp).
#include <charconv>
#include <cmath>
#include <cstdio>

#include "seqattn/error.hpp"
#include "variants/variant_row.hpp"

namespace seqattn {
namespace detail {
namespace {

std::string param_name(std::string_view variant, std::string_view name) {
  return std::string(variant) + "." + std::string(name);
}

template <class T>
T parse_whole(std::string_view text, std::string_view argument, const char* expected) {
  T value{};
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, value);
  if (text.empty() || error != std::errc() || end != last) {
    throw Error(ErrorKind::kInvalidArgument, std::string(argument), expected,
                "'" + std::string(text) + "'");
  }
  return value;
}

}  // namespace

const std::string& ParamReader::text(std::string_view name) const {
  const auto it = params_.find(name);
  if (it == params_.end()) {
    throw Error(ErrorKind::kInvalidArgument, param_name(variant_, name), "a value", "none");
  }
  return it->second;
}

std::int64_t ParamReader::integer(std::string_view name) const {
  return parse_whole<std::int64_t>(text(name), param_name(variant_, name), "an integer");
}

std::uint64_t ParamReader::unsigned_integer(std::string_view name) const {
  return parse_whole<std::uint64_t>(text(name), param_name(variant_, name),
                                    "an integer in [0, 2^64)");
}

float ParamReader::number(std::string_view name) const {
  // std::from_chars for float needs GCC 11+, which Debian 12 has; strtof would accept
  // leading spaces and hex, which a parameter should not.
  return parse_whole<float>(text(name), param_name(variant_, name), "a number");
}

std::vector<std::int64_t> ParamReader::integers(std::string_view name) const {
  const std::string& all = text(name);
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  while (!all.empty() && start <= all.size()) {
    const std::size_t comma = std::min(all.find(',', start), all.size());
    values.push_back(parse_whole<std::int64_t>(std::string_view(all).substr(start, comma - start),
                                               param_name(variant_, name),
                                               "comma-separated integers such as 0,1"));
    start = comma + 1;
  }
  return values;
}

std::string integers_text(const std::vector<std::int64_t>& values) {
  std::string text;
  for (const std::int64_t v : values) {
    if (!text.empty()) text += ',';
    text += std::to_string(v);
  }
  return text;
}

std::string number_text(float value) {
  char text[32];
  const auto [end, error] = std::to_chars(text, text + sizeof text, value);
  return error == std::errc() ? std::string(text, end) : std::to_string(value);
}

}  // namespace detail

std::string_view to_string(ParameterKind kind) {
  switch (kind) {
    case ParameterKind::kInteger:
      return "integer";
    case ParameterKind::kUnsigned:
      return "unsigned";
    case ParameterKind::kIntegers:
      return "integers";
    case ParameterKind::kNumber:
      return "number";
    case ParameterKind::kName:
      return "name";
  }
  return "integer";
}

std::vector<ParameterInfo> parameters_of(Variant variant) {
  if (variant == Variant::kAuto) return {};
  return detail::row_of(variant).parameters;
}

ConcreteSpec with_params(ConcreteSpec spec, const VariantParams& params) {
  const Variant id = variant_of(spec);
  const detail::VariantRow& row = detail::row_of(id);
  std::string names;
  for (const ParameterInfo& p : row.parameters) {
    if (!names.empty()) names += ", ";
    names += p.name;
  }
  for (const auto& [name, value] : params) {
    bool known = false;
    for (const ParameterInfo& p : row.parameters) known = known || p.name == name;
    if (!known) {
      throw Error(ErrorKind::kUnsupported, name,
                  "a parameter of variant '" + std::string(to_string(id)) + "' (" +
                      (names.empty() ? "it takes none" : names) + ")",
                  name + "=" + value, "drop it or choose the variant it belongs to");
    }
  }
  row.apply(detail::ParamReader(to_string(id), params), spec);
  return spec;
}

ConcreteSpec make_spec(Variant variant, const VariantParams& params) {
  ConcreteSpec spec;
  switch (variant) {
#define SEQATTN_VARIANT(id, name, Spec, stem) \
  case Variant::id:                           \
    spec = Spec{};                            \
    break;
#include "seqattn/variant_list.inc"
    case Variant::kAuto:
      detail::row_of(variant);  // throws: auto has no spec of its own
  }
  return with_params(std::move(spec), params);
}

VariantParams params_of(const ConcreteSpec& spec) {
  return detail::row_of(variant_of(spec)).params_of(spec);
}

std::string describe(const ConcreteSpec& spec) {
  return detail::row_of(variant_of(spec)).describe(spec);
}

bool auto_may_choose(Variant variant) {
  return variant != Variant::kAuto && detail::row_of(variant).auto_may_choose;
}

bool grows_quadratically(Variant variant) {
  return variant != Variant::kAuto && detail::row_of(variant).quadratic;
}

}  // namespace seqattn
