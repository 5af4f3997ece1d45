// The attention-weights output (dense and sliding window), row at a time in float, from the
// log-sum-exp the flash kernel produced for the same call: weights = exp(score - lse). So a
// call that asks for weights gets the same out and lse, bit for bit, as one that does not.
#pragma once

#include "variants/attention_variant.hpp"
#include "variants/dense/key_pattern.hpp"

namespace seqattn::detail {

// Writes p.weights (which must be set) for the pairs `pattern` allows (KeyPattern::dense() for
// all), given lse [B, H_q, S_q, 1] of the same problem.
void dense_weights_forward(const Problem& p, const KeyPattern& pattern, const Tensor& lse);

}  // namespace seqattn::detail
