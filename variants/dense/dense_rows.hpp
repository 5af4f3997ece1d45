// Row-at-a-time dense attention in float: correct for every mask, stride and shape. It is the
// path for attention weights output and the baseline the tiled kernel is measured against.
#pragma once

#include "variants/attention_variant.hpp"

namespace seqattn::detail {

void dense_rows_forward(const Problem& p);

}  // namespace seqattn::detail
