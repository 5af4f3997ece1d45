// Row-at-a-time dense attention in float: correct for every mask, stride and shape. It is the
// path for the attention-weights output (dense and sliding window).
#pragma once

#include "variants/attention_variant.hpp"
#include "variants/dense/key_pattern.hpp"

namespace seqattn::detail {

// Rows see only the pairs `pattern` allows (KeyPattern::dense() for all).
void dense_rows_forward(const Problem& p, const KeyPattern& pattern);

}  // namespace seqattn::detail
