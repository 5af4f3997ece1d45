// Deterministic input families for accuracy measurements (report, calibrate). Uniform random
// Q/K/V make exact attention nearly uniform, where every approximation looks poor; real
// attention is peaked and decays with distance, which is what sliding window bets on.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/cli/measure.hpp"

namespace seqattn::cli {

enum class InputFamily {
  kUniform,    // q, k, v uniform in [-1, 1)
  kDecaying,   // q, k share a smooth process and a constant part, RoPE-rotated: decays with |i-j|
  kAnchors,    // kDecaying plus a few anchor keys (tokens 0-3) every query attends to
  kLowRank,    // q, k of rank 8 (Gaussian factors): the structure Linformer assumes
  kClustered,  // q around S/32 random directions, tokens assigned at random; k = q RMS-normalised
               // (Reformer's shared-QK keys): attention follows content, not distance (LSH)
};

std::string_view to_string(InputFamily family);
// "uniform", "decaying", "anchors", "lowrank", "clustered"; throws Error naming `argument`
// otherwise.
InputFamily parse_input_family(std::string_view name, std::string_view argument);
const std::vector<InputFamily>& all_input_families();

// Overwrites the f32 q, k, v of `w` (contiguous BHSD) with the family's values, deterministic
// in `seed`; v stays uniform in [-1, 1) for every family.
void fill_inputs(Workload& w, InputFamily family, std::uint64_t seed);

}  // namespace seqattn::cli
