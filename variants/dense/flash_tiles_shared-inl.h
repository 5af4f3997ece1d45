// Register-blocked micro-kernels of the flash kernel and the per-target blocking table,
// written once over a SIMD ops type (FloatOps of src/simd/highway_ops-inl.h or XsimdFloatOps
// of src/simd/xsimd_ops.hpp). The micro-kernels know only packed tiles (pointers, strides,
// depth): nothing of heads, batches or masks.
//
// No include guard and no namespace: a backend shell (flash_attention.cpp for Highway,
// flash_attention_xsimd_*.cpp for xsimd) includes this once inside its per-target namespace
// and target region, after <cmath>, <cstddef>, <limits> and <hwy/base.h>, with
// Exp2NonPositive<Ops> visible.

// Scores are kept in log2 units (queries pre-multiplied by scale·log2 e) so the softmax is exp2.
inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// Blocking of the flash kernel for one target.
//  rows:      query rows per micro-tile (the broadcast operand of both micro-kernels).
//  key_vecs:  vectors of keys per key tile; rows × key_vecs score accumulators + key_vecs
//             loads + 1 broadcast must fit the register file.
//  out_vecs:  vectors of output columns per P·V micro-tile (same register budget).
//  query_tile: rows per work item; its packed Q and output accumulator stay in L1/L2 while
//             the packed K/V tiles stream past, so larger amortises K/V traffic, smaller
//             balances threads and wastes less on band edges.
struct FlashBlocking {
  size_t rows;
  size_t key_vecs;
  size_t out_vecs;
  size_t query_tile;
};

// The table, keyed by the ops type's register file (the same for both backends). AVX-512
// has 32 registers: 6 × 4 accumulators + 4 loads + 1 broadcast = 29. The 16-register x86
// targets use 6 × 2 + 2 + 1 = 15. The 1-lane scalar fallback takes wider key tiles so the
// per-tile bookkeeping stays small next to the arithmetic.
template <class Ops>
constexpr FlashBlocking BlockingFor() {
  if constexpr (Ops::kLanes == 1) {
    return {4, 8, 8, 64};
  } else if constexpr (Ops::kRegisters >= 32) {
    return {6, 4, 4, 96};
  } else {
    return {6, 2, 2, 96};
  }
}
template <class Ops>
inline constexpr FlashBlocking kFlashBlocking = BlockingFor<Ops>();

// How a micro-kernel combines its product with the existing C tile.
enum class TileUpdate { kOverwrite, kAccumulate, kScaleRowsThenAccumulate };

// C[r][0, kVecs·L) = (update) + Σ_k a[r·a_stride + k] · b[k·b_stride + (0, kVecs·L)].
// a is broadcast one element at a time (no layout constraint); b and c rows are aligned and
// padded to whole vectors. kScaleRowsThenAccumulate multiplies C row r by row_scale[r] first
// (the online-softmax rescale, fused into the load). kPrefetch also asks for row k of b at
// `prefetch` elements further on (the decode kernel's next cache block), as row k is read.
// BElem is b's element type: float, or a 16-bit type (the decode kernel over a bf16/f16 cache)
// that Ops::LoadWide widens exactly to fp32 as it loads.
template <class Ops, size_t kRows, size_t kVecs, TileUpdate kUpdate, bool kPrefetch = false,
          class BElem = float>
HWY_INLINE void MultiplyTile(const float* HWY_RESTRICT a, size_t a_stride,
                             const BElem* HWY_RESTRICT b, size_t b_stride, size_t depth,
                             float* HWY_RESTRICT c, size_t c_stride,
                             const float* HWY_RESTRICT row_scale, std::ptrdiff_t prefetch = 0) {
  using V = typename Ops::V;
  constexpr size_t kLanes = Ops::kLanes;
  V acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) acc[r][v] = Ops::Zero();
  }
  for (size_t k = 0; k < depth; ++k) {
    const BElem* HWY_RESTRICT b_row = b + k * b_stride;
    if constexpr (kPrefetch) {
      // One request per 64-byte line: every vector of fp32, every other of 16-bit elements.
      constexpr size_t kStep = sizeof(BElem) == 4 ? 1 : 2;
      for (size_t v = 0; v < kVecs; v += kStep) hwy::Prefetch(b_row + prefetch + v * kLanes);
    }
    V bv[kVecs];
    for (size_t v = 0; v < kVecs; ++v) {
      if constexpr (std::is_same_v<BElem, float>) {
        bv[v] = Ops::Load(b_row + v * kLanes);
      } else {
        bv[v] = Ops::LoadWide(b_row + v * kLanes);
      }
    }
    for (size_t r = 0; r < kRows; ++r) {
      const V ar = Ops::Set(a[r * a_stride + k]);
      for (size_t v = 0; v < kVecs; ++v) acc[r][v] = Ops::MulAdd(ar, bv[v], acc[r][v]);
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    float* HWY_RESTRICT c_row = c + r * c_stride;
    for (size_t v = 0; v < kVecs; ++v) {
      V result = acc[r][v];
      if constexpr (kUpdate == TileUpdate::kAccumulate) {
        result = Ops::Add(Ops::Load(c_row + v * kLanes), result);
      } else if constexpr (kUpdate == TileUpdate::kScaleRowsThenAccumulate) {
        result = Ops::MulAdd(Ops::Load(c_row + v * kLanes), Ops::Set(row_scale[r]), result);
      }
      Ops::Store(result, c_row + v * kLanes);
    }
  }
}

// P·V into the output accumulator for the whole padded width: full column chunks of
// out_vecs vectors, then one narrower chunk (an edge tile outside the hot loop).
template <class Ops, size_t kRows, size_t kOutVecs, TileUpdate kUpdate, bool kPrefetch = false,
          class BElem = float>
HWY_INLINE void MultiplyRowsByValues(const float* HWY_RESTRICT p, size_t p_stride,
                                     const BElem* HWY_RESTRICT v, size_t v_stride, size_t keys,
                                     float* HWY_RESTRICT o, size_t o_stride,
                                     const float* HWY_RESTRICT row_scale,
                                     std::ptrdiff_t prefetch = 0) {
  constexpr size_t kLanes = Ops::kLanes;
  constexpr size_t kChunk = kOutVecs * kLanes;
  size_t full_chunks = v_stride / kChunk;
  size_t tail_vecs = v_stride % kChunk / kLanes;
  // The narrower last chunk (D_v not a multiple of the chunk) is an edge tile. A lone tail
  // vector would run at one FMA per broadcast, so with 4-vector chunks it is folded with the
  // last full chunk into 3 + 2 vectors (D_v = 80 → 48 + 32 columns).
  const bool fold = kOutVecs == 4 && tail_vecs == 1 && full_chunks > 0;
  if (fold) {
    --full_chunks;
    tail_vecs = 5;
  }
  size_t col = 0;
  for (size_t c = 0; c < full_chunks; ++c, col += kChunk) {
    MultiplyTile<Ops, kRows, kOutVecs, kUpdate, kPrefetch, BElem>(
        p, p_stride, v + col, v_stride, keys, o + col, o_stride, row_scale, prefetch);
  }
  if constexpr (kOutVecs > 2) {
    if (tail_vecs >= 3) {
      MultiplyTile<Ops, kRows, 3, kUpdate, kPrefetch, BElem>(
          p, p_stride, v + col, v_stride, keys, o + col, o_stride, row_scale, prefetch);
      tail_vecs -= 3;
      col += 3 * kLanes;
    }
    for (; tail_vecs >= 2; tail_vecs -= 2, col += 2 * kLanes) {
      MultiplyTile<Ops, kRows, 2, kUpdate, kPrefetch, BElem>(
          p, p_stride, v + col, v_stride, keys, o + col, o_stride, row_scale, prefetch);
    }
  }
  for (; tail_vecs > 0; --tail_vecs, col += kLanes) {
    MultiplyTile<Ops, kRows, 1, kUpdate, kPrefetch, BElem>(p, p_stride, v + col, v_stride, keys,
                                                           o + col, o_stride, row_scale, prefetch);
  }
}

// Hides scores of one row outside keys [lo, hi) (relative to the tile's first key) with -inf:
// the vector form of the contiguous rules (key length, causal diagonal, band edges), used on
// edge tiles that need nothing else.
template <class Ops, size_t kKeyVecs>
HWY_INLINE void KeepKeyRange(float* HWY_RESTRICT s, float lo, float hi) {
  using V = typename Ops::V;
  constexpr size_t kLanes = Ops::kLanes;
  const V hidden = Ops::Set(-std::numeric_limits<float>::infinity());
  const V vlo = Ops::Set(lo), vhi = Ops::Set(hi);
  V key = Ops::Iota();
  const V step = Ops::Set(static_cast<float>(kLanes));
  for (size_t v = 0; v < kKeyVecs; ++v, key = Ops::Add(key, step)) {
    const auto inside = Ops::And(Ops::Ge(key, vlo), Ops::Lt(key, vhi));
    Ops::Store(Ops::Select(inside, Ops::Load(s + v * kLanes), hidden), s + v * kLanes);
  }
}

// ALiBi on one row of scores (log2 units) for keys at distances rel + [0, kKeyVecs·lanes)
// from the query (rel = j0 - i): s += slope·(j - i), the causal form -slope·(i - j), or
// s -= slope·|j - i|, the symmetric one. Distances below 2^24 are exact in float, so the
// bias is one rounding of slope·distance, as an explicit bias tensor would be.
template <class Ops, size_t kKeyVecs, bool kSymmetric>
HWY_INLINE void AddDistanceBias(float* HWY_RESTRICT s, float slope, float rel) {
  using V = typename Ops::V;
  constexpr size_t kLanes = Ops::kLanes;
  const V step = Ops::Set(static_cast<float>(kLanes));
  const V vslope = Ops::Set(kSymmetric ? -slope : slope);
  V dist = Ops::Add(Ops::Iota(), Ops::Set(rel));
  for (size_t v = 0; v < kKeyVecs; ++v, dist = Ops::Add(dist, step)) {
    const V x = kSymmetric ? Ops::Max(dist, Ops::Sub(Ops::Zero(), dist)) : dist;
    Ops::Store(Ops::MulAdd(vslope, x, Ops::Load(s + v * kLanes)), s + v * kLanes);
  }
}

// Probabilities below 2^kSoftmaxFloor of the row's running maximum are flushed to 0. Kept,
// a tile of them (ALiBi's distance ramps give whole tiles of scores 64-126 below the
// maximum) makes the P·V chains, which start from zero, produce denormals, and every FMA
// that does takes a microcode assist on Intel cores: with ALiBi at S = 4096 the kernel ran
// 1.6x slower than without (and 1.0x with denormals flushed by MXCSR). The dropped weights
// change an output by at most S_k·2^-64 (~5e-20·S_k) of its scale, and the lse as little.
inline constexpr int kSoftmaxFloor = -64;

// Online-softmax step for one micro-tile of scores (log2 units, masked entries -inf):
// updates each row's running max m and its running sum, overwrites the scores with
// p = 2^(s - m_new), and writes alpha = 2^(m_old - m_new) (1 when the max did not grow).
// Returns whether any row needs its accumulator rescaled. The running sums are kept as one
// vector per row (sum_lanes, stride = lanes) and reduced only when the row is finished, which
// keeps a horizontal add off every tile. A row that has seen no visible key keeps m = -inf,
// sum 0 and gets p = 0 (never NaN).
template <class Ops, size_t kRows, size_t kKeyVecs>
HWY_INLINE bool SoftmaxStep(float* HWY_RESTRICT scores, float* HWY_RESTRICT m,
                            float* HWY_RESTRICT sum_lanes, float* HWY_RESTRICT alpha) {
  using V = typename Ops::V;
  constexpr size_t kLanes = Ops::kLanes;
  constexpr size_t kKeys = kKeyVecs * kLanes;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  bool rescale = false;
  for (size_t r = 0; r < kRows; ++r) {
    float* HWY_RESTRICT s = scores + r * kKeys;
    V vmax = Ops::Load(s);
    for (size_t v = 1; v < kKeyVecs; ++v) vmax = Ops::Max(vmax, Ops::Load(s + v * kLanes));
    const float tile_max = Ops::ReduceMax(vmax);
    V sum = Ops::Load(sum_lanes + r * kLanes);
    alpha[r] = 1.0f;
    if (tile_max > m[r]) {
      alpha[r] = m[r] == kNegInf ? 0.0f : std::exp2(m[r] - tile_max);
      sum = Ops::Mul(sum, Ops::Set(alpha[r]));
      m[r] = tile_max;
      rescale = true;
    }
    const V base = Ops::Set(m[r] == kNegInf ? 0.0f : m[r]);
    for (size_t v = 0; v < kKeyVecs; ++v) {
      const V p = Exp2NonPositive<Ops, kSoftmaxFloor>(Ops::Sub(Ops::Load(s + v * kLanes), base));
      Ops::Store(p, s + v * kLanes);
      sum = Ops::Add(sum, p);
    }
    Ops::Store(sum, sum_lanes + r * kLanes);
  }
  return rescale;
}
