// The products of attention over an int8 KV cache in integers. Q·Kᵀ: the queries are
// quantised per row to int8 (the keys' rule: scale = max|row| / 127, round to nearest even)
// and a tile's dot products are exact int32 sums. P·V: a tile's probabilities, times the
// values' scales, are quantised per row to int16 (scale = max / 32767) and the sums over the
// tile's keys are exact int32. QuadDotTile and PairDotTile are the portable micro-kernels over
// an ops family of src/simd/int8_ops-inl.h (int16 pairs, pmaddwd on x86, on every target but
// SCALAR; int32 lanes there); int8_products_avx512vnni.cpp has the same contracts on vpdpbusd /
// vpdpwssd. All give the same integers, converted to float once, so the result is bitwise the
// same on any path.
//
// No include guard and no namespace: cache_attention.cpp includes this inside its per-target
// namespace (within seqattn), after src/simd/int8_ops-inl.h, src/simd/prefetch.hpp and
// src/kernel/decode/paced_requests.hpp.

// Asks for rows [lo, hi) of an operand (row i at p + i·stride bytes) the lines `ahead.near` on,
// into L1, that start inside the row's first `bytes`. A line shared by several narrow tiles or
// column passes is asked for once, by the pass its start falls in. The far requests go in
// address order instead (simd::OrderedLines, src/simd/prefetch.hpp).
HWY_INLINE void NearRowLines(const std::int8_t* p, size_t stride, size_t lo, size_t hi,
                             size_t bytes, simd::Prefetch ahead) {
  if (!ahead.Near()) return;
  auto first_line = [](const std::int8_t* row) {
    return (64 - reinterpret_cast<std::uintptr_t>(row) % 64) % 64;
  };
  // Rows a whole number of lines apart (every cache block's quad rows and value pairs) share
  // their lines' offsets: found once per pass, not per row (Zen 3, callgrind: a request loop
  // 9 instructions a row -> 7). The loop stays in this function's body: given to a generic
  // lambda, g++ 12 deleted every request (a body of prefetches alone counted as having no
  // effect).
  const bool shared = stride % 64 == 0;
  const size_t shared_first = first_line(p + lo * stride);
  if (shared && shared_first >= bytes) return;
  for (size_t i = lo; i < hi; ++i) {
    const std::int8_t* row = p + i * stride;
    for (size_t b = shared ? shared_first : first_line(row); b < bytes; b += 64)
      ahead.NearLine(row + b);
  }
}

// Rows of [lo, hi) that are also in [far_lo, far_hi).
HWY_INLINE size_t RowsWithin(size_t lo, size_t hi, size_t far_lo, size_t far_hi) {
  const size_t a = HWY_MAX(lo, far_lo), b = HWY_MIN(hi, far_hi);
  return a < b ? b - a : 0;
}

// Pairs or quad rows whose requests a micro-kernel makes together, ahead of their arithmetic,
// so that the arithmetic's loop has one back edge: with a request's tests inside the loop over
// pairs, g++ kept each accumulator in a second register and copied it back every pair (8
// vmovdqa and a spill among the 26 instructions a pair of AVX2's P·V passes needs). Where paced
// requests reach these kernels (an Intel CPU with AVX-512 but no VNNI, or
// SEQATTN_DECODE_PREFETCH), P·V takes a group's key lines at once: one per pair in all.
inline constexpr size_t kRequestGroup = 16;

// The accumulator block of an integer micro-kernel: zeroed, and stored as floats.
template <class IOps, size_t kRows, size_t kVecs>
HWY_INLINE void ZeroSums(typename IOps::V (&acc)[kRows][kVecs]) {
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) acc[r][v] = IOps::Zero();
  }
}
template <class IOps, size_t kRows, size_t kVecs>
HWY_INLINE void StoreSums(const typename IOps::V (&acc)[kRows][kVecs], float* HWY_RESTRICT out,
                          size_t out_stride) {
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v)
      IOps::StoreFloat(acc[r][v], out + r * out_stride + v * IOps::kLanes);
  }
}

// out[r][0, kVecs·L) = Σ_d q[r][d] · k[d][0, kVecs·L) for kRows query rows and a tile of key
// quads (quad c at k + c·quad_stride bytes, 4 bytes per key), as floats. The rows come as
// QOps::QueryFactors of their quads (kParts int32 per quad, q_stride int32 apart). `far` asks
// for the first far_quads quad rows' lines that far ahead, in address order, as the passes read
// those rows (the caller paces the rest); `prefetch` for every row's `near` on, into L1. Knows
// nothing of heads, blocks or scales. A quad row's vectors are split once and used by every row; a
// row's factors are broadcast once and used by every vector.
template <class QOps, size_t kRows, size_t kVecs>
HWY_INLINE void QuadDotColumns(const std::int32_t* HWY_RESTRICT q, size_t q_stride,
                               const std::int8_t* HWY_RESTRICT k, size_t quad_stride, size_t quads,
                               float* HWY_RESTRICT out, size_t out_stride, simd::Prefetch prefetch,
                               size_t far_quads, simd::OrderedLines& far) {
  using V = typename QOps::V;
  constexpr size_t kLanes = QOps::kLanes, kParts = QOps::kParts;
  constexpr size_t kTileBytes = kVecs * kLanes * 4;
  V acc[kRows][kVecs];
  ZeroSums<QOps>(acc);
  for (size_t c0 = 0; c0 < quads; c0 += kRequestGroup) {
    const size_t end = HWY_MIN(c0 + kRequestGroup, quads);
    far.Visit(RowsWithin(c0, end, 0, far_quads));
    NearRowLines(k, quad_stride, c0, end, kTileBytes, prefetch);
    for (size_t c = c0; c < end; ++c) {
      const std::int8_t* HWY_RESTRICT quad_row = k + c * quad_stride;
      V part[kVecs][kParts];
      for (size_t v = 0; v < kVecs; ++v)
        QOps::Split(QOps::LoadLanes(quad_row + v * kLanes * 4), part[v]);
      for (size_t r = 0; r < kRows; ++r) {
        const std::int32_t* f = q + r * q_stride + c * kParts;
        for (size_t i = 0; i < kParts; ++i) {
          const V factor = QOps::Factor(f[i]);
          for (size_t v = 0; v < kVecs; ++v)
            acc[r][v] = QOps::MulAddPart(part[v][i], factor, acc[r][v]);
        }
      }
    }
  }
  StoreSums<QOps>(acc, out, out_stride);
}

// Vectors of keys per QuadDotColumns pass: as many as the registers hold with rows × pass
// accumulators, the pass's split parts and a broadcast factor (pmaddwd pairs, AVX2's 16
// registers: 4 vectors for one row, 2 for 2-5 rows, 1 for 6; AVX-512's 32: 4 up to 5 rows, 2
// for 6). Without that bound the compiler kept every row's factors and spilled accumulators to
// the stack in the hot loop.
template <class QOps, size_t kRows>
constexpr size_t QuadPassVecs() {
  for (size_t vecs = 4; vecs > 1; vecs /= 2) {
    if (kRows * vecs + vecs * QOps::kParts + 1 <= QOps::kRegisters) return vecs;
  }
  return 1;
}

// QuadDotColumns over kVecs vectors of keys in passes (QuadPassVecs). A pass re-reads the quad
// rows the others read, from L1. Out of line, as PairDotTile: inlined into the worker's tile,
// g++ allocated their registers among the worker's and spilled accumulators in the hot loops.
// Out of line and with their requests per kRequestGroup, one Zen 3 thread (AVX2; S_k 4096, H 32,
// H_kv 8, D 128) ran the int8 kernel in 73.6M instructions where it took 97.7M (callgrind, 7
// decode steps), the step in 1.41 ms where it took 1.99.
template <class QOps, size_t kRows, size_t kVecs>
HWY_NOINLINE void QuadDotTile(const std::int32_t* HWY_RESTRICT q, size_t q_stride,
                              const std::int8_t* HWY_RESTRICT k, size_t quad_stride, size_t quads,
                              float* HWY_RESTRICT out, size_t out_stride, simd::Prefetch prefetch,
                              size_t far_quads) {
  constexpr size_t kLanes = QOps::kLanes;
  constexpr size_t kPass = QuadPassVecs<QOps, kRows>();
  constexpr size_t kPasses = kVecs / kPass + kVecs % kPass;
  far_quads = HWY_MIN(far_quads, quads);
  const size_t far_bytes = far_quads == 0 ? 0 : (far_quads - 1) * quad_stride + kVecs * kLanes * 4;
  simd::OrderedLines far(k, far_bytes, prefetch, kPasses * far_quads);
  size_t v = 0;
  for (; v + kPass <= kVecs; v += kPass) {
    QuadDotColumns<QOps, kRows, kPass>(q, q_stride, k + v * kLanes * 4, quad_stride, quads,
                                       out + v * kLanes, out_stride, prefetch, far_quads, far);
  }
  if constexpr (kVecs % kPass != 0) {  // a width that is not a whole number of passes
    for (; v < kVecs; ++v) {
      QuadDotColumns<QOps, kRows, 1>(q, q_stride, k + v * kLanes * 4, quad_stride, quads,
                                     out + v * kLanes, out_stride, prefetch, far_quads, far);
    }
  }
}

// PairDotTile for kVecs vectors of columns.
template <class POps, size_t kRows, size_t kVecs>
HWY_INLINE void PairDotColumns(const std::int16_t* HWY_RESTRICT w, size_t w_stride,
                               const std::int8_t* HWY_RESTRICT v, size_t pair_stride, size_t pairs,
                               float* HWY_RESTRICT out, size_t out_stride,
                               const detail::PairRequests& requests, simd::OrderedLines& far) {
  using V = typename POps::V;
  constexpr size_t kLanes = POps::kLanes;
  constexpr size_t kChunkBytes = kVecs * kLanes * 2;
  // Locals, kept in registers across the loop.
  const simd::Prefetch values = requests.values;
  const size_t values_from = requests.values_from;
  detail::PacedLines keys = requests.keys;
  V acc[kRows][kVecs];
  ZeroSums<POps>(acc);
  for (size_t p0 = 0; p0 < pairs; p0 += kRequestGroup) {
    const size_t end = HWY_MIN(p0 + kRequestGroup, pairs);
    far.Visit(RowsWithin(p0, end, values_from, pairs));
    NearRowLines(v, pair_stride, p0, end, kChunkBytes, values);
    keys.Take((end - p0) * detail::Pacing::kKeyLinesPerPair);
    for (size_t p = p0; p < end; ++p) {
      const std::int8_t* HWY_RESTRICT pair = v + p * pair_stride;
      for (size_t c = 0; c < kVecs; ++c) {
        V part[POps::kParts];
        POps::Split(POps::Load(pair + 2 * c * kLanes), part);
        for (size_t r = 0; r < kRows; ++r)
          acc[r][c] = POps::MulAddPair(part, w + r * w_stride + 2 * p, acc[r][c]);
      }
    }
  }
  requests.keys = keys;
  StoreSums<POps>(acc, out, out_stride);
}

// out[r][0, cols) = Σ_t w[r][t] · v[t][0, cols) for kRows rows of int16 weights (w_stride
// apart) over `pairs` pairs of keys (pair p at v + p·pair_stride bytes, column c's two bytes at
// 2c), as floats; cols a whole number of vectors. `requests`: what it asks for ahead as it goes
// (paced_requests.hpp). Knows nothing of heads, blocks or scales.
template <class POps, size_t kRows>
HWY_NOINLINE void PairDotTile(const std::int16_t* HWY_RESTRICT w, size_t w_stride,
                              const std::int8_t* HWY_RESTRICT v, size_t pair_stride, size_t pairs,
                              size_t cols, float* HWY_RESTRICT out, size_t out_stride,
                              const detail::PairRequests& requests) {
  constexpr size_t kLanes = POps::kLanes;
  constexpr size_t kVecs = kLanes >= 16 ? 4 : 2;  // columns per pass: rows × kVecs accumulators
  const size_t passes = cols / (kVecs * kLanes) + cols % (kVecs * kLanes) / kLanes;
  const size_t from = HWY_MIN(requests.values_from, pairs), far_pairs = pairs - from;
  const size_t far_bytes = far_pairs == 0 ? 0 : (far_pairs - 1) * pair_stride + 2 * cols;
  simd::OrderedLines far(v + from * pair_stride, far_bytes, requests.values, passes * far_pairs);
  size_t col = 0;
  for (; col + kVecs * kLanes <= cols; col += kVecs * kLanes) {
    PairDotColumns<POps, kRows, kVecs>(w, w_stride, v + 2 * col, pair_stride, pairs, out + col,
                                       out_stride, requests, far);
  }
  for (; col < cols; col += kLanes) {  // an edge: D_v not a multiple of the pass
    PairDotColumns<POps, kRows, 1>(w, w_stride, v + 2 * col, pair_stride, pairs, out + col,
                                   out_stride, requests, far);
  }
}
