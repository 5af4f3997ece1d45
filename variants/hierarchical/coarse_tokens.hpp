// Coarse tokens of hierarchical attention: the means of groups of rows, one level from the one
// below (pairs of rows, weighted by how many valid tokens each stands for), and the exact merge
// of softmax results over disjoint key sets that joins the levels.
#pragma once

#include <cstdint>

namespace seqattn::detail {

// Row r of a matrix is stored at base + slot(r)·row_stride, element c at + c·col_stride, where
// slot(r) = position[r] (a level's stored order, LevelLayout::position) or r when null.
struct RowSource {
  const float* base = nullptr;
  std::int64_t rows = 0, cols = 0, row_stride = 0, col_stride = 1;
  const std::int64_t* position = nullptr;
};
struct RowTarget {
  float* base = nullptr;
  std::int64_t ld = 0;
  const std::int64_t* position = nullptr;
  float* row(std::int64_t r) const { return base + (position ? position[r] : r) * ld; }
};

// dst row t (of ceil(rows / 2)) = the mean of rows 2t and 2t + 1 of src weighted by their
// counts (null: each row < `valid` counts 1, the others 0); counts_out[t] = the sum of the two
// (unless counts_out is null: values share their keys' counts). A row standing for no token is
// zeros.
void halve_rows(const RowSource& src, const std::int64_t* counts, std::int64_t valid,
                const RowTarget& dst, std::int64_t* counts_out, int threads);

// Column `col` of rows [0, rows) of dst: ln(count)/scale, so that a query column of 1 adds
// ln(count) to the scaled score (the coarse key counts `count` times in the normaliser); -inf
// for a row that stands for no token, whose score is then -inf whatever the query (the other
// columns of such a row are zeros).
void write_log_counts(const std::int64_t* counts, std::int64_t rows, float scale,
                      const RowTarget& dst, std::int64_t col);
// Column `col` of rows [0, rows) of dst = 1.
void write_ones(std::int64_t rows, const RowTarget& dst, std::int64_t col);

// Rows [first, end) of src, and dst from its row `first`: a part of a pass (first even when it
// is halved, so that pairs stay pairs).
RowSource rows_from(const RowSource& src, std::int64_t first, std::int64_t end);
RowTarget rows_from(const RowTarget& dst, std::int64_t first);

// (out_a, lse_a) := the softmax result over the union of the key sets of a and b, which are
// disjoint: weights exp(lse - max) renormalised. An empty side (lse = -inf) leaves the other
// as it is; a NaN on either side gives NaN.
void merge_partial(float* out_a, std::int64_t step_a, float& lse_a, const float* out_b, float lse_b,
                   std::int64_t dim_v);

}  // namespace seqattn::detail
