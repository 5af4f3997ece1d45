// --rope, --rope-dims, --rope-layout, --rope-offset and --alibi: the positional encodings of
// run and bench (seqattn/positional.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "seqattn/options.hpp"

namespace CLI {
class App;
class Option;
}  // namespace CLI

namespace seqattn::cli {

struct PositionalFlags {
  double rope_theta = 10000.0;
  std::int64_t rope_dims = 0;
  std::string rope_layout = "halves";
  std::int64_t rope_offset = 0;
  bool alibi = false;
  CLI::Option* rope_opt = nullptr;
  CLI::Option* rope_dims_opt = nullptr;
  CLI::Option* rope_layout_opt = nullptr;
  CLI::Option* rope_offset_opt = nullptr;
};

void add_positional_flags(CLI::App& command, PositionalFlags& flags);

// Sets options.rope / options.alibi from the flags. Throws Error(kInvalidArgument) naming
// the flag for a --rope-* flag without --rope or an unknown layout (the values themselves are
// checked by the library, naming options.rope.*).
void apply_positional(const PositionalFlags& flags, AttentionOptions& options);

}  // namespace seqattn::cli
