// The bf16 tile GEMM (gemm_bf16_tiles.hpp): packing, the order of the 32 × 32 blocks, and the
// edge blocks, which are computed into a local block and clipped so the tile loop never
// branches on a partial tile.
#include "src/gemm/gemm_bf16_tiles.hpp"

#include <omp.h>

#include <algorithm>
#include <span>
#include <string>

#include "src/kernel/amx/amx_micro_kernels.hpp"
#include "src/kernel/amx/vnni_packing.hpp"
#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::detail {
namespace {

// Rows and columns of one ScoresBlock.
constexpr std::size_t kBlock = amx::kBlockRows;
constexpr std::int64_t kBlockI = static_cast<std::int64_t>(kBlock);
static_assert(amx::kBlockKeys == kBlock, "ScoresBlock is square");

// Columns of B one thread sweeps with every row block of A before it moves on: as many 32-column
// blocks as fit in 1 MiB of packed B, half the 2 MiB L2 of a Sapphire Rapids core, so a panel is
// read from L2 by every row block after the first. Not measured on an AMX CPU (issue 31).
constexpr std::size_t kPanelBytes = std::size_t{1} << 20;

std::size_t panel_blocks(std::size_t depth_pad) {
  const std::size_t block_bytes = std::max<std::size_t>(depth_pad, 1) * kBlock * sizeof(bfloat16);
  return std::max<std::size_t>(1, kPanelBytes / block_bytes);
}

}  // namespace

TilePackedB::TilePackedB(const float* b, std::int64_t ldb, std::int64_t k, std::int64_t n)
    : k_(k), n_(n) {
  if (k < 0) fail("k", ">= 0", str(k));
  if (n < 0) fail("n", ">= 0", str(n));
  if (ldb < std::max<std::int64_t>(n, 1)) fail("ldb", ">= n = " + str(n), str(ldb));
  if (b == nullptr && k > 0 && n > 0) fail("b", "a non-null pointer", "nullptr");
  depth_pad_ = amx::padded_depth(static_cast<std::size_t>(k));
  n_pad_ = amx::round_up(static_cast<std::size_t>(n), kBlock);
  data_.assign(depth_pad_ * n_pad_, bfloat16());
  if (k > 0 && n > 0) {
    amx::pack_b_vnni_rows(b, static_cast<std::size_t>(ldb), static_cast<std::size_t>(k),
                          static_cast<std::size_t>(n), depth_pad_, n_pad_, data_);
  }
}

void TilePackedA::pack(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k,
                       int threads) {
  if (m < 0) fail("m", ">= 0", str(m));
  if (k < 0) fail("k", ">= 0", str(k));
  if (lda < std::max<std::int64_t>(k, 1)) fail("lda", ">= k = " + str(k), str(lda));
  if (a == nullptr && m > 0 && k > 0) fail("a", "a non-null pointer", "nullptr");
  const int nt = resolve_threads(threads, "threads");
  const std::size_t depth_pad = amx::padded_depth(static_cast<std::size_t>(k));
  const std::size_t rows_pad = amx::round_up(static_cast<std::size_t>(m), kBlock);
  if (data_.size() < rows_pad * depth_pad) data_.resize(rows_pad * depth_pad);
  m_ = m;
  k_ = k;
  depth_pad_ = depth_pad;
  const std::int64_t blocks = static_cast<std::int64_t>(rows_pad) / kBlockI;
#pragma omp parallel for num_threads(nt) schedule(static) if (blocks > 1)
  for (std::int64_t blk = 0; blk < blocks; ++blk) {
    const std::int64_t r0 = blk * kBlockI;
    const std::int64_t rows = std::min(m - r0, kBlockI);
    bfloat16* dst = data_.data() + static_cast<std::size_t>(r0) * depth_pad;
    if (k > 0) {
      amx::pack_a_rows(a + r0 * lda, static_cast<std::size_t>(lda), static_cast<std::size_t>(rows),
                       static_cast<std::size_t>(k), 1.0f,
                       std::span<bfloat16>(dst, static_cast<std::size_t>(rows) * depth_pad));
    }
    std::fill(dst + static_cast<std::size_t>(rows) * depth_pad, dst + kBlock * depth_pad,
              bfloat16());
  }
}

void tile_gemm(const amx::TileBackend& backend, const TilePackedA& a, const TilePackedB& b,
               float* c, std::int64_t ldc, int threads) {
  if (a.k() != b.k()) fail("b.k", str(a.k()) + " (A's columns)", str(b.k()));
  const std::int64_t m = a.m(), n = b.n();
  if (ldc < std::max<std::int64_t>(n, 1)) fail("ldc", ">= n = " + str(n), str(ldc));
  if (m == 0 || n == 0) return;
  if (c == nullptr) fail("c", "a non-null pointer", "nullptr");
  const int nt = resolve_threads(threads, "threads");
  const std::size_t depth_pad = b.depth_pad(), n_pad = b.n_pad();
  const std::int64_t row_blocks = (m + kBlockI - 1) / kBlockI;
  const std::int64_t col_blocks = static_cast<std::int64_t>(n_pad) / kBlockI;
  const std::int64_t per_panel = static_cast<std::int64_t>(panel_blocks(depth_pad));
  const std::int64_t panels = (col_blocks + per_panel - 1) / per_panel;
  // Work items are (panel, row block) pairs in panel-major order, dealt out statically: a
  // thread's items are consecutive, so it keeps one panel of B in its L2 across row blocks.
  const std::int64_t items = panels * row_blocks;
  const int used = static_cast<int>(std::min<std::int64_t>(nt, items));
#pragma omp parallel num_threads(used) if (used > 1)
  {
    backend.configure();
    alignas(64) float edge[kBlock * kBlock];
#pragma omp for schedule(static)
    for (std::int64_t item = 0; item < items; ++item) {
      const std::int64_t panel = item / row_blocks, r0 = (item % row_blocks) * kBlockI;
      const bfloat16* a_rows = a.data() + static_cast<std::size_t>(r0) * depth_pad;
      const std::int64_t last = std::min(col_blocks, (panel + 1) * per_panel);
      for (std::int64_t cb = panel * per_panel; cb < last; ++cb) {
        const std::int64_t j0 = cb * kBlockI;
        const bfloat16* b_cols = b.data() + amx::vnni_index(0, static_cast<std::size_t>(j0), n_pad);
        const bool full = r0 + kBlockI <= m && j0 + kBlockI <= n;
        float* dst = full ? c + r0 * ldc + j0 : edge;
        backend.scores(a_rows, depth_pad, b_cols, n_pad, depth_pad, dst,
                       full ? static_cast<std::size_t>(ldc) : kBlock);
        if (full) continue;
        const std::int64_t rows = std::min(m - r0, kBlockI), cols = std::min(n - j0, kBlockI);
        for (std::int64_t r = 0; r < rows; ++r) {
          std::copy(edge + r * kBlockI, edge + r * kBlockI + cols, c + (r0 + r) * ldc + j0);
        }
      }
    }
    backend.release();
  }
}

}  // namespace seqattn::detail
