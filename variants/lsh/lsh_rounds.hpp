// The rounds of LSH attention (LshSpec in seqattn/variant_specs.hpp) over one validated problem:
// hash, sort, and attend chunk windows on the tile kernel, then combine the rounds per row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "seqattn/tensor.hpp"
#include "src/core/problem.hpp"

namespace seqattn::detail {

class WindowStore;  // lsh_windows.hpp

// A spec resolved against its shape: the bucket count chosen, the rotations owned or borrowed.
struct LshConfig {
  std::int64_t hashes = 1;
  std::int64_t buckets = 2;  // even; M = buckets / 2 columns of rotations
  std::int64_t chunk = 1;
  bool shared = true;
  MatrixView<const float> rotations;  // [hashes · D, buckets / 2], row r·D + d = R[r, d, :]
};

// The largest workspace any kernel call of a run of p takes on this SIMD target and
// p.compute_path, whatever the key lengths: every call size is counted (lsh_rounds.cpp says
// why).
std::size_t lsh_calls_bytes(const Problem& p, const LshConfig& config);

// The scratch a run of p carves (what a caller's workspace holds), given lsh_calls_bytes.
std::size_t lsh_workspace_bytes(const Problem& p, const LshConfig& config, std::size_t calls_bytes);

// out and lse (when asked) of every row, from the definition in docs/architecture.md
// ("LSH attention"). Work goes by (batch, kv head) pair; the result is bitwise the same for any
// thread count. Its scratch: p's workspace (checked against lsh_workspace_bytes) or one
// allocation. calls_bytes: lsh_calls_bytes of p's calls (on p's target and compute path), or
// 0 for calls that allocate their own.
void lsh_forward(const Problem& p, const LshConfig& config, const WindowStore& windows,
                 std::size_t calls_bytes);

}  // namespace seqattn::detail
