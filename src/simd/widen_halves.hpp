// Widening of contiguous bf16/f16 runs to fp32 with the dispatched target's vectors (the
// q/k/v staging of half-precision arguments; not part of the public API).
#pragma once

#include <cstdint>

#include "seqattn/half.hpp"

namespace seqattn::detail {

// dst[0, n) = src[0, n) widened exactly (the same floats as the scalar conversion).
void widen_bf16(const bfloat16* src, float* dst, std::int64_t n);
void widen_f16(const float16* src, float* dst, std::int64_t n);

}  // namespace seqattn::detail
