// The int8 KV cache's micro-kernels for AVX512-VNNI (vpdpbusd for Q·Kᵀ, vpdpwssd for P·V),
// compiled alone with the VNNI flags (int8_products_avx512vnni.cpp) and called only where
// CpuFeatures::avx512_vnni holds.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/kernel/decode/paced_requests.hpp"
#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

// Where QuadDot64Avx512Vnni leaves a tile's scores: s[r][t] = float(dot) · key_scales[t] ·
// query_scales[r], multiplied in that order, the rule CacheWorker::Int8Scores applies after
// the portable kernels (so both paths give the same floats).
struct QuadDotScores {
  float* s;                   // 64-byte aligned rows
  std::size_t stride;         // floats from one row to the next
  const float* key_scales;    // the tile's 64 keys, 64-byte aligned
  const float* query_scales;  // one per row
};

// How PairDotAvx512Vnni adds a tile's P·V to the output rows: t = float(sum) · scale[r] ·
// unit[r] (in that order), then o = o · alpha[r] + t as one FMA, or o + t when alpha is null;
// CacheWorker::Int8Values' rule after the portable kernels.
struct PairDotUpdate {
  float* o;            // 64-byte aligned rows
  std::size_t stride;  // floats from one row to the next
  const float* scale;  // per row: the int16 weights' scale
  const float* unit;   // per row: 1, or 2^-64 for a row of tiny weights
  const float* alpha;  // per row: the rescale factor; null: no rescale
};

// The scores of rows in [1, 6] query rows against a 64-key tile, the dot products exactly as
// QuadDotTile (src/kernel/decode/int8_products-inl.h) computes them: q rows int8, q_stride bytes
// apart, zero padded to whole quads; q_sums[r] = Σ_d q[r][d]; key quad c of the tile at
// k + c·quad_stride (256 bytes). `prefetch` (offsets in bytes) asks for the first far_quads
// rows that far ahead as they are read (the caller paces the rest), and for every row's near
// lines.
void QuadDot64Avx512Vnni(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
                         const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
                         std::size_t rows, const QuadDotScores& out, simd::Prefetch prefetch,
                         std::size_t far_quads);

// Σ_t w[r][t] · v[t][0, cols) for rows in [1, 6] rows of int16 weights (w_stride apart) over
// `pairs` pairs of keys, the sums exactly as PairDotTile (int8_products-inl.h) computes them,
// added to the output rows as `update` says: pair p at v + p·pair_stride bytes, column c's two
// int8 at 2c; cols a multiple of 16. `requests` (offsets in bytes) says what it asks for ahead
// as it goes (paced_requests.hpp).
void PairDotAvx512Vnni(const std::int16_t* w, std::size_t w_stride, const std::int8_t* v,
                       std::size_t pair_stride, std::size_t pairs, std::size_t rows,
                       std::size_t cols, const PairDotUpdate& update, const PairRequests& requests);

}  // namespace seqattn::detail
