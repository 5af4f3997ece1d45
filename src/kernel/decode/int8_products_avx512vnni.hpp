// The int8 KV cache's micro-kernels for AVX512-VNNI (vpdpbusd for Q·Kᵀ, vpdpwssd for P·V),
// compiled alone with the VNNI flags (int8_products_avx512vnni.cpp) and called only where
// CpuFeatures::avx512_vnni holds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

// out[r][0, 64) = Σ_d q[r][d] · k[d][0, 64) for rows in [1, 6] query rows, exactly as
// QuadDotTile (src/kernel/decode/int8_products-inl.h) computes it: q rows int8, q_stride bytes
// apart, zero padded to whole quads; q_sums[r] = Σ_d q[r][d]; key quad c of the 64-key tile at
// k + c·quad_stride (256 bytes). `prefetch` (offset in bytes) asks for the same rows that far
// ahead as they are read.
void QuadDot64Avx512Vnni(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
                         const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
                         std::size_t rows, float* out, std::size_t out_stride,
                         simd::Prefetch prefetch);

// out[r][0, cols) = Σ_t w[r][t] · v[t][0, cols) for rows in [1, 6] rows of int16 weights
// (w_stride apart) over `pairs` pairs of keys, exactly as PairDotTile (int8_products-inl.h)
// computes it: pair p at v + p·pair_stride bytes, column c's two int8 at 2c; cols a multiple of
// 16; out 64-byte aligned. `prefetch` (offset in bytes) asks for each pair's columns that far
// ahead.
void PairDotAvx512Vnni(const std::int16_t* w, std::size_t w_stride, const std::int8_t* v,
                       std::size_t pair_stride, std::size_t pairs, std::size_t rows,
                       std::size_t cols, float* out, std::size_t out_stride,
                       simd::Prefetch prefetch);

}  // namespace seqattn::detail
