// Every row of the variant table (seqattn/variant_list.inc), through the interfaces the table
// drives: names, parameters by name, and the default spec of each row against its float64
// reference on every compiled target. A row added to the table is covered here unchanged.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "target_loop.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"
#include "tests/support/variant_test_rows.hpp"

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
  // LSH's default shared-QK mode takes its keys from the queries: one kv head per query head.
  const auto* lsh = std::get_if<LshSpec>(&spec);
  const std::int64_t hkv = lsh != nullptr && lsh->shared_qk ? 4 : 2;
  for_each_target([&] {
    const std::int64_t b = 2, hq = 4, s = 37, d = 16;
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

// The options a row's test_cases.json declares unsupported are refused with an Error of kind
// kUnsupported naming exactly that argument, writing nothing; every other declarable option
// is honoured (the call returns and matches the float64 reference where the reference takes
// the option). So what the cross-cutting suites skip for a row is what the row refuses.
struct OptionProblem {
  std::int64_t seq_q = 24;
  AttentionOptions options;
  OwnedTensor keep_storage, bias, weights, lse;
  std::vector<std::uint8_t> keep;
  reference::Positional positional;
};

OptionProblem with_option(std::string_view option, const VariantTestCase& c) {
  constexpr std::int64_t b = 2, hq = 4, sk = 24;
  OptionProblem p;
  p.options.variant = as_variant_spec(c.spec);
  if (option == "S_q != S_k") p.seq_q = 17;
  if (option == "mask.causal") p.options.mask.causal = true;
  if (option == "mask.key_lengths") p.options.mask.key_lengths = {sk, 13};
  if (option == "mask.keep") {
    for (std::int64_t i = 0; i < p.seq_q * sk; ++i) p.keep.push_back(i % 3 != 1);
    p.options.mask.keep =
        TensorView<const std::uint8_t>{p.keep.data(), {1, 1, p.seq_q, sk}, {0, 0, sk, 1}};
  }
  if (option == "mask.bias") {
    p.bias = make_tensor(1, hq, p.seq_q, sk, Layout::kBHSD, 91);
    p.options.mask.bias = p.bias.cview();
  }
  if (option == "weights") {
    p.weights = make_zeros(b, hq, p.seq_q, sk);
    p.options.weights = p.weights.view;
  }
  if (option == "lse") {
    p.lse = make_zeros(b, hq, p.seq_q, 1);
    p.options.lse = p.lse.view;
  }
  if (option == "options.rope") {
    p.options.rope = RotaryEmbedding{};
    p.positional.rope = RotaryEmbedding{};
  }
  if (option == "options.alibi") {
    p.options.alibi = Alibi{};
    for (const float slope : alibi_slopes(hq)) p.positional.alibi_slopes.push_back(slope);
    p.positional.alibi_symmetric = true;
  }
  return p;
}

TEST_P(VariantTable, DeclaredOptionsAreHonouredOrRefused) {
  const VariantTestRow& row = variant_test_row(GetParam());
  const VariantTestCase& c = row.cases.front();
  constexpr std::int64_t b = 2, hq = 4, hkv = 2, sk = 24, d = 16;
  const OwnedTensor k = make_tensor(b, hkv, sk, d, Layout::kBHSD, 82);
  const OwnedTensor v = make_tensor(b, hkv, sk, d, Layout::kBHSD, 83);
  for (const std::string_view option : kDeclarableOptions) {
    SCOPED_TRACE(std::string(option));
    OptionProblem p = with_option(option, c);
    const OwnedTensor q = make_tensor(b, hq, p.seq_q, d, Layout::kBHSD, 81);
    OwnedTensor out = make_tensor(b, hq, p.seq_q, d, Layout::kBHSD, 84);
    const std::vector<float> before = out.storage;
    if (!row.supports(option)) {
      try {
        attend(q.view, k.view, v.view, out.view, p.options);
        ADD_FAILURE() << row.stem << " declares '" << option << "' unsupported but honoured it";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::kUnsupported) << e.what();
        EXPECT_EQ(e.argument(), option) << e.what();
      }
      EXPECT_EQ(out.storage, before) << "a refused call wrote to out";
      continue;
    }
    EXPECT_NO_THROW(attend(q.view, k.view, v.view, out.view, p.options))
        << row.stem << " refused '" << option << "' without declaring it unsupported";
    const reference::Result ref = reference::variant(q.view, k.view, v.view, c.spec, p.options.mask,
                                                     std::nullopt, p.positional);
    EXPECT_LT(reference::max_relative_error(out.view, ref), 1e-5);
  }
}

// Every row declares its test cases, and each declared case runs and matches its reference.
TEST_P(VariantTable, DeclaredCasesMatchTheirReference) {
  const VariantTestRow& row = variant_test_row(GetParam());
  ASSERT_FALSE(row.cases.empty());
  for (const VariantTestCase& c : row.cases) {
    SCOPED_TRACE(c.name);
    const std::int64_t b = 2, hq = 4, hkv = 2, sk = 40, sq = c.seq_q_for(29, sk), d = 16;
    const OwnedTensor q = make_tensor(b, hq, sq, d, Layout::kBSHD, 61, 1);
    const OwnedTensor k = make_tensor(b, hkv, sk, d, Layout::kBSHD, 62, 1);
    const OwnedTensor vv = make_tensor(b, hkv, sk, 12, Layout::kBSHD, 63, 1);
    OwnedTensor out = make_zeros(b, hq, sq, 12);
    const AttentionOptions options = c.options(b, sk);
    attend(q.view, k.view, vv.view, out.view, options);
    EXPECT_LT(
        reference::max_relative_error(out.view, reference::variant(q.view, k.view, vv.view, c.spec,
                                                                   options.mask, std::nullopt)),
        1e-5);
  }
}

INSTANTIATE_TEST_SUITE_P(EveryRow, VariantTable, ::testing::ValuesIn(concrete_variants()), name_of);

}  // namespace
}  // namespace seqattn::testing
