// Entry of the flash-style SIMD kernel (runtime-dispatched over every compiled Highway target).
#pragma once

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

// out (and lse when asked) for every (b, h, i) under the mask combined with the variant's key
// structure. Does not write attention weights (see weights_forward for that).
void flash_forward(const Problem& p, const KeyStructure& keys);

// The bytes flash_forward carves for p (its shape, key lengths, threads and compute path, on
// this SIMD target): what Problem::workspace must hold. Builds the structure's tables (kept
// when the structure is fixed()).
std::size_t flash_workspace_bytes(const Problem& p, const KeyStructure& keys);

// Whether flash_forward streams each (batch, kv head) pair of p through a ring of key tiles
// (the banded path: a local structure whose pair passes the packing budget) rather than
// packing pairs whole, on this SIMD target. Its workspace is not monotone in the keys across
// that switch: a pair packed whole carves all its keys, a banded one a ring of its band. A
// variant sizing calls of many sizes (LSH's) asks where the switch is.
bool flash_streams_band(const Problem& p, const KeyStructure& keys);

// The softmax variants' run: the flash kernel, then, when weights are asked for, a row pass
// that forms them (so out and lse never depend on whether they were asked).
void softmax_forward(const Problem& p, const KeyStructure& keys);

// The workspace softmax_forward carves for a run of `planned` (without weights) on this SIMD
// target and planned.compute_path (the fp32 and the tile products block their tiles
// differently).
std::size_t softmax_workspace_bytes(const Problem& planned, const KeyStructure& keys);
// The same for a run that asks for weights: the weights pass runs after the kernel and carves
// its scratch from the same bytes, so the larger of the two.
std::size_t softmax_weights_workspace_bytes(const Problem& planned, const KeyStructure& keys);

// Whether flash_forward() honours Problem::compute_path kAmxBf16 and kAmxEmulated (the Highway
// backend's tile products); the xsimd backend runs fp32 only.
bool tile_paths_built();

}  // namespace seqattn::detail
