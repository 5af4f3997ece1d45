#include "src/cli/positional_flags.hpp"

#include <CLI/CLI.hpp>

#include "seqattn/error.hpp"

namespace seqattn::cli {

void add_positional_flags(CLI::App& command, PositionalFlags& flags) {
  flags.rope_opt = command.add_option(
      "--rope", flags.rope_theta,
      "rotary embeddings (RoPE) with base THETA, applied to q and k inside the kernel");
  flags.rope_dims_opt = command.add_option("--rope-dims", flags.rope_dims,
                                           "RoPE: rotated dimensions (even; 0 = all D)");
  flags.rope_layout_opt =
      command.add_option("--rope-layout", flags.rope_layout,
                         "RoPE pairs: halves (GPT-NeoX, Hugging Face) | interleaved (GPT-J, "
                         "Meta's Llama); default halves");
  flags.rope_offset_opt =
      command.add_option("--rope-offset", flags.rope_offset, "RoPE: position of the first key");
  command.add_flag("--alibi", flags.alibi,
                   "ALiBi biases with the standard slopes for the head count (causal form "
                   "with --causal, symmetric otherwise)");
}

void apply_positional(const PositionalFlags& f, AttentionOptions& options) {
  const bool rope = f.rope_opt->count() > 0;
  for (const CLI::Option* option : {f.rope_dims_opt, f.rope_layout_opt, f.rope_offset_opt}) {
    if (option->count() > 0 && !rope) {
      throw Error(ErrorKind::kInvalidArgument, option->get_name(), "given together with --rope",
                  option->get_name() + " without --rope", "add --rope THETA (e.g. 10000)");
    }
  }
  if (rope) {
    RotaryEmbedding r;
    r.theta = f.rope_theta;
    r.dims = f.rope_dims;
    r.offset = f.rope_offset;
    if (f.rope_layout == "halves") {
      r.layout = RopeLayout::kHalves;
    } else if (f.rope_layout == "interleaved") {
      r.layout = RopeLayout::kInterleaved;
    } else {
      throw Error(ErrorKind::kInvalidArgument, "--rope-layout", "halves or interleaved",
                  f.rope_layout);
    }
    options.rope = r;
  }
  if (f.alibi) options.alibi = Alibi{};
}

}  // namespace seqattn::cli
