// The register-tiled product of linear attention (see linear_tiles-inl.h), runtime-dispatched.
#pragma once

#include <cstdint>

namespace seqattn::detail::linear_tiles {

// Cache lines to request from memory while a product computes (the caller's next block).
struct Lines {
  const float* const* lines = nullptr;
  std::int64_t count = 0;
};

// c [rows, cols] = (accumulate ? c : 0) + Σ_{p < depth} A(i, p) · b[p, :], with
// A(i, p) = a[i·a_row + p·a_depth] (a matrix, or a transposed one), b row p at b + p·ldb and c
// row i at c + i·ldc, columns contiguous in both. Any rows, cols, depth >= 0. Every line of
// `ahead` is prefetched once, spread over the product.
void multiply_broadcast(std::int64_t rows, std::int64_t cols, std::int64_t depth, const float* a,
                        std::int64_t a_row, std::int64_t a_depth, const float* b, std::int64_t ldb,
                        float* c, std::int64_t ldc, bool accumulate, Lines ahead = {});

}  // namespace seqattn::detail::linear_tiles
