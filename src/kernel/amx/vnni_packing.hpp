// The bf16 operand layouts of TDPBF16PS, packed from fp32 rows (plain C++: packing runs once
// per block of keys or queries, next to 32 × 32 × depth multiply-adds, so it need not be SIMD).
//
// TDPBF16PS computes C[m][n] += Σ_k A[m][2k]·B[k][2n] + A[m][2k+1]·B[k][2n+1]: every 32-bit
// element of a tile is a *pair* of bf16 along the reduction. A is therefore plain row-major
// (consecutive bf16 of a row are consecutive reduction indices), while B must hold, in its row
// k, the reduction pair (2k, 2k+1) of 16 output columns side by side: B is read as K/2 rows of
// 16 pairs. That is the "VNNI" layout below, shared by both products of a flash block:
//   scores  S = Q·Kᵀ: reduction over depth, output columns are keys   (pack_b_vnni)
//   values  T = P·V:  reduction over keys,  output columns are values (pack_b_vnni_rows)
#pragma once

#include <cstddef>
#include <span>

#include "seqattn/half.hpp"

namespace seqattn::detail::amx {

// One 64-byte tile row holds 32 bf16: the reduction advances 32 at a time, and a B tile row
// holds 16 output columns (pairs).
inline constexpr std::size_t kReductionStep = 32;
inline constexpr std::size_t kColumnsPerTile = 16;

constexpr std::size_t round_up(std::size_t n, std::size_t multiple) {
  return (n + multiple - 1) / multiple * multiple;
}

// The depth of an A row and the reduction extent of B, padded to whole tile rows.
constexpr std::size_t padded_depth(std::size_t depth) { return round_up(depth, kReductionStep); }

// Index of B element (reduction r, output column c) in a VNNI buffer of `columns_pad` columns:
//   ((r / 2) · columns_pad + c) · 2 + r % 2
// Row r/2 of the buffer is row r/2 of a B tile (for the tile of columns [c0, c0 + 16): start
// at vnni_index(0, c0, ·) + (r/2)·columns_pad·2, stride columns_pad·2 elements), and the
// pair (r, r+1) of column c is one 32-bit element.
constexpr std::size_t vnni_index(std::size_t r, std::size_t c, std::size_t columns_pad) {
  return ((r / 2) * columns_pad + c) * 2 + r % 2;
}

// A operand: out[i · padded_depth(depth) + k] = bf16(scale · x[i · row_stride + k]) for
// i < rows, k < depth, and 0 for depth <= k < padded_depth(depth) (zeros add nothing to the
// dot products, so a partial depth step needs no branch in the tile loop). The product
// scale·x is rounded once, to nearest even: the flash kernel pre-multiplies queries by
// scale·log2 e, and rounding x to bf16 first would round twice. Rows beyond `rows` (up to the
// 32 a block reads) are the caller's to zero. out.size() >= rows · padded_depth(depth).
void pack_a_rows(const float* x, std::size_t row_stride, std::size_t rows, std::size_t depth,
                 float scale, std::span<bfloat16> out);

// B operand of S = A·Xᵀ from X [n][depth] (key j is row j, row stride `row_stride`):
// out[vnni_index(k, j, n_pad)] = bf16(x[j · row_stride + k]), zero for k >= depth or j >= n.
// Shape [padded_depth(depth) / 2][n_pad][2]; n_pad >= n, a multiple of 16.
// out.size() >= padded_depth(depth) · n_pad.
void pack_b_vnni(const float* x, std::size_t row_stride, std::size_t n, std::size_t depth,
                 std::size_t n_pad, std::span<bfloat16> out);

// B operand of T = P·V from V [keys][cols] (row stride `row_stride`):
// out[vnni_index(t, c, cols_pad)] = bf16(v[t · row_stride + c]), zero for t >= keys or
// c >= cols. Shape [keys_pad / 2][cols_pad][2]; keys_pad >= keys, a multiple of 32 (one B tile
// is 16 rows of key pairs); cols_pad >= cols, a multiple of 16. out.size() >= keys_pad · cols_pad.
void pack_b_vnni_rows(const float* v, std::size_t row_stride, std::size_t keys, std::size_t cols,
                      std::size_t keys_pad, std::size_t cols_pad, std::span<bfloat16> out);

}  // namespace seqattn::detail::amx
