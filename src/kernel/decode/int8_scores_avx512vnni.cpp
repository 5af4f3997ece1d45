// vpdpbusd multiplies unsigned bytes by signed bytes, 4 products summed into each int32 lane.
// The keys are made the unsigned operand by one xor (k + 128) and the query quad is the
// broadcast signed one, so a lane gets Σ (k + 128)·q = Σ k·q + 128·Σ q: the second term is
// one constant per row, subtracted once per tile. The sums wrap modulo 2^32 and the result
// fits, so it is exact, the same integers as QuadDotTile. 16 vpdpbusd replace 64 FMAs (and
// the 32 widening instructions of the fp32 path) for 4 rows × 4 d of 64 keys.
#include "src/kernel/decode/int8_scores_avx512vnni.hpp"

#include <immintrin.h>

#include <cstring>

namespace seqattn::detail {
namespace {

template <std::size_t kRows>
void QuadDot64(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
               const std::int8_t* k, std::size_t quad_stride, std::size_t quads, float* out,
               std::size_t out_stride, std::ptrdiff_t prefetch) {
  constexpr std::size_t kVecs = 4;  // 64 keys: 4 × 16 lanes; kRows × 4 accumulators <= 24
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[kRows][kVecs];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_si512();
  }
  for (std::size_t c = 0; c < quads; ++c) {
    const std::int8_t* row = k + c * quad_stride;
    if (prefetch != 0) {  // into L2, as PrefetchToL2 in flash_tiles_body.inc explains
      for (std::size_t v = 0; v < kVecs; ++v) _mm_prefetch(row + prefetch + 64 * v, _MM_HINT_T2);
    }
    __m512i kv[kVecs];
    for (std::size_t v = 0; v < kVecs; ++v) {
      kv[v] = _mm512_xor_si512(_mm512_loadu_si512(row + 64 * v), flip);
    }
    for (std::size_t r = 0; r < kRows; ++r) {
      std::int32_t quad;
      std::memcpy(&quad, q + r * q_stride + 4 * c, 4);
      const __m512i qv = _mm512_set1_epi32(quad);
      for (std::size_t v = 0; v < kVecs; ++v) acc[r][v] = _mm512_dpbusd_epi32(acc[r][v], kv[v], qv);
    }
  }
  for (std::size_t r = 0; r < kRows; ++r) {
    const __m512i bias = _mm512_set1_epi32(128 * q_sums[r]);
    for (std::size_t v = 0; v < kVecs; ++v) {
      // The zero-masked form: g++ 12 flags _mm512_cvtepi32_ps's undefined pass-through
      // operand as uninitialised (-Werror); with every lane selected it is the same vcvtdq2ps.
      const __m512 dot = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_sub_epi32(acc[r][v], bias));
      _mm512_store_ps(out + r * out_stride + 16 * v, dot);
    }
  }
}

using Kernel = void (*)(const std::int8_t*, std::size_t, const std::int32_t*, const std::int8_t*,
                        std::size_t, std::size_t, float*, std::size_t, std::ptrdiff_t);
constexpr Kernel kKernels[] = {nullptr,      QuadDot64<1>, QuadDot64<2>, QuadDot64<3>,
                               QuadDot64<4>, QuadDot64<5>, QuadDot64<6>};

}  // namespace

void QuadDot64Avx512Vnni(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
                         const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
                         std::size_t rows, float* out, std::size_t out_stride,
                         std::ptrdiff_t prefetch) {
  kKernels[rows](q, q_stride, q_sums, k, quad_stride, quads, out, out_stride, prefetch);
}

}  // namespace seqattn::detail
