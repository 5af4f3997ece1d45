// Per-target pieces of the packed GEMM (BLIS structure): packing of A and B into
// micro-panels, the register-blocked micro-kernel, the macro-kernel over one cache block with
// its edge tiles kept out of the hot loop, and the single-threaded driver over one rectangle
// of C. The kernels know nothing about attention; blocking comes from gemm_blocking.hpp.

// Per-target include guard (Highway's foreach_target re-includes this file once per target).
#if defined(SEQATTN_GEMM_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_GEMM_KERNELS_INL_H_
#undef SEQATTN_GEMM_KERNELS_INL_H_
#else
#define SEQATTN_GEMM_KERNELS_INL_H_
#endif

#include <hwy/cache_control.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstring>

#include "src/gemm/gemm.hpp"
#include "src/gemm/gemm_blocking.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using GemmTag = hn::ScalableTag<float>;
using GemmVec = hn::Vec<GemmTag>;

inline constexpr GemmBlocking kBlocking = gemm_blocking_for(HWY_TARGET);
inline constexpr std::size_t kLanes = HWY_LANES(float);
inline constexpr std::size_t kMR = kBlocking.mr;
inline constexpr std::size_t kNV = kBlocking.nv;
inline constexpr std::size_t kNR = kNV * kLanes;
inline constexpr std::size_t kMC = kBlocking.mc;
inline constexpr std::size_t kKC = kBlocking.kc;
inline constexpr std::size_t kNC = (kBlocking.nc + kNR - 1) / kNR * kNR;
static_assert(kMC % kMR == 0, "mc must be a multiple of mr");

// c[i, v-th vector] = alpha·acc (+ beta·c). beta = 0 never reads c; beta = 1 skips the multiply,
// which gives the same value as the general formula.
HWY_INLINE void StoreTile(const GemmVec (&acc)[kMR][kNV], float* HWY_RESTRICT c, std::size_t ldc,
                          float alpha, float beta) {
  const GemmTag d;
  const GemmVec va = hn::Set(d, alpha);
  if (beta == 0.0f) {
    HWY_UNROLL(16)
    for (std::size_t i = 0; i < kMR; ++i) {
      for (std::size_t v = 0; v < kNV; ++v)
        hn::StoreU(hn::Mul(va, acc[i][v]), d, c + i * ldc + v * kLanes);
    }
  } else if (beta == 1.0f) {
    HWY_UNROLL(16)
    for (std::size_t i = 0; i < kMR; ++i) {
      for (std::size_t v = 0; v < kNV; ++v) {
        float* p = c + i * ldc + v * kLanes;
        hn::StoreU(hn::MulAdd(va, acc[i][v], hn::LoadU(d, p)), d, p);
      }
    }
  } else {
    const GemmVec vb = hn::Set(d, beta);
    HWY_UNROLL(16)
    for (std::size_t i = 0; i < kMR; ++i) {
      for (std::size_t v = 0; v < kNV; ++v) {
        float* p = c + i * ldc + v * kLanes;
        hn::StoreU(hn::MulAdd(va, acc[i][v], hn::Mul(vb, hn::LoadU(d, p))), d, p);
      }
    }
  }
}

// The hot loop: an mr × nr tile of op(A)·op(B) over kc steps from packed micro-panels
// (A: kc groups of mr values, B: kc rows of nr values, both contiguous and aligned).
HWY_NOINLINE void MicroKernel(std::size_t kc, const float* HWY_RESTRICT ap,
                              const float* HWY_RESTRICT bp, float* HWY_RESTRICT c, std::size_t ldc,
                              float alpha, float beta) {
  const GemmTag d;
  // C is touched only after kc steps; start its (likely L3-resident) lines moving now.
  for (std::size_t i = 0; i < kMR; ++i) {
    hwy::Prefetch(c + i * ldc);
    hwy::Prefetch(c + i * ldc + kNR - 1);
  }
  GemmVec acc[kMR][kNV];
  HWY_UNROLL(16)
  for (std::size_t i = 0; i < kMR; ++i) {
    for (std::size_t v = 0; v < kNV; ++v) acc[i][v] = hn::Zero(d);
  }
  for (std::size_t p = 0; p < kc; ++p) {
    GemmVec b[kNV];
    HWY_UNROLL(16)
    for (std::size_t v = 0; v < kNV; ++v) b[v] = hn::Load(d, bp + v * kLanes);
    HWY_UNROLL(16)
    for (std::size_t i = 0; i < kMR; ++i) {
      const GemmVec a = hn::Set(d, ap[i]);
      for (std::size_t v = 0; v < kNV; ++v) acc[i][v] = hn::MulAdd(a, b[v], acc[i][v]);
    }
    ap += kMR;
    bp += kNR;
  }
  StoreTile(acc, c, ldc, alpha, beta);
}

// A partial tile (rows < mr or cols < nr) runs the same micro-kernel on a full-size scratch
// tile, so every element sees exactly the arithmetic of an interior tile (determinism across
// thread counts does not depend on where the tile edges fall).
void EdgeTile(std::size_t kc, const float* ap, const float* bp, float* c, std::size_t ldc,
              std::size_t rows, std::size_t cols, float alpha, float beta) {
  HWY_ALIGN float tile[kMR * kNR];
  if (beta != 0.0f) {
    std::fill(tile, tile + kMR * kNR, 0.0f);
    for (std::size_t i = 0; i < rows; ++i)
      std::memcpy(tile + i * kNR, c + i * ldc, cols * sizeof(float));
  }
  MicroKernel(kc, ap, bp, tile, kNR, alpha, beta);
  for (std::size_t i = 0; i < rows; ++i)
    std::memcpy(c + i * ldc, tile + i * kNR, cols * sizeof(float));
}

// Packs op(A)[i0 : i0 + mc, p0 : p0 + kc] into mr-row micro-panels (k-major), zero-padding the
// last panel's missing rows. Untransposed A is read in chunks of kPackChunk columns so that the
// mr source rows and the written panel stay in L1 while the chunk is interleaved.
inline constexpr std::size_t kPackChunk = 64;

void PackA(const GemmArgs& g, std::size_t i0, std::size_t mc, std::size_t p0, std::size_t kc,
           float* HWY_RESTRICT dst) {
  for (std::size_t ir = 0; ir < mc; ir += kMR) {
    const std::size_t rows = std::min(kMR, mc - ir);
    float* panel = dst + ir * kc;
    if (g.trans_a) {
      for (std::size_t p = 0; p < kc; ++p) {
        const float* src = g.a + (p0 + p) * g.lda + i0 + ir;
        float* out = panel + p * kMR;
        for (std::size_t r = 0; r < rows; ++r) out[r] = src[r];
        for (std::size_t r = rows; r < kMR; ++r) out[r] = 0.0f;
      }
      continue;
    }
    if (rows < kMR) std::fill(panel, panel + kc * kMR, 0.0f);
    for (std::size_t pp = 0; pp < kc; pp += kPackChunk) {
      const std::size_t chunk = std::min(kPackChunk, kc - pp);
      for (std::size_t r = 0; r < rows; ++r) {
        const float* HWY_RESTRICT src = g.a + (i0 + ir + r) * g.lda + p0 + pp;
        float* HWY_RESTRICT out = panel + pp * kMR + r;
        for (std::size_t p = 0; p < chunk; ++p) out[p * kMR] = src[p];
      }
    }
  }
}

// Packs op(B)[p0 : p0 + kc, j0 : j0 + nc] into nr-column micro-panels (k-major), zero-padding
// the last panel's missing columns. Untransposed B is read row by row (sequential reads; a
// panel-by-panel walk would stride through kc rows per panel and thrash the TLB).
void PackB(const GemmArgs& g, std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc,
           float* HWY_RESTRICT dst) {
  const std::size_t n_full = nc / kNR * kNR;
  if (!g.trans_b) {
    const GemmTag d;
    for (std::size_t p = 0; p < kc; ++p) {
      const float* HWY_RESTRICT src = g.b + (p0 + p) * g.ldb + j0;
      for (std::size_t jr = 0; jr < n_full; jr += kNR) {
        float* HWY_RESTRICT out = dst + jr * kc + p * kNR;
        for (std::size_t v = 0; v < kNV; ++v)
          hn::Store(hn::LoadU(d, src + jr + v * kLanes), d, out + v * kLanes);
      }
      if (n_full < nc) {
        float* out = dst + n_full * kc + p * kNR;
        std::memcpy(out, src + n_full, (nc - n_full) * sizeof(float));
        std::fill(out + (nc - n_full), out + kNR, 0.0f);
      }
    }
    return;
  }
  for (std::size_t jr = 0; jr < nc; jr += kNR) {
    const std::size_t cols = std::min(kNR, nc - jr);
    float* panel = dst + jr * kc;
    for (std::size_t j = 0; j < cols; ++j) {
      const float* src = g.b + (j0 + jr + j) * g.ldb + p0;
      for (std::size_t p = 0; p < kc; ++p) panel[p * kNR + j] = src[p];
    }
    for (std::size_t j = cols; j < kNR; ++j) {
      for (std::size_t p = 0; p < kc; ++p) panel[p * kNR + j] = 0.0f;
    }
  }
}

// One mc × nc block of C from packed A and B: full tiles first, then the bottom edge row and
// the right edge column of tiles.
void MacroKernel(const float* pa, const float* pb, std::size_t mc, std::size_t nc, std::size_t kc,
                 float* c, std::size_t ldc, float alpha, float beta) {
  const std::size_t m_full = mc / kMR * kMR;
  const std::size_t n_full = nc / kNR * kNR;
  for (std::size_t jr = 0; jr < n_full; jr += kNR) {
    for (std::size_t ir = 0; ir < m_full; ir += kMR) {
      MicroKernel(kc, pa + ir * kc, pb + jr * kc, c + ir * ldc + jr, ldc, alpha, beta);
    }
  }
  if (m_full < mc) {
    for (std::size_t jr = 0; jr < nc; jr += kNR) {
      EdgeTile(kc, pa + m_full * kc, pb + jr * kc, c + m_full * ldc + jr, ldc, mc - m_full,
               std::min(kNR, nc - jr), alpha, beta);
    }
  }
  if (n_full < nc) {
    for (std::size_t ir = 0; ir < m_full; ir += kMR) {
      EdgeTile(kc, pa + ir * kc, pb + n_full * kc, c + ir * ldc + n_full, ldc, kMR, nc - n_full,
               alpha, beta);
    }
  }
}

// The packing scratch of one rectangle of an m × n × k product: a block of A (mc rows in whole
// mr panels, kc deep) and then one of B (kc deep, nc columns in whole nr panels), each cut to
// the extents (a rectangle's, or the largest of a grid's) and rounded up to whole 64-byte lines
// (packed B is read with aligned loads).
inline std::size_t RoundToLine(std::size_t floats) { return (floats + 15) / 16 * 16; }
std::size_t PackAFloats(std::size_t m, std::size_t k) {
  return RoundToLine(std::min(kMC, (m + kMR - 1) / kMR * kMR) * std::min(kKC, k));
}
std::size_t PackFloats(std::size_t m, std::size_t n, std::size_t k) {
  return PackAFloats(m, k) +
         RoundToLine(std::min(kKC, k) * std::min(kNC, (n + kNR - 1) / kNR * kNR));
}

// C[rect] = alpha·op(A)·op(B) + beta·C over one rectangle, single-threaded. k >= 1. The k-blocks
// are always visited from 0 upwards, so each element's sum order is independent of the rect.
// pack: at least PackFloats(r.rows, r.cols, g.k) floats, 64-byte aligned, this rectangle's alone.
void GemmRectangle(const GemmArgs& g, const GemmRect& r, float* pack) {
  float* pa = pack;
  float* pb = pack + PackAFloats(r.rows, g.k);
  for (std::size_t jc = 0; jc < r.cols; jc += kNC) {
    const std::size_t nc = std::min(kNC, r.cols - jc);
    for (std::size_t pc = 0; pc < g.k; pc += kKC) {
      const std::size_t kc = std::min(kKC, g.k - pc);
      const float beta = pc == 0 ? g.beta : 1.0f;
      PackB(g, pc, kc, r.col0 + jc, nc, pb);
      for (std::size_t ic = 0; ic < r.rows; ic += kMC) {
        const std::size_t mc = std::min(kMC, r.rows - ic);
        PackA(g, r.row0 + ic, mc, pc, kc, pa);
        MacroKernel(pa, pb, mc, nc, kc, g.c + (r.row0 + ic) * g.ldc + r.col0 + jc, g.ldc, g.alpha,
                    beta);
      }
    }
  }
}

GemmBlockingInfo TargetBlocking() {
  return {static_cast<std::int64_t>(kMR), static_cast<std::int64_t>(kNR),
          static_cast<std::int64_t>(kMC), static_cast<std::int64_t>(kKC),
          static_cast<std::int64_t>(kNC), hwy::TargetName(HWY_TARGET)};
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
