// Choosing a variant from the sequence length. A SelectionPolicy is an ordered list of rules
// {max_seq, spec}: the first rule whose max_seq is >= S_k decides. The default rules follow
// the reference document's guidance (n <= 512 dense, 512 < n <= 2048 sparse, n > 2048
// linear); a profile written by `seqattn calibrate` replaces them with crossovers measured on
// this machine, and may add measured times and errors that an error budget chooses among.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/variant_specs.hpp"

namespace seqattn {

// One calibrated point: a variant's median time and its error against exact dense at length
// seq, measured by `seqattn calibrate` with `spec` on the profile's input family.
struct PolicyMeasurement {
  std::string variant;  // a name; only variants that auto_may_choose() are loaded from JSON
  std::int64_t seq = 0;
  double seconds = 0;
  double error = 0;  // max |out - dense| / max |dense|
  // What was measured (and what a budget then runs); unset = the spec of the first rule
  // running `variant`, else its defaults. When set, its variant must be `variant`.
  std::optional<ConcreteSpec> spec{};
};

// S_k <= max_seq (no bound: every longer S_k) runs `spec`.
struct PolicyRule {
  std::optional<std::int64_t> max_seq;
  ConcreteSpec spec;
};

// The document's three bands: dense up to dense_max_seq, sliding window (window keys on each
// side) up to sparse_max_seq, linear attention with elu+1 beyond.
std::vector<PolicyRule> threshold_rules(std::int64_t dense_max_seq = 512,
                                        std::int64_t sparse_max_seq = 2048,
                                        std::int64_t window = 256);

struct SelectionPolicy {
  // Ordered; max_seq >= 0 and non-decreasing, only the last rule without a bound (it must be
  // unbounded, so every length has a decision).
  std::vector<PolicyRule> rules = threshold_rules();
  std::string source = "default (reference document 003, section 5.2)";
  // From a calibrated profile: time and error per variant and length, measured on the input
  // family `inputs`, and the profile's error budget. With a budget (this one, or the caller's)
  // the choice is the fastest measured variant within it (see select_variant); without one,
  // the rules decide.
  std::vector<PolicyMeasurement> measurements;
  std::string inputs = "uniform";
  std::optional<double> max_error;

  // The rule's max_seq for the first rule running `variant`; throws Error naming the policy
  // when no rule does. set_max_seq changes it (the CLI's --dense-max-seq, --sparse-max-seq).
  std::optional<std::int64_t> max_seq_of(Variant variant) const;
  void set_max_seq(Variant variant, std::int64_t max_seq);

  // Loads {"rules": [{"max_seq": 512, "variant": "dense"}, {"max_seq": 2048, "variant":
  // "sliding-window", "params": {"window": 256}}, {"variant": "linear"}], "max_error": ..,
  // "measurements": {"seqs": [..], "inputs": .., "variants": {name: {"params": {..},
  // "median_ms": [..], "relative_error": [..]}}}} from a JSON file. Profiles written before
  // the rules (keys dense_max_seq, sparse_max_seq, window, feature_map, num_features,
  // hierarchical_block, optionally under "policy") load as the equivalent three rules. Throws
  // Error (kIo or kInvalidArgument) naming the file and the bad key.
  static SelectionPolicy load_json(const std::string& path);
  // The profile load_json reads (rules, max_error, measurements with each variant's params).
  std::string to_json() const;
  void save_json(const std::string& path) const;
};

struct Selection {
  Variant variant;
  ConcreteSpec spec;   // what attend() runs
  std::string reason;  // e.g. "S_k=3000 > 2048: rule 3, linear (feature map elu1) [...]"
  // With an error budget: the measured candidates the choice was made among (at one length).
  std::vector<PolicyMeasurement> candidates;
};

// The decision for a problem whose key sequence has length seq_k (the cost driver). With an
// error budget (`max_error`, else policy.max_error) and measurements, the candidates are the
// measurements at the smallest calibrated length >= seq_k (the largest one beyond them) and
// the choice is the fastest whose error is <= the budget (its measured spec), dense when none
// is; without measurements the rules decide and the reason says so. Throws Error for a budget
// that is negative or NaN, and for rules that break the order above.
Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k,
                         std::optional<double> max_error = std::nullopt);

}  // namespace seqattn
