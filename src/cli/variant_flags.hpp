// Command-line flags that choose and parameterise a variant, shared by run, bench, mha,
// report and calibrate, and the policy flags shared with select. The parameter flags come
// from the variant table: one flag per parameter name any variant takes (--window,
// --feature-map, --block, ...), so a new variant's parameters need no change here.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "seqattn/half.hpp"
#include "seqattn/options.hpp"
#include "seqattn/policy.hpp"
#include "seqattn/variant_params.hpp"

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

// One option per parameter of the table's variants, keyed by parameter name.
struct ParamFlags {
  // Storage CLI11 writes into (a map: stable addresses). Every flag takes one or more values,
  // space- or comma-separated, joined with commas: "--global 0 9" and "--global 0,9" are the
  // same list, and "--window 5 6" is refused by the parameter's integer parse.
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, CLI::Option*> options;
};

struct VariantFlags {
  std::string variant = "dense";
  ParamFlags params;
  PolicyFlags policy;
  // --rotations r.npy: LSH attention's R, float32 [hashes, D, buckets/2] or [hashes*D,
  // buckets/2]. make_spec() loads it here and the spec's view points into it, so these flags
  // must outlive the specs they make.
  std::string rotations_path;
  CLI::Option* rotations_opt = nullptr;
  mutable std::vector<float> rotations;
};

// --profile, --dense-max-seq, --sparse-max-seq.
void add_policy_flags(CLI::App& command, PolicyFlags& flags);
// One flag per parameter name in the table (help lists the variants taking it).
void add_param_flags(CLI::App& command, ParamFlags& flags);
// --variant, the parameter flags and the policy flags (for auto).
void add_variant_flags(CLI::App& command, VariantFlags& flags);

// The parameter flags that were given, by parameter name.
VariantParams given_params(const ParamFlags& flags);
// The CLI spelling of a parameter: "window_right" -> "--window-right".
std::string flag_of(const std::string& parameter);

// The default policy, or the --profile file, with --dense-max-seq/--sparse-max-seq applied.
SelectionPolicy make_policy(const PolicyFlags& flags);

// The spec the flags describe. Throws Error(kUnsupported) naming the flag when a flag was given
// that the chosen variant does not take: a flag is never silently ignored. With --variant
// auto, each parameter flag applies to the policy's rules whose variant takes it.
VariantSpec make_spec(const VariantFlags& flags);

// Comma-separated integers, e.g. "128,256"; throws Error naming `argument` on bad text.
std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& argument);

// "f32", "bf16" or "f16"; throws Error naming `argument` otherwise.
// "f32", "bf16", "f16", and with cache_storage also "i8" (a KvCache's int8 storage).
DType parse_dtype(const std::string& text, const std::string& argument, bool cache_storage = false);

}  // namespace seqattn::cli
