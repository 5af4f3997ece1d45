// Entry of the flash-style SIMD kernel (runtime-dispatched over every compiled Highway target).
#pragma once

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

// out (and lse when asked) for every (b, h, i) under the mask combined with the variant's key
// structure. Does not write attention weights (see weights_forward for that).
void flash_forward(const Problem& p, const KeyStructure& keys);

// The softmax variants' run: the flash kernel, then, when weights are asked for, a row pass
// that forms them (so out and lse never depend on whether they were asked).
void softmax_forward(const Problem& p, const KeyStructure& keys);

// Whether flash_forward() honours Problem::compute_path kAmxBf16 and kAmxEmulated (the Highway
// backend's tile products); the xsimd backend runs fp32 only.
bool tile_paths_built();

}  // namespace seqattn::detail
