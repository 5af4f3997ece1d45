// The rounds of LSH attention (LshSpec in seqattn/variant_specs.hpp) over one validated problem:
// hash, sort, and attend chunk windows on the tile kernel, then combine the rounds per row.
#pragma once

#include <cstdint>

#include "seqattn/tensor.hpp"
#include "src/core/problem.hpp"

namespace seqattn::detail {

// A spec resolved against its shape: the bucket count chosen, the rotations owned or borrowed.
struct LshConfig {
  std::int64_t hashes = 1;
  std::int64_t buckets = 2;  // even; M = buckets / 2 columns of rotations
  std::int64_t chunk = 1;
  bool shared = true;
  MatrixView<const float> rotations;  // [hashes · D, buckets / 2], row r·D + d = R[r, d, :]
};

// out and lse (when asked) of every row, from the definition in docs/architecture.md
// ("LSH attention"). Work goes by (batch, kv head) pair; the result is bitwise the same for any
// thread count.
void lsh_forward(const Problem& p, const LshConfig& config);

}  // namespace seqattn::detail
