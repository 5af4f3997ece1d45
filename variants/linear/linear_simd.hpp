// Runtime-dispatched element kernels of linear attention (see linear_simd-inl.h). Matrices are
// row-major with leading dimension `ld` (floats between rows).
#pragma once

#include <cstdint>

namespace seqattn::detail {
struct RopeTables;
enum class RopeSide;
}  // namespace seqattn::detail

namespace seqattn::detail::linear_simd {

// Blocking parameters of the target runtime dispatch picks (one table per target).
struct Blocking {
  std::int64_t causal_chunk = 64;  // keys per chunk of the causal prefix sum
  std::int64_t segment = 512;      // keys per causal segment (a multiple of causal_chunk)
  std::int64_t key_block = 256;    // keys per block of the non-causal summary
  std::int64_t query_block = 256;  // queries per output block
};
Blocking blocking();

// The element map applied while gathering rows: x·mul, then nothing, elu(·)+1 or relu(·).
enum class RowMap { kScale, kElu1, kRelu };
// dst [rows, cols] contiguous = map(src[r·row_stride + c·col_stride] · mul).
void scaled_map_rows(const float* src, std::int64_t rows, std::int64_t cols,
                     std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                     float* dst);
// scaled_map_rows with row r rotated by RoPE (as row first_row + r of q or k) between the
// multiplication and the map.
void rotated_map_rows(const float* src, std::int64_t rows, std::int64_t cols,
                      std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                      const RopeTables& rope, RopeSide side, std::int64_t first_row, float* dst);
// out[r] = |x_r|² / 2.
void half_squared_norms(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                        float* out);
// out[r] = max_c x[r, c].
void row_max(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, float* out);
// col_max[c] = max(col_max[c], max_r x[r, c] - row_shift[r]).
void column_max_shifted(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                        const float* row_shift, float* col_max);
// x[r, c] = exp(x[r, c] - row_shift[r] - col_shift[c]); col_shift may be null (zeros).
void exp_shifted_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                      const float* row_shift, const float* col_shift);
// x[r, c] += vec[c].
void add_to_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* vec);
// x[r, c] *= factors[r].
void scale_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                const float* factors);
// sums[c] += Σ_r x[r, c].
void add_column_sums(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     float* sums);
// out[r] += x_r · y.
void add_row_dots(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  const float* y, float* out);
// out[r] += Σ_c x[r, c].
void add_row_sums(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  float* out);
// Whether x[0, n) holds no Inf and no NaN.
bool all_finite(const float* x, std::int64_t n);
// out[r, c] = num[r, c] / g_r with g_r = den[r] (+ epsilon unless zero_when_den_zero), and a
// zero row where g_r <= 0. out is strided (row and column strides in floats).
void divide_rows(const float* num, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                 const float* den, float epsilon, bool zero_when_den_zero, float* out,
                 std::int64_t out_row_stride, std::int64_t out_col_stride);

}  // namespace seqattn::detail::linear_simd
