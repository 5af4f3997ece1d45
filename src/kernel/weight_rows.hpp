// The attention-weights output (dense and sliding window), row at a time in float: each row's
// stable softmax. It runs after the flash kernel, which computes out and lse as it would
// without weights, so asking for weights changes neither, bit for bit.
#pragma once

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

// Writes p.weights (which must be set) for the pairs `keys` allows (AllKeys for
// all); everything else in p is left alone.
void weights_forward(const Problem& p, const KeyStructure& keys);

}  // namespace seqattn::detail
