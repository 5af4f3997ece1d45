// Coarse tokens of hierarchical attention: the means of groups of rows, one level from the one
// below (pairs of rows, weighted by how many valid tokens each stands for), and the exact merge
// of softmax results over disjoint key sets that joins the levels.
#pragma once

#include <cstdint>

namespace seqattn::detail {

// Row r of a matrix: base + r·row_stride, element c at + c·col_stride.
struct RowSource {
  const float* base = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 1;
};

// dst row t (of ceil(rows / 2), leading dimension ld) = the mean of rows 2t and 2t + 1 of src
// weighted by their counts (null: each row < `valid` counts 1, the others 0); counts_out[t] =
// the sum of the two. A row standing for no token is zeros.
void halve_rows(const RowSource& src, const std::int64_t* counts, std::int64_t valid, float* dst,
                std::int64_t ld, std::int64_t* counts_out, int threads);

// Column `col` of each of `rows` rows of dst (leading dimension ld): ln(count)/scale, so that a
// query column of 1 adds ln(count) to the scaled score (the coarse key counts `count` times in
// the normaliser); 0 for a row that stands for no token (the kernel never reaches it).
void write_log_counts(const std::int64_t* counts, std::int64_t rows, float scale, float* dst,
                      std::int64_t ld, std::int64_t col);
// Column `col` of each of `rows` rows of dst = 1.
void write_ones(std::int64_t rows, float* dst, std::int64_t ld, std::int64_t col);

// (out_a, lse_a) := the softmax result over the union of the key sets of a and b, which are
// disjoint: weights exp(lse - max) renormalised. An empty side (lse = -inf) leaves the other
// as it is; a NaN on either side gives NaN.
void merge_partial(float* out_a, std::int64_t step_a, float& lse_a, const float* out_b, float lse_b,
                   std::int64_t dim_v);

}  // namespace seqattn::detail
