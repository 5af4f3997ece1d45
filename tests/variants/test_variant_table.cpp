// Every row of the variant table (seqattn/variant_list.inc), through the interfaces the table
// drives: names, parameters by name, and the default spec of each row against its float64
// reference on every compiled target. A row added to the table is covered here unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <system_error>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {
namespace {

class VariantTable : public ::testing::TestWithParam<Variant> {};

std::string name_of(const ::testing::TestParamInfo<Variant>& info) {
  std::string name(to_string(info.param));
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

TEST_P(VariantTable, NameRoundTrips) {
  const Variant v = GetParam();
  EXPECT_EQ(parse_variant(to_string(v)), v);
  EXPECT_NE(to_string(v), "auto");
  try {
    parse_variant("no-such-variant");
    ADD_FAILURE();
  } catch (const Error& e) {  // the message lists every row
    EXPECT_NE(std::string(e.what()).find(to_string(v)), std::string::npos) << e.what();
  }
}

TEST_P(VariantTable, ParametersRoundTripAndUnknownOnesAreRefused) {
  const Variant v = GetParam();
  const ConcreteSpec spec = make_spec(v, {});
  EXPECT_EQ(variant_of(spec), v);
  const VariantParams params = params_of(spec);
  for (const auto& [name, value] : params) {
    bool declared = false;
    for (const ParameterInfo& p : parameters_of(v)) declared = declared || p.name == name;
    EXPECT_TRUE(declared) << name << " written but not declared";
  }
  EXPECT_EQ(params_of(make_spec(v, params)), params);
  EXPECT_FALSE(describe(spec).empty());
  try {
    make_spec(v, {{"no_such_parameter", "1"}});
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kUnsupported);
    EXPECT_NE(std::string(e.what()).find("no_such_parameter"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(to_string(v)), std::string::npos) << e.what();
  }
  for (const ParameterInfo& p : parameters_of(v)) {  // text that is no value is refused
    EXPECT_THROW(make_spec(v, {{p.name, "1x"}}), Error) << p.name;
  }
}

// A parameter's declared kind is how front ends type it (the Python keywords): the text the
// row writes reads as that kind, and a value of another kind is refused by the row.
TEST_P(VariantTable, ParameterKindsMatchTheirText) {
  const Variant v = GetParam();
  const auto reads_as = [](ParameterKind kind, const std::string& text) {
    const auto whole = [](const std::string& t, auto value) {  // all of t reads as a value
      const auto [end, error] = std::from_chars(t.data(), t.data() + t.size(), value);
      return !t.empty() && error == std::errc() && end == t.data() + t.size();
    };
    const auto whole_integer = [&](const std::string& t) { return whole(t, std::int64_t{0}); };
    switch (kind) {
      case ParameterKind::kInteger:
      case ParameterKind::kUnsigned:
        return whole_integer(text);
      case ParameterKind::kIntegers: {
        for (std::size_t start = 0; start <= text.size();) {
          const std::size_t comma = std::min(text.find(',', start), text.size());
          if (!whole_integer(text.substr(start, comma - start))) return false;
          start = comma + 1;
        }
        return true;
      }
      case ParameterKind::kNumber:
        return whole(text, 0.0);
      case ParameterKind::kName:
        return !text.empty() && !whole_integer(text);
    }
    return false;
  };
  // Every parameter gets a value of its kind (names: the row's own default text).
  VariantParams written = params_of(make_spec(v, {}));
  for (const ParameterInfo& p : parameters_of(v)) {
    EXPECT_FALSE(to_string(p.kind).empty());
    const auto it = written.find(p.name);
    if (it != written.end()) {
      EXPECT_TRUE(reads_as(p.kind, it->second)) << p.name << "=" << it->second;
    }
    if (p.kind == ParameterKind::kIntegers) {
      EXPECT_NO_THROW(make_spec(v, {{p.name, "0,1"}})) << p.name;
    }
    if (p.kind == ParameterKind::kName) {
      EXPECT_THROW(make_spec(v, {{p.name, "7"}}), Error) << p.name;
    } else if (p.kind != ParameterKind::kNumber) {
      EXPECT_THROW(make_spec(v, {{p.name, "0.5"}}), Error) << p.name;
    }
  }
}

// The row's default spec, with GQA, padding and a strided layout, on every target.
TEST_P(VariantTable, DefaultSpecMatchesItsReference) {
  const Variant v = GetParam();
  const ConcreteSpec spec = make_spec(v, {});
  for_each_target([&] {
    const std::int64_t b = 2, hq = 4, hkv = 2, s = 37, d = 16;
    const OwnedTensor q = make_tensor(b, hq, s, d, Layout::kBSHD, 71, 3);
    const OwnedTensor k = make_tensor(b, hkv, s, d, Layout::kBSHD, 72, 3);
    const OwnedTensor vv = make_tensor(b, hkv, s, d, Layout::kBSHD, 73, 3);
    OwnedTensor out = make_tensor(b, hq, s, d, Layout::kBHSD, 74);
    AttentionOptions options;
    options.variant = as_variant_spec(spec);
    options.mask.key_lengths = {37, 20};
    const RunRecord r = attend(q.view, k.view, vv.view, out.view, options);
    EXPECT_EQ(r.variant, v);
    const double error = reference::max_relative_error(
        out.view, reference::variant(q.view, k.view, vv.view, spec, options.mask, std::nullopt));
    worst_error.add(error);
    EXPECT_LT(error, 1e-5) << to_string(v);
  });
}

INSTANTIATE_TEST_SUITE_P(EveryRow, VariantTable, ::testing::ValuesIn(concrete_variants()), name_of);

}  // namespace
}  // namespace seqattn::testing
