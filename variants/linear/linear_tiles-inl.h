// The register-tiled product of linear attention, per Highway target (compiled by
// linear_tiles.cc): c [rows, cols] (+)= A · b, where A's element (i, p) is read by broadcast
// from a[i·a_row + p·a_depth] and b's rows are contiguous. The strides let one kernel serve
// both products of the variant without packing either operand:
//   keys:    summary [m, D_v] += φ(K)ᵀ V    (A = φ(K) read transposed: a_row 1, a_depth m)
//   queries: numerator [n, D_v] = φ(Q) · S  (A = φ(Q): a_row m, a_depth 1)
// Packing (what the general GEMM engine does) costs a read and a write of both operands per
// call; here k = 64-256 and the operands sit in L1, so broadcasting straight from them is
// cheaper (measured: the packing routines took 17% of non-causal elu1 at S = 65536).
#if defined(SEQATTN_VARIANTS_LINEAR_LINEAR_TILES_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_VARIANTS_LINEAR_LINEAR_TILES_INL_H_
#undef SEQATTN_VARIANTS_LINEAR_LINEAR_TILES_INL_H_
#else
#define SEQATTN_VARIANTS_LINEAR_LINEAR_TILES_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "variants/linear/linear_tiles.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::linear_tiles {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FullTag = hn::ScalableTag<float>;
using OneTag = hn::CappedTag<float, 1>;

// Rows of a full tile. The tile is kTileRows × 2 vectors of accumulators, plus two b vectors
// and one broadcast: 8 rows use 19 of AVX-512's 32 registers (16 FMAs per 2 loads and 8
// broadcasts, so the FMA ports bind, not the loads); the 16-register targets take 4 rows.
// Measured in L1 on AVX-512 at 64 × 64 × 64: 82% of the FMA peak. 6 rows × 4 vectors (29
// registers) ran at half that: the compiler spilled.
constexpr std::size_t kTileRows = HWY_TARGET <= HWY_AVX3 ? 8 : 4;

// Into L2 only (prefetcht1): the tile's operands fill L1 (16 KB each of features, values and
// summary on AVX-512), and lines streaming into L1 evicted them.
HWY_INLINE void PrefetchToL2(const float* p) { __builtin_prefetch(p, 0, 2); }

// One tile: rows [0, kRows) × kVecs vectors of D from column 0 of c and b, over the whole
// depth. A's elements are broadcast from memory; b rows are loaded once per depth step. Every
// second step also requests one cache line of `ahead` (the caller's next block): the next
// block streams in from memory while this one computes, at most one request per 16 FMAs so
// that the line-fill buffers never fill and stall the loads.
template <std::size_t kRows, std::size_t kVecs, class D>
HWY_INLINE void Tile(D d, std::int64_t depth, const float* HWY_RESTRICT a, std::int64_t a_row,
                     std::int64_t a_depth, const float* HWY_RESTRICT b, std::int64_t ldb,
                     float* HWY_RESTRICT c, std::int64_t ldc, bool accumulate, Lines ahead) {
  using V = hn::Vec<D>;
  const std::size_t n = hn::Lanes(d);
  V acc[kRows][kVecs];
  for (std::size_t i = 0; i < kRows; ++i) {
    for (std::size_t v = 0; v < kVecs; ++v) {
      acc[i][v] = accumulate ? hn::LoadU(d, c + i * ldc + v * n) : hn::Zero(d);
    }
  }
  const auto step = [&](std::int64_t p) HWY_ATTR {
    const float* brow = b + p * ldb;
    V bv[kVecs];
    for (std::size_t v = 0; v < kVecs; ++v) bv[v] = hn::LoadU(d, brow + v * n);
    const float* ap = a + p * a_depth;
    for (std::size_t i = 0; i < kRows; ++i) {
      const V ai = hn::Set(d, ap[static_cast<std::int64_t>(i) * a_row]);
      for (std::size_t v = 0; v < kVecs; ++v) acc[i][v] = hn::MulAdd(ai, bv[v], acc[i][v]);
    }
  };
  std::int64_t p = 0;
  for (std::int64_t l = 0; l < ahead.count && p + 2 <= depth; ++l, p += 2) {
    PrefetchToL2(ahead.lines[l]);
    step(p);
    step(p + 1);
  }
  for (; p < depth; ++p) step(p);
  for (std::int64_t l = depth / 2; l < ahead.count; ++l) PrefetchToL2(ahead.lines[l]);
  for (std::size_t i = 0; i < kRows; ++i) {
    for (std::size_t v = 0; v < kVecs; ++v) hn::StoreU(acc[i][v], d, c + i * ldc + v * n);
  }
}

// The share of `ahead` for the tile covering work units [begin, end) of `units`.
HWY_INLINE Lines Share(Lines ahead, std::int64_t begin, std::int64_t end, std::int64_t units) {
  const std::int64_t first = ahead.count * begin / units, last = ahead.count * end / units;
  return Lines{ahead.lines + first, last - first};
}

// Every row of one column strip (kVecs vectors of D wide): tiles of kRows rows, then the rows
// left in tiles of 4, 2 and 1. The strip's rows are work units [unit0, unit0 + rows) of
// `units` for the share of `ahead`.
template <std::size_t kRows, std::size_t kVecs, class D>
HWY_INLINE void Strip(D d, std::int64_t rows, std::int64_t depth, const float* HWY_RESTRICT a,
                      std::int64_t a_row, std::int64_t a_depth, const float* HWY_RESTRICT b,
                      std::int64_t ldb, float* HWY_RESTRICT c, std::int64_t ldc, bool accumulate,
                      Lines ahead, std::int64_t unit0, std::int64_t units) {
  std::int64_t i = 0;
  const auto tiles = [&](auto rows_per_tile) HWY_ATTR {
    constexpr std::size_t kR = decltype(rows_per_tile)::value;
    constexpr auto r = static_cast<std::int64_t>(kR);
    for (; i + r <= rows; i += r) {
      Tile<kR, kVecs>(d, depth, a + i * a_row, a_row, a_depth, b, ldb, c + i * ldc, ldc, accumulate,
                      Share(ahead, unit0 + i, unit0 + i + r, units));
    }
  };
  tiles(std::integral_constant<std::size_t, kRows>());
  if constexpr (kRows > 4) tiles(std::integral_constant<std::size_t, 4>());
  if constexpr (kRows > 2) tiles(std::integral_constant<std::size_t, 2>());
  tiles(std::integral_constant<std::size_t, 1>());
}

void MultiplyBroadcast(std::int64_t rows, std::int64_t cols, std::int64_t depth,
                       const float* HWY_RESTRICT a, std::int64_t a_row, std::int64_t a_depth,
                       const float* HWY_RESTRICT b, std::int64_t ldb, float* HWY_RESTRICT c,
                       std::int64_t ldc, bool accumulate, Lines ahead) {
  const FullTag d;
  const auto n = static_cast<std::int64_t>(hn::Lanes(d));
  const std::int64_t strips = cols / (2 * n) + (cols % (2 * n)) / n + cols % n;
  const std::int64_t units = std::max<std::int64_t>(1, strips * rows);
  std::int64_t strip = 0, j = 0;
  for (; j + 2 * n <= cols; j += 2 * n) {
    Strip<kTileRows, 2>(d, rows, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc, accumulate,
                        ahead, rows * strip++, units);
  }
  for (; j + n <= cols; j += n) {
    Strip<kTileRows, 1>(d, rows, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc, accumulate,
                        ahead, rows * strip++, units);
  }
  // The last cols % lanes columns one lane at a time: no masked access can reach past a row.
  for (; j < cols; ++j) {
    Strip<kTileRows, 1>(OneTag(), rows, depth, a, a_row, a_depth, b + j, ldb, c + j, ldc,
                        accumulate, ahead, rows * strip++, units);
  }
  // Whatever no tile requested (no rows or no columns).
  if (strip * rows == 0) {
    for (std::int64_t l = 0; l < ahead.count; ++l) PrefetchToL2(ahead.lines[l]);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace seqattn::detail::linear_tiles
HWY_AFTER_NAMESPACE();

#endif  // include guard
