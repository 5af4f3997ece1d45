// The GEMM dispatcher: argument validation, the split of C into one rectangle per thread, and
// runtime dispatch to the best compiled Highway target's kernels (gemm_kernels-inl.h).
#include "src/gemm/gemm.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/gemm/gemm.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "src/gemm/gemm_kernels-inl.h"

#if HWY_ONCE
#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <new>
#include <span>
#include <string>

#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::detail {

HWY_EXPORT(GemmRectangle);
HWY_EXPORT(TargetBlocking);
HWY_EXPORT(PackFloats);

namespace {

// A stored operand, rows `ld` apart holding `cols` each; null only when it is empty.
// Its rows x ld elements must be addressable (checked_product).
// size_suffix completes the size's name (" (rows x lda)"): names are joined only to throw.
void check_operand(const char* name, const char* size_suffix, const void* p, bool empty,
                   std::int64_t rows, std::int64_t cols, std::int64_t ld) {
  const std::int64_t min_ld = std::max<std::int64_t>(cols, 1);
  if (ld < min_ld) {
    fail(std::string("ld") + name, ">= " + str(min_ld) + " (the stored row length)", str(ld));
  }
  if (!empty && p == nullptr)
    fail(name, "a non-null pointer (the operand is not empty)", "nullptr");
  checked_product({rows, ld}, name, size_suffix);
}

// Below this many FLOPs per thread, forking costs more than it saves.
constexpr double kMinFlopsPerThread = 4e6;

// Packing one element of A or B costs about as much as this many multiply-adds of the kernel
// (a scattered load/store pair against 32 FMAs per cycle at full rate).
constexpr double kPackCostInMacs = 24.0;

// C cut into a tm × tn grid of rectangles whose edges fall on mr/nr tile boundaries; rectangle t
// is row band t / tn, column band t % tn. Computed on the fly, not listed: a call allocates
// nothing (a vector of rectangles was one allocation per call in every steady loop over
// Linformer or linear attention).
struct GemmGrid {
  std::size_t m = 0, n = 0, mr = 0, nr = 0, tm = 1, tn = 1;
  std::size_t count() const { return tm * tn; }
  // Rectangle t. Never empty: split_grid keeps tm <= tiles_m and tn <= tiles_n, so every band
  // holds at least one tile.
  GemmRect rect(std::size_t t) const {
    const std::size_t tiles_m = (m + mr - 1) / mr, tiles_n = (n + nr - 1) / nr;
    const std::size_t a = t / tn, b = t % tn;
    const std::size_t r0 = std::min(m, tiles_m * a / tm * mr);
    const std::size_t r1 = std::min(m, tiles_m * (a + 1) / tm * mr);
    const std::size_t c0 = std::min(n, tiles_n * b / tn * nr);
    const std::size_t c1 = std::min(n, tiles_n * (b + 1) / tn * nr);
    return {r0, r1 - r0, c0, c1 - c0};
  }
};

// Each thread packs its own rows of A and columns of B, so the cost of a rectangle is
// rows·cols (multiply-adds per k) + kPackCostInMacs·(rows + cols) (packing per k); the grid
// with the cheapest largest rectangle wins (ties: more column splits).
GemmGrid split_grid(std::size_t m, std::size_t n, std::size_t k, std::size_t mr, std::size_t nr,
                    int threads) {
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  const double useful = std::max(1.0, flops / kMinFlopsPerThread);
  const int nt = std::max(1, static_cast<int>(std::min(static_cast<double>(threads), useful)));
  const std::size_t tiles_m = (m + mr - 1) / mr, tiles_n = (n + nr - 1) / nr;
  GemmGrid grid{m, n, mr, nr, 1, 1};
  double best_cost = -1.0;
  for (int used = nt; used >= 1 && best_cost < 0.0; --used) {
    for (std::size_t tm = 1; tm <= static_cast<std::size_t>(used); ++tm) {
      if (used % tm != 0) continue;
      const std::size_t tn = static_cast<std::size_t>(used) / tm;
      if (tm > tiles_m || tn > tiles_n) continue;
      const double rows = static_cast<double>((tiles_m + tm - 1) / tm * mr);
      const double cols = static_cast<double>((tiles_n + tn - 1) / tn * nr);
      const double cost = rows * cols + kPackCostInMacs * (rows + cols);
      if (best_cost < 0.0 || cost < best_cost || (cost == best_cost && tn > grid.tn)) {
        best_cost = cost;
        grid.tm = tm;
        grid.tn = tn;
      }
    }
  }
  return grid;
}

// k = 0 or alpha = 0: C = beta·C (BLAS semantics: A and B are not read).
void scale_c(const GemmArgs& g) {
  for (std::size_t i = 0; i < g.m; ++i) {
    float* row = g.c + i * g.ldc;
    for (std::size_t j = 0; j < g.n; ++j) row[j] = g.beta == 0.0f ? 0.0f : g.beta * row[j];
  }
}

void check_sizes(std::int64_t m, std::int64_t n, std::int64_t k) {
  if (m < 0) fail("m", ">= 0", str(m));
  if (n < 0) fail("n", ">= 0", str(n));
  if (k < 0) fail("k", ">= 0", str(k));
}

// The rectangles sgemm cuts C into on `threads` threads, and the packing floats each takes:
// PackFloats of the largest band's rows and columns, so every rectangle's blocks fit (a band
// holds at most ceil(tiles / bands) tiles). Resolving the blocking also initialises Highway's
// target choice before any thread calls through the dispatch table.
struct PackedGrid {
  GemmGrid grid;
  std::size_t per_rect = 0;  // 0 for an empty product
  std::size_t floats() const { return grid.count() * per_rect; }
};

PackedGrid packed_grid(std::size_t m, std::size_t n, std::size_t k, int threads) {
  if (m == 0 || n == 0 || k == 0) return {};
  const GemmBlockingInfo blocking = HWY_DYNAMIC_DISPATCH(TargetBlocking)();
  const auto mr = static_cast<std::size_t>(blocking.mr), nr = static_cast<std::size_t>(blocking.nr);
  PackedGrid pg{split_grid(m, n, k, mr, nr, threads)};
  const std::size_t tiles_m = (m + mr - 1) / mr, tiles_n = (n + nr - 1) / nr;
  const std::size_t rows = std::min(m, (tiles_m + pg.grid.tm - 1) / pg.grid.tm * mr);
  const std::size_t cols = std::min(n, (tiles_n + pg.grid.tn - 1) / pg.grid.tn * nr);
  pg.per_rect = HWY_DYNAMIC_DISPATCH(PackFloats)(rows, cols, k);
  return pg;
}

// A caller's pack, checked before anything is written: `need` floats at least, 64-byte aligned.
void check_pack(std::span<float> pack, std::size_t need) {
  if (pack.empty()) return;
  if (pack.size() < need) {
    fail("pack", ">= " + std::to_string(need) + " floats (sgemm_pack_floats(m, n, k, threads))",
         std::to_string(pack.size()) + " floats");
  }
  const auto misalign = reinterpret_cast<std::uintptr_t>(pack.data()) % 64;
  if (misalign != 0) fail("pack", "64-byte aligned", "64·n + " + std::to_string(misalign));
}

}  // namespace

std::size_t sgemm_pack_floats(std::int64_t m, std::int64_t n, std::int64_t k, int threads) {
  check_sizes(m, n, k);
  const int wanted = resolve_threads(threads, "threads");
  return packed_grid(static_cast<std::size_t>(m), static_cast<std::size_t>(n),
                     static_cast<std::size_t>(k), wanted)
      .floats();
}

void sgemm(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
           float beta, float* c, std::int64_t ldc, int threads, std::span<float> pack) {
  check_sizes(m, n, k);
  const int wanted = resolve_threads(threads, "threads");
  const bool ta = trans_a == Transpose::kYes, tb = trans_b == Transpose::kYes;
  check_operand("a", " (rows x lda)", a, m == 0 || k == 0, ta ? k : m, ta ? m : k, lda);
  check_operand("b", " (rows x ldb)", b, k == 0 || n == 0, tb ? n : k, tb ? k : n, ldb);
  check_operand("c", " (rows x ldc)", c, m == 0 || n == 0, m, n, ldc);
  const PackedGrid pg = packed_grid(static_cast<std::size_t>(m), static_cast<std::size_t>(n),
                                    static_cast<std::size_t>(k), wanted);
  check_pack(pack, pg.floats());
  if (m == 0 || n == 0) return;

  GemmArgs g;
  g.trans_a = ta;
  g.trans_b = tb;
  g.m = static_cast<std::size_t>(m);
  g.n = static_cast<std::size_t>(n);
  g.k = static_cast<std::size_t>(k);
  g.alpha = alpha;
  g.beta = beta;
  g.a = a;
  g.lda = static_cast<std::size_t>(lda);
  g.b = b;
  g.ldb = static_cast<std::size_t>(ldb);
  g.c = c;
  g.ldc = static_cast<std::size_t>(ldc);
  if (k == 0 || alpha == 0.0f) {
    scale_c(g);
    return;
  }
  const GemmGrid& grid = pg.grid;
  const int count = static_cast<int>(grid.count());
  hwy::AlignedFreeUniquePtr<float[]> own;  // without a caller's pack
  float* base = pack.data();
  if (pack.empty()) {
    own = hwy::AllocateAligned<float>(pg.floats());
    if (!own) throw std::bad_alloc();
    base = own.get();
  }
  if (count == 1) {
    HWY_DYNAMIC_DISPATCH(GemmRectangle)(g, grid.rect(0), base);
    return;
  }
#pragma omp parallel for num_threads(count) schedule(static, 1)
  for (int t = 0; t < count; ++t) {
    HWY_DYNAMIC_DISPATCH(GemmRectangle)
    (g, grid.rect(static_cast<std::size_t>(t)), base + static_cast<std::size_t>(t) * pg.per_rect);
  }
}

GemmBlockingInfo gemm_blocking() { return HWY_DYNAMIC_DISPATCH(TargetBlocking)(); }

}  // namespace seqattn::detail
#endif  // HWY_ONCE
