// The int8 KV cache's Q·Kᵀ micro-kernel for AVX512-VNNI (vpdpbusd), compiled alone with the
// VNNI flags (int8_scores_avx512vnni.cpp) and called only where CpuFeatures::avx512_vnni holds.
#pragma once

#include <cstddef>
#include <cstdint>

namespace seqattn::detail {

// out[r][0, 64) = Σ_d q[r][d] · k[d][0, 64) for rows in [1, 6] query rows, exactly as
// QuadDotTile (src/kernel/decode/int8_scores-inl.h) computes it: q rows int8, q_stride bytes
// apart, zero padded to whole quads; q_sums[r] = Σ_d q[r][d]; key quad c of the 64-key tile at
// k + c·quad_stride (256 bytes). `prefetch` (bytes, 0 for none) asks for the same rows that
// far ahead as they are read.
void QuadDot64Avx512Vnni(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
                         const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
                         std::size_t rows, float* out, std::size_t out_stride,
                         std::ptrdiff_t prefetch);

}  // namespace seqattn::detail
