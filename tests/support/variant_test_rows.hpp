// What the cross-cutting test suites run of each row of the variant table, read from the
// row's own folder (variants/<stem>/test_cases.json): named parameter sets, the concurrency
// suites' jobs, and the options the row refuses. The suites enumerate these rows instead of
// naming variants, so a row added to seqattn/variant_list.inc is covered by every suite once
// its folder declares its cases (a missing file fails every suite that reads it, naming it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/options.hpp"

namespace seqattn::testing {

// One parameter set of a row, for problems of 17 to 300 tokens.
struct VariantTestCase {
  Variant variant = Variant::kDense;
  std::string name;  // "<variant>: <case>", e.g. "sliding-window: window + globals"
  ConcreteSpec spec;
  bool causal = false;
  bool key_lengths = false;  // run with key_lengths_for(batch, seq_k)

  // Whether the case's row honours `option` (one of kDeclarableOptions).
  bool supports(std::string_view option) const;
  // seq_q, or seq_k where the row is self-attention only.
  std::int64_t seq_q_for(std::int64_t seq_q, std::int64_t seq_k) const {
    return supports("S_q != S_k") ? seq_q : seq_k;
  }
  Mask mask(std::int64_t batch, std::int64_t seq_k) const;
  AttentionOptions options(std::int64_t batch, std::int64_t seq_k) const;
};

// Padding that differs per batch entry: seq_k, then seq_k / 2 + 1, then alternating.
std::vector<std::int64_t> key_lengths_for(std::int64_t batch, std::int64_t seq_k);

// A problem of the concurrency suites (tests/reliability/threads_support.hpp).
enum class JobShape {
  kUsual,    // B = 2, H = 4, H_kv = 2, S = 300, D = 32
  kOnePair,  // B = 1, H = 2, H_kv = 1, S = 2100, D = 64: fewer (batch, kv head) pairs than threads
};
struct VariantJob {
  Variant variant = Variant::kDense;
  std::string name;
  ConcreteSpec spec;
  bool causal = false;
  bool rope = false;
  JobShape shape = JobShape::kUsual;
};

struct VariantTestRow {
  Variant variant = Variant::kDense;
  std::string stem;  // the folder variants/<stem>/
  std::vector<VariantTestCase> cases;
  std::vector<VariantJob> jobs;
  // Arguments the row refuses with Error(kUnsupported) naming exactly that argument, from
  // kDeclarableOptions.
  std::vector<std::string> unsupported;

  bool supports(std::string_view option) const;
  // The case with the most masks (causal and key lengths), the first of those that tie.
  const VariantTestCase& fullest_case() const;
};

// The options a row may declare unsupported, as the library's errors name them.
inline constexpr std::string_view kDeclarableOptions[] = {
    "S_q != S_k", "mask.causal", "mask.key_lengths", "mask.keep",    "mask.bias",
    "weights",    "lse",         "options.rope",     "options.alibi"};

// Every row of the variant table, in its order (read once; throws std::runtime_error naming
// the file when a row's test_cases.json is missing or malformed).
const std::vector<VariantTestRow>& variant_test_rows();
// Every case of every row, in table order.
std::vector<VariantTestCase> every_variant_case();
// The row of `variant`.
const VariantTestRow& variant_test_row(Variant variant);

}  // namespace seqattn::testing
