// The attention-weights output (dense and sliding window), row at a time in float: each row's
// stable softmax. It runs after the flash kernel, which computes out and lse as it would
// without weights, so asking for weights changes neither, bit for bit.
#pragma once

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

// Writes p.weights (which must be set) for the pairs `keys` allows (AllKeys for
// all); everything else in p is left alone. Its scratch (weights_workspace_bytes) comes from
// p.workspace when the caller gave one (checked: an Error naming workspace.size()), else it is
// allocated for the call.
void weights_forward(const Problem& p, const KeyStructure& keys);

// The scratch weights_forward carves for p: a row of scores per thread, and with RoPE the
// rotated copies of q and k (each part 64-byte aligned).
std::size_t weights_workspace_bytes(const Problem& p);

}  // namespace seqattn::detail
