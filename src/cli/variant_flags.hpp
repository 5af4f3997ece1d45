// Command-line flags that choose and parameterise a variant, shared by run, bench, mha and
// calibrate, and the policy flags shared with select.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "seqattn/half.hpp"
#include "seqattn/options.hpp"
#include "seqattn/policy.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace seqattn::cli {

struct PolicyFlags {
  std::string profile;
  std::int64_t dense_max_seq = 0;
  std::int64_t sparse_max_seq = 0;
  CLI::Option* profile_opt = nullptr;
  CLI::Option* dense_max_opt = nullptr;
  CLI::Option* sparse_max_opt = nullptr;
};

struct VariantFlags {
  std::string variant = "dense";
  std::int64_t window = 256;
  std::int64_t window_right = 256;
  std::vector<std::int64_t> global_tokens;
  std::string feature_map = "elu1";
  std::int64_t features = 0;
  std::uint64_t seed = 0;
  std::int64_t proj_len = 256;
  std::int64_t block = 64;
  std::int64_t levels = 0;
  PolicyFlags policy;

  CLI::Option* window_opt = nullptr;
  CLI::Option* window_right_opt = nullptr;
  CLI::Option* global_opt = nullptr;
  CLI::Option* feature_map_opt = nullptr;
  CLI::Option* features_opt = nullptr;
  CLI::Option* seed_opt = nullptr;
  CLI::Option* proj_len_opt = nullptr;
  CLI::Option* block_opt = nullptr;
  CLI::Option* levels_opt = nullptr;
};

// --profile, --dense-max-seq, --sparse-max-seq.
void add_policy_flags(CLI::App& command, PolicyFlags& flags);
// --variant and every variant parameter (including the policy flags for auto).
void add_variant_flags(CLI::App& command, VariantFlags& flags);

// The default policy, or the --profile file, with --dense-max-seq/--sparse-max-seq applied.
SelectionPolicy make_policy(const PolicyFlags& flags);

// The spec the flags describe. Throws Error(kUnsupported) naming the flag when a flag was given
// that the chosen variant does not use: a flag is never silently ignored.
VariantSpec make_spec(const VariantFlags& flags);

// Comma-separated integers, e.g. "128,256"; throws Error naming `argument` on bad text.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& argument);

// "f32", "bf16" or "f16"; throws Error naming `argument` otherwise.
DType parse_dtype(const std::string& text, const std::string& argument);

}  // namespace seqattn::cli
