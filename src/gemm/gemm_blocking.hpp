// Register and cache blocking of the packed GEMM, one row per Highway target, and the
// target-independent description of one call. Included by the per-target kernels and the
// dispatcher; nothing here depends on the SIMD target being compiled.
#pragma once

#include <cstddef>
#include <cstdint>

#include <hwy/detect_targets.h>

namespace seqattn::detail {

// mr × (nv vectors) is the register tile; nr = nv · lanes. mc × kc of packed A is sized for L2,
// kc × nr of a packed B micro-panel for L1 (reused across every mr row-panel of the block),
// kc × nc of packed B for L3. mc is a multiple of mr; nc is rounded up to a multiple of nr.
struct GemmBlocking {
  std::int64_t target;
  std::size_t mr, nv, mc, kc, nc;
};

// Why these tiles:
// - AVX-512 has 32 zmm registers: 14 × 2 vectors = 28 accumulators + 2 B vectors + 1 for the
//   broadcast A value (31 of 32, no spills). 28 independent FMA chains cover Zen 5's 2 FMA
//   pipes × 4-cycle latency (8 chains needed) with room to hide loads, and each k-step issues
//   28 FMAs against 2 vector loads + 14 broadcasts (well under the load ports' rate).
//   6 × 4 vectors (24 accumulators) would need a 64-wide B micro-panel, twice the L1 footprint.
// - AVX2/SSE have 16 registers: 6 × 2 vectors = 12 accumulators + 2 B + 1 broadcast.
// - The 1-lane SCALAR fallback: 4 × 4 = 16 scalar accumulators.
// kc = 192 on AVX-512: the 192 × 32 B micro-panel (24 KB, reused by every A micro-panel of the
// block) plus a streaming 14 × 192 A micro-panel (10.5 KB) stay inside Zen 5's 48 KB L1D
// (kc = 256 fills it: 32 + 14 KB; measured slower on the attention shape, as was kc = 128);
// mc = 336 keeps packed A (252 KB) in the 1 MB L2; nc = 4096 bounds packed B (3 MB) for L3.
// clang-format off
inline constexpr GemmBlocking kGemmBlockingTable[] = {
    //  target      mr nv   mc   kc    nc
    {HWY_AVX3_DL,   14, 2, 336, 192, 4096},
    {HWY_AVX3,      14, 2, 336, 192, 4096},
    {HWY_AVX2,       6, 2, 144, 256, 4096},
    {HWY_SSE4,       6, 2, 144, 256, 2048},
    {HWY_SSSE3,      6, 2, 144, 256, 2048},
    {HWY_SCALAR,     4, 4, 128, 256, 1024},
};
// clang-format on
// Used for any target the table does not list (e.g. EMU128 on other compilers).
inline constexpr GemmBlocking kGemmBlockingDefault = {0, 4, 2, 128, 256, 1024};

constexpr GemmBlocking gemm_blocking_for(std::int64_t target) {
  for (const GemmBlocking& row : kGemmBlockingTable) {
    if (row.target == target) return row;
  }
  return kGemmBlockingDefault;
}

// One validated call: op(A) is [m, k], op(B) is [k, n], C is [m, n], all row-major.
struct GemmArgs {
  bool trans_a = false, trans_b = false;
  std::size_t m = 0, n = 0, k = 0;
  float alpha = 1.0f, beta = 0.0f;
  const float* a = nullptr;
  std::size_t lda = 0;
  const float* b = nullptr;
  std::size_t ldb = 0;
  float* c = nullptr;
  std::size_t ldc = 0;
};

// A sub-rectangle of C computed by one thread: rows [row0, row0 + rows), columns likewise.
struct GemmRect {
  std::size_t row0 = 0, rows = 0, col0 = 0, cols = 0;
};

}  // namespace seqattn::detail
