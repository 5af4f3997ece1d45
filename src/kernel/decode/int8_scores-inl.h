// Q·Kᵀ over an int8 KV cache in integers: the queries are quantised per row to int8 (the
// keys' rule: scale = max|row| / 127, round to nearest even), the dot products of a tile are
// exact int32 sums, converted to float once. QuadDotTile is the portable micro-kernel over
// QuadOps (every Highway target); int8_scores_avx512vnni.cpp is the same contract with
// vpdpbusd. Both produce the same exact integers, so a score is bitwise the same on every
// target and path: float(dot) · key scale · query scale.
//
// No include guard and no namespace: cache_attention.cpp includes this inside its per-target
// namespace.

// out[r][0, kVecs·L) = Σ_d q[r][d] · k[d][0, kVecs·L) for kRows query rows (int8, q_stride
// bytes apart, zero padded to whole quads) and a tile of key quads (quad c at k + c·quad_stride
// bytes, 4 bytes per key), as floats. Knows nothing of heads, blocks or scales.
template <class QOps, size_t kRows, size_t kVecs>
HWY_INLINE void QuadDotTile(const std::int8_t* HWY_RESTRICT q, size_t q_stride,
                            const std::int8_t* HWY_RESTRICT k, size_t quad_stride, size_t quads,
                            float* HWY_RESTRICT out, size_t out_stride) {
  using V = typename QOps::V;
  constexpr size_t kLanes = QOps::kLanes;
  V acc[kRows][kVecs];
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v) acc[r][v] = QOps::Zero();
  }
  for (size_t c = 0; c < quads; ++c) {
    const std::int8_t* HWY_RESTRICT quad_row = k + c * quad_stride;
    V kv[kVecs];
    for (size_t v = 0; v < kVecs; ++v) kv[v] = QOps::Load(quad_row + v * kLanes * 4);
    for (size_t r = 0; r < kRows; ++r) {
      const std::int8_t* q4 = q + r * q_stride + c * 4;
      for (size_t v = 0; v < kVecs; ++v) acc[r][v] = QOps::DotQuad(kv[v], q4, acc[r][v]);
    }
  }
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t v = 0; v < kVecs; ++v)
      QOps::StoreFloat(acc[r][v], out + r * out_stride + v * kLanes);
  }
}
