// Reads each row's variants/<stem>/test_cases.json (see variant_test_rows.hpp).
#include "tests/support/variant_test_rows.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "seqattn/error.hpp"
#include "seqattn/variant_params.hpp"

namespace seqattn::testing {
namespace {

using nlohmann::json;

struct TableRow {
  Variant variant;
  const char* stem;
};
constexpr TableRow kTable[] = {
#define SEQATTN_VARIANT(id, name, Spec, stem) {Variant::id, #stem},
#include "seqattn/variant_list.inc"
};

[[noreturn]] void fail(const std::string& file, const std::string& what) {
  throw std::runtime_error(file + ": " + what +
                           " (each row of seqattn/variant_list.inc declares the cases the "
                           "cross-cutting test suites run in its folder; see "
                           "variants/dense/test_cases.json)");
}

ConcreteSpec spec_of(Variant variant, const json& params, const std::string& file) {
  VariantParams texts;
  for (const auto& [name, value] : params.items()) {
    if (!value.is_string()) fail(file, "parameter '" + name + "' is not a string");
    texts[name] = value.get<std::string>();
  }
  return make_spec(variant, texts);
}

VariantTestCase case_of(Variant variant, const json& c, const std::string& file) {
  VariantTestCase t;
  t.variant = variant;
  t.name = std::string(to_string(variant)) + ": " + c.at("name").get<std::string>();
  t.spec = spec_of(variant, c.value("params", json::object()), file);
  t.causal = c.value("causal", false);
  t.key_lengths = c.value("key_lengths", false);
  return t;
}

VariantJob job_of(Variant variant, const json& j, const std::string& file) {
  VariantJob t;
  t.variant = variant;
  t.name = std::string(to_string(variant)) + ": " + j.at("name").get<std::string>();
  t.spec = spec_of(variant, j.value("params", json::object()), file);
  t.causal = j.value("causal", false);
  t.rope = j.value("rope", false);
  const std::string shape = j.value("shape", "usual");
  if (shape != "usual" && shape != "one_pair") fail(file, "job shape '" + shape + "'");
  t.shape = shape == "usual" ? JobShape::kUsual : JobShape::kOnePair;
  return t;
}

VariantTestRow read_row(const TableRow& r) {
  const std::string file =
      std::string(SEQATTN_SOURCE_DIR) + "/variants/" + r.stem + "/test_cases.json";
  std::ifstream in(file);
  if (!in) fail(file, "cannot be read");
  VariantTestRow row;
  row.variant = r.variant;
  row.stem = r.stem;
  try {
    const json doc = json::parse(in);
    for (const auto& option : doc.at("unsupported")) {
      const auto name = option.get<std::string>();
      if (std::find(std::begin(kDeclarableOptions), std::end(kDeclarableOptions), name) ==
          std::end(kDeclarableOptions)) {
        fail(file, "unsupported option '" + name + "' is none of kDeclarableOptions");
      }
      row.unsupported.push_back(name);
    }
    for (const auto& c : doc.at("cases")) row.cases.push_back(case_of(r.variant, c, file));
    for (const auto& j : doc.at("jobs")) row.jobs.push_back(job_of(r.variant, j, file));
  } catch (const json::exception& e) {
    fail(file, e.what());
  } catch (const Error& e) {
    fail(file, e.what());
  }
  if (row.cases.empty() || row.jobs.empty()) fail(file, "declares no cases or no jobs");
  return row;
}

}  // namespace

std::vector<std::int64_t> key_lengths_for(std::int64_t batch, std::int64_t seq_k) {
  std::vector<std::int64_t> lengths;
  for (std::int64_t b = 0; b < batch; ++b) lengths.push_back(b % 2 == 0 ? seq_k : seq_k / 2 + 1);
  return lengths;
}

Mask VariantTestCase::mask(std::int64_t batch, std::int64_t seq_k) const {
  Mask m;
  m.causal = causal;
  if (key_lengths) m.key_lengths = key_lengths_for(batch, seq_k);
  return m;
}

AttentionOptions VariantTestCase::options(std::int64_t batch, std::int64_t seq_k) const {
  AttentionOptions o;
  o.variant = as_variant_spec(spec);
  o.mask = mask(batch, seq_k);
  return o;
}

bool VariantTestRow::supports(std::string_view option) const {
  return std::find(unsupported.begin(), unsupported.end(), option) == unsupported.end();
}

bool VariantTestCase::supports(std::string_view option) const {
  return variant_test_row(variant).supports(option);
}

const VariantTestCase& VariantTestRow::fullest_case() const {
  const auto masks = [](const VariantTestCase& c) { return int{c.causal} + int{c.key_lengths}; };
  return *std::max_element(cases.begin(), cases.end(),
                           [&](const auto& a, const auto& b) { return masks(a) < masks(b); });
}

const std::vector<VariantTestRow>& variant_test_rows() {
  static const std::vector<VariantTestRow> rows = [] {
    std::vector<VariantTestRow> all;
    for (const TableRow& r : kTable) all.push_back(read_row(r));
    return all;
  }();
  return rows;
}

std::vector<VariantTestCase> every_variant_case() {
  std::vector<VariantTestCase> cases;
  for (const VariantTestRow& row : variant_test_rows())
    cases.insert(cases.end(), row.cases.begin(), row.cases.end());
  return cases;
}

const VariantTestRow& variant_test_row(Variant variant) {
  for (const VariantTestRow& row : variant_test_rows())
    if (row.variant == variant) return row;
  throw std::runtime_error("no row of the variant table is " + std::string(to_string(variant)));
}

}  // namespace seqattn::testing
