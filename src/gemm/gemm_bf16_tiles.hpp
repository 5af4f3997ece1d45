// The bf16 GEMM on AMX tiles (or their scalar emulation) behind MultiHeadAttention's projections
// on a tile path: C = bf16(A) · bf16(B) with fp32 accumulation. The micro-kernel is the flash
// kernel's 32 × 32 ScoresBlock (src/kernel/amx/amx_micro_kernels.hpp), whose B operand is the
// VNNI layout of pack_b_vnni_rows: a projection is a 32-row block of activations against
// 32-column blocks of a weight packed once. Internal, like sgemm (gemm.hpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "seqattn/half.hpp"
#include "src/kernel/amx/tile_backend.hpp"

namespace seqattn::detail {

// B [k, n] (row-major, rows ldb floats apart) rounded to bf16 (nearest even) and packed into
// the VNNI layout of TDPBF16PS: [padded_depth(k) / 2][n_pad][2], n_pad = n rounded up to 32 (a
// block's two B tiles), zeros in the padding. A layer packs each weight once and keeps it.
class TilePackedB {
 public:
  TilePackedB() = default;
  TilePackedB(const float* b, std::int64_t ldb, std::int64_t k, std::int64_t n);

  std::int64_t k() const { return k_; }
  std::int64_t n() const { return n_; }
  std::size_t depth_pad() const { return depth_pad_; }
  std::size_t n_pad() const { return n_pad_; }
  const bfloat16* data() const { return data_.data(); }

 private:
  std::vector<bfloat16> data_;
  std::int64_t k_ = 0, n_ = 0;
  std::size_t depth_pad_ = 0, n_pad_ = 0;
};

// A [m, k] rounded to bf16 as A tile rows (pack_a_rows: depth padded with zeros to
// padded_depth(k)), m padded to a multiple of 32 with zero rows. The buffer is kept between
// calls and grows only.
class TilePackedA {
 public:
  // Packs A (rows lda floats apart) with `threads` threads (0 = every available core).
  void pack(const float* a, std::int64_t lda, std::int64_t m, std::int64_t k, int threads);

  std::int64_t m() const { return m_; }
  std::int64_t k() const { return k_; }
  std::size_t depth_pad() const { return depth_pad_; }
  const bfloat16* data() const { return data_.data(); }

 private:
  std::vector<bfloat16> data_;
  std::int64_t m_ = 0, k_ = 0;
  std::size_t depth_pad_ = 0;
};

// C[m, n] (rows ldc floats apart) = A · B, every element one fp32 sum over the whole depth in a
// fixed order (TDPBF16PS's), so the result is bitwise the same for every thread count. C is
// written, never read (beta = 0). `backend` is amx_tile_backend() only where the caller
// obtained the tile permission (compute_path.hpp), or emulated_tile_backend(). Throws
// Error (kInvalidArgument, nothing written) when a.k() != b.k(), ldc < n, or C is null for a
// non-empty product.
void tile_gemm(const amx::TileBackend& backend, const TilePackedA& a, const TilePackedB& b,
               float* c, std::int64_t ldc, int threads);

}  // namespace seqattn::detail
