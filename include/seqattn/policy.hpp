// Choosing a variant from the sequence length. The default thresholds follow the reference
// document's guidance (n <= 512 dense, 512 < n <= 2048 sparse, n > 2048 linear); a profile
// written by `seqattn calibrate` replaces them with crossovers measured on this machine.
#pragma once

#include <cstdint>
#include <string>

namespace seqattn {

enum class Variant;

struct SelectionPolicy {
  std::int64_t dense_max_seq = 512;    // S <= this: dense
  std::int64_t sparse_max_seq = 2048;  // dense_max_seq < S <= this: sliding window
  std::int64_t window = 256;           // sliding window half-width (each side)
  std::string feature_map = "elu1";    // linear attention's feature map above sparse_max_seq
  std::int64_t num_features = 0;       // FAVOR+ m (0 = D)
  std::string source = "default (reference document 003, section 5.2)";

  // Loads {"dense_max_seq":..,"sparse_max_seq":..,"window":..,"feature_map":..} from a JSON
  // file; throws Error (kIo or kInvalidArgument) naming the file and the bad key.
  static SelectionPolicy load_json(const std::string& path);
  void save_json(const std::string& path) const;
};

struct Selection {
  Variant variant;
  std::string reason;  // e.g. "S_k=3000 > sparse_max_seq=2048 (default ...): linear"
};

// The decision for a problem whose key sequence has length seq_k (the cost driver).
Selection select_variant(const SelectionPolicy& policy, std::int64_t seq_k);

}  // namespace seqattn
