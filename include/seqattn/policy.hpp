// Choosing a variant from the sequence length. The default thresholds follow the reference
// document's guidance (n <= 512 dense, 512 < n <= 2048 sparse, n > 2048 linear); a profile
// written by `seqattn calibrate` replaces them with crossovers measured on this machine.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace seqattn {

enum class Variant;

// One calibrated point: a variant's median time and its error against exact dense at length
// seq, measured by `seqattn calibrate` on the profile's input family.
struct PolicyMeasurement {
  std::string variant;  // "dense", "sliding-window", "linear" or "hierarchical" (choosable)
  std::int64_t seq = 0;
  double seconds = 0;
  double error = 0;  // max |out - dense| / max |dense|
};

struct SelectionPolicy {
  std::int64_t dense_max_seq = 512;      // S <= this: dense
  std::int64_t sparse_max_seq = 2048;    // dense_max_seq < S <= this: sliding window
  std::int64_t window = 256;             // sliding window half-width (each side)
  std::string feature_map = "elu1";      // linear attention's feature map above sparse_max_seq
  std::int64_t num_features = 0;         // FAVOR+ m (0 = D)
  std::int64_t hierarchical_block = 64;  // block b when a budget picks hierarchical attention
  std::string source = "default (reference document 003, section 5.2)";
  // From a calibrated profile: time and error per variant and length, measured on the input
  // family `inputs`, and the profile's error budget. With a budget (this one, or the caller's)
  // the choice is the fastest measured variant within it (see select_variant); without one,
  // the thresholds above decide.
  std::vector<PolicyMeasurement> measurements;
  std::string inputs = "uniform";
  std::optional<double> max_error;

  // Loads {"dense_max_seq":..,"sparse_max_seq":..,"window":..,"feature_map":.., "max_error":..,
  // "measurements": {"seqs": [..], "inputs": .., "variants": {name: {"median_ms": [..],
  // "relative_error": [..]}}}} from a JSON file (every key optional); throws Error (kIo or
  // kInvalidArgument) naming the file and the bad key.
  static SelectionPolicy load_json(const std::string& path);
  void save_json(const std::string& path) const;
};

struct Selection {
  Variant variant;
  std::string reason;  // e.g. "S_k=3000 > sparse_max_seq=2048 (default ...): linear"
  // With an error budget: the measured candidates the choice was made among (at one length).
  std::vector<PolicyMeasurement> candidates;
};

// The decision for a problem whose key sequence has length seq_k (the cost driver). With an
// error budget (`max_error`, else policy.max_error) and measurements, the candidates are the
// measurements at the smallest calibrated length >= seq_k (the largest one beyond them) and
// the choice is the fastest whose error is <= the budget, dense when none is; without
// measurements the thresholds decide and the reason says so. Throws Error for a budget that
// is negative or NaN.
Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k,
                         std::optional<double> max_error = std::nullopt);

}  // namespace seqattn
