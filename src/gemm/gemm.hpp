// The packed single-precision GEMM engine used by MultiHeadAttention's projections, Linformer's
// projections along the sequence and LSH attention's hashing. Internal: not part of
// the public API, so Highway types never leak.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace seqattn::detail {

// Whether an operand is used as stored (kNo) or transposed (kYes).
enum class Transpose { kNo, kYes };

// C = alpha·op(A)·op(B) + beta·C with row-major operands:
//   op(A) is [m, k]: A is stored [m, k] (kNo) or [k, m] (kYes) with row stride lda;
//   op(B) is [k, n]: B is stored [k, n] (kNo) or [n, k] (kYes) with row stride ldb;
//   C is [m, n] with row stride ldc.
// m, n or k = 0 is a legal no-op (k = 0 scales C by beta). beta = 0 never reads C, so C may hold
// garbage (even NaN); alpha = 0 (or k = 0) never reads A and B (the BLAS convention). A pointer
// may be null only when its operand is empty (m·k, k·n or m·n = 0). threads = 0
// uses every available core. The result is bitwise the same for every thread count: each element's
// k-sum is accumulated in one fixed order.
// pack: the packing scratch, at least sgemm_pack_floats(m, n, k, threads) floats, 64-byte
// aligned, which the call overwrites (its contents need not be anything). Empty: the call
// allocates its own (one allocation per call), so a steady loop (the variants' runs, MHA's
// forwards) passes scratch it keeps.
// Throws seqattn::Error (kInvalidArgument) naming the argument for negative sizes, leading
// dimensions shorter than a row, null pointers for non-empty operands, negative threads, or a
// pack too short or misaligned; nothing is written to C then.
void sgemm(Transpose trans_a, Transpose trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
           float beta, float* c, std::int64_t ldc, int threads = 1, std::span<float> pack = {});

// Floats of packing scratch sgemm(m, n, k, threads) takes on the dispatched target (each target
// blocks its own way): per rectangle of C the call's threads split it into (as many as the
// threads, fewer for a small product), a block of A and one of B cut to the largest
// rectangle's extents, each a whole number of 64-byte lines. 0 for an empty product. Throws as
// sgemm for negative sizes or threads.
std::size_t sgemm_pack_floats(std::int64_t m, std::int64_t n, std::int64_t k, int threads = 1);

// The register and cache blocking the runtime dispatches to on this CPU (for tests, benchmarks
// and docs): micro-tile mr × nr, cache blocks mc × kc × nc, and the Highway target's name.
struct GemmBlockingInfo {
  std::int64_t mr = 0, nr = 0, mc = 0, kc = 0, nc = 0;
  std::string target;
};
GemmBlockingInfo gemm_blocking();

}  // namespace seqattn::detail
