// Q·Kᵀ: vpdpbusd multiplies unsigned bytes by signed bytes, 4 products summed into each int32
// lane.
// The keys are made the unsigned operand by one xor (k + 128) and the query quad is the
// broadcast signed one, so a lane gets Σ (k + 128)·q = Σ k·q + 128·Σ q: the second term is
// one constant per row, subtracted once per tile. The sums wrap modulo 2^32 and the result
// fits, so it is exact, the same integers as QuadDotTile. 16 vpdpbusd replace 64 FMAs (and
// the 32 widening instructions of the fp32 path) for 4 rows × 4 d of 64 keys.
//
// P·V: vpdpwssd multiplies int16 pairs, 2 products summed into each int32 lane. A value pair
// (tokens t, t+1 of 16 columns, 32 bytes) is sign-extended to int16 (vpmovsxbw) and the two
// weights of each row are one broadcast 32-bit lane: 16 columns × 2 keys per instruction
// where fp32 needs 2 widening instructions and 2 FMAs per key. Sums over a 64-key tile are at
// most 64·32767·127 < 2^31: exact.
#include "src/kernel/decode/int8_products_avx512vnni.hpp"

#include <immintrin.h>

#include <cstring>

namespace seqattn::detail {
namespace {

// acc += the products of a and b, in place. Not the intrinsics: g++ 12 does not keep their
// accumulator in the instruction's destination register. For every vpdpwssd / vpdpbusd it
// emitted two register copies, and it spilled accumulators to the stack (the 4-row P·V loop
// held 76 vmovdqa for 16 vpdpwssd). An asm statement with a "+v" operand leaves the
// accumulator where it is.
// AT&T order: vpdpbusd b, a, acc adds the products of a's unsigned bytes and b's signed bytes.
inline __m512i AddBytePairs(__m512i acc, __m512i unsigned_a, __m512i signed_b) {
  asm("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(unsigned_a), "v"(signed_b));
  return acc;
}
inline __m512i AddWordPairs(__m512i acc, __m512i a, __m512i b) {
  asm("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}

template <std::size_t kRows>
void QuadDot64(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
               const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
               const QuadDotScores& out, simd::Prefetch prefetch, std::size_t far_quads) {
  constexpr std::size_t kVecs = 4;  // 64 keys: 4 × 16 lanes; kRows × 4 accumulators <= 24
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  __m512i acc[kRows][kVecs];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t v = 0; v < kVecs; ++v) acc[r][v] = _mm512_setzero_si512();
  }
  for (std::size_t c = 0; c < quads; ++c) {
    const std::int8_t* row = k + c * quad_stride;
    if (prefetch && c < far_quads) {
      for (std::size_t v = 0; v < kVecs; ++v) prefetch.Line(row + 64 * v);
    }
    if (prefetch.Near()) {
      for (std::size_t v = 0; v < kVecs; ++v) prefetch.NearLine(row + 64 * v);
    }
    __m512i kv[kVecs];
    for (std::size_t v = 0; v < kVecs; ++v) {
      kv[v] = _mm512_xor_si512(_mm512_loadu_si512(row + 64 * v), flip);
    }
    for (std::size_t r = 0; r < kRows; ++r) {
      std::int32_t quad;
      std::memcpy(&quad, q + r * q_stride + 4 * c, 4);
      const __m512i qv = _mm512_set1_epi32(quad);
      for (std::size_t v = 0; v < kVecs; ++v) acc[r][v] = AddBytePairs(acc[r][v], kv[v], qv);
    }
  }
  // The scaling rides on the conversion, while the scores are in registers: as a separate
  // pass over the stored tile (CacheWorker::Int8Scores' loop) it cost its own loads and stores.
  // Scales and pointers are read before the first store, which the compiler must otherwise
  // assume may change them.
  __m512 key_scale[kVecs], query_scale[kRows];
  for (std::size_t v = 0; v < kVecs; ++v) key_scale[v] = _mm512_load_ps(out.key_scales + 16 * v);
  for (std::size_t r = 0; r < kRows; ++r) query_scale[r] = _mm512_set1_ps(out.query_scales[r]);
  float* const s = out.s;
  const std::size_t stride = out.stride;
  for (std::size_t r = 0; r < kRows; ++r) {
    const __m512i bias = _mm512_set1_epi32(128 * q_sums[r]);
    for (std::size_t v = 0; v < kVecs; ++v) {
      // The zero-masked form: g++ 12 flags _mm512_cvtepi32_ps's undefined pass-through
      // operand as uninitialised (-Werror); with every lane selected it is the same vcvtdq2ps.
      const __m512 dot = _mm512_maskz_cvtepi32_ps(0xffff, _mm512_sub_epi32(acc[r][v], bias));
      const __m512 keyed = _mm512_mul_ps(dot, key_scale[v]);
      _mm512_store_ps(s + r * stride + 16 * v, _mm512_mul_ps(keyed, query_scale[r]));
    }
  }
}

template <std::size_t kRows, std::size_t kVecs>
void PairDotColumns(const std::int16_t* w, std::size_t w_stride, const std::int8_t* v,
                    std::size_t pair_stride, std::size_t pairs, const PairDotUpdate& update,
                    std::size_t col, const PairRequests& requests) {
  const simd::Prefetch prefetch = requests.values;
  const std::size_t values_from = requests.values_from;
  PacedLines keys = requests.keys;  // a local: kept in registers across the loop
  __m512i acc[kRows][kVecs];
  for (std::size_t r = 0; r < kRows; ++r) {
    for (std::size_t c = 0; c < kVecs; ++c) acc[r][c] = _mm512_setzero_si512();
  }
  for (std::size_t p = 0; p < pairs; ++p) {
    const std::int8_t* pair = v + p * pair_stride;
    keys.Take(Pacing::kKeyLinesPerPair);
    if (prefetch && p >= values_from) {  // one request per line: 32 columns of pairs
      for (std::size_t c = 0; c < kVecs; c += 2) prefetch.Line(pair + 32 * c);
    }
    if (prefetch.Near()) {
      for (std::size_t c = 0; c < kVecs; c += 2) prefetch.NearLine(pair + 32 * c);
    }
    __m512i vv[kVecs];
    for (std::size_t c = 0; c < kVecs; ++c) {
      vv[c] =
          _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 32 * c)));
    }
    for (std::size_t r = 0; r < kRows; ++r) {
      std::int32_t both;
      std::memcpy(&both, w + r * w_stride + 2 * p, 4);
      const __m512i wv = _mm512_set1_epi32(both);
      for (std::size_t c = 0; c < kVecs; ++c) acc[r][c] = AddWordPairs(acc[r][c], vv[c], wv);
    }
  }
  // Added to O here, not stored as floats for the caller to add: that round trip through
  // memory was a second pass over the tile's outputs. Factors and pointers are read before the
  // first store (see QuadDot64).
  // (As floats: six rows' broadcasts beside the 24 accumulators would not fit the registers.)
  float scale[kRows], unit[kRows], alpha[kRows];
  const bool rescale = update.alpha != nullptr;
  for (std::size_t r = 0; r < kRows; ++r) {
    scale[r] = update.scale[r];
    unit[r] = update.unit[r];
    alpha[r] = rescale ? update.alpha[r] : 1.0f;
  }
  float* const o = update.o + col;
  const std::size_t stride = update.stride;
  for (std::size_t r = 0; r < kRows; ++r) {
    const __m512 s = _mm512_set1_ps(scale[r]), u = _mm512_set1_ps(unit[r]);
    for (std::size_t c = 0; c < kVecs; ++c) {
      // t = float(sum) · scale · unit; o = o · alpha + t (one FMA) or o + t.
      const __m512 t =
          _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, acc[r][c]), s), u);
      float* at = o + r * stride + 16 * c;
      const __m512 old = _mm512_load_ps(at);
      _mm512_store_ps(
          at, rescale ? _mm512_fmadd_ps(old, _mm512_set1_ps(alpha[r]), t) : _mm512_add_ps(old, t));
    }
  }
  requests.keys = keys;
}

template <std::size_t kRows>
void PairDot(const std::int16_t* w, std::size_t w_stride, const std::int8_t* v,
             std::size_t pair_stride, std::size_t pairs, std::size_t cols,
             const PairDotUpdate& update, const PairRequests& requests) {
  std::size_t col = 0;
  for (; col + 64 <= cols; col += 64)
    PairDotColumns<kRows, 4>(w, w_stride, v + 2 * col, pair_stride, pairs, update, col, requests);
  for (; col < cols; col += 16)  // an edge: D_v not a multiple of 64
    PairDotColumns<kRows, 1>(w, w_stride, v + 2 * col, pair_stride, pairs, update, col, requests);
}

using PairKernel = void (*)(const std::int16_t*, std::size_t, const std::int8_t*, std::size_t,
                            std::size_t, std::size_t, const PairDotUpdate&, const PairRequests&);
constexpr PairKernel kPairKernels[] = {nullptr,    PairDot<1>, PairDot<2>, PairDot<3>,
                                       PairDot<4>, PairDot<5>, PairDot<6>};

using Kernel = void (*)(const std::int8_t*, std::size_t, const std::int32_t*, const std::int8_t*,
                        std::size_t, std::size_t, const QuadDotScores&, simd::Prefetch,
                        std::size_t);
constexpr Kernel kKernels[] = {nullptr,      QuadDot64<1>, QuadDot64<2>, QuadDot64<3>,
                               QuadDot64<4>, QuadDot64<5>, QuadDot64<6>};

}  // namespace

void QuadDot64Avx512Vnni(const std::int8_t* q, std::size_t q_stride, const std::int32_t* q_sums,
                         const std::int8_t* k, std::size_t quad_stride, std::size_t quads,
                         std::size_t rows, const QuadDotScores& out, simd::Prefetch prefetch,
                         std::size_t far_quads) {
  kKernels[rows](q, q_stride, q_sums, k, quad_stride, quads, out, prefetch, far_quads);
}

void PairDotAvx512Vnni(const std::int16_t* w, std::size_t w_stride, const std::int8_t* v,
                       std::size_t pair_stride, std::size_t pairs, std::size_t rows,
                       std::size_t cols, const PairDotUpdate& update,
                       const PairRequests& requests) {
  kPairKernels[rows](w, w_stride, v, pair_stride, pairs, cols, update, requests);
}

}  // namespace seqattn::detail
