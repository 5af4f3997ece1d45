// The flash kernel's geometry and its packing of K and V into tiles (with RoPE applied to
// each key on the way), written once over the target (see flash_driver_shared-inl.h).
//
// No include guard and no namespace: included by flash_driver_shared-inl.h inside a backend
// shell's per-target namespace and target region, after flash_kernel_deps.hpp.

// Sizes derived from the problem and the target's blocking.
struct FlashGeometry {
  std::int64_t rows, key_tile, key_tiles, query_tile, query_tiles, dim, dim_v, dv_pad;

  FlashGeometry(const Problem& p, const FlashBlocking& blocking, std::int64_t lanes)
      : rows(static_cast<std::int64_t>(blocking.rows)),
        key_tile(static_cast<std::int64_t>(blocking.key_vecs) * lanes),
        key_tiles((p.seq_k() + key_tile - 1) / key_tile),
        query_tile(static_cast<std::int64_t>(blocking.query_tile)),
        query_tiles((p.seq_q() + query_tile - 1) / query_tile),
        dim(p.dim()),
        dim_v(p.dim_v()),
        dv_pad((p.dim_v() + lanes - 1) / lanes * lanes) {}

  std::int64_t packed_k_floats() const { return key_tiles * key_tile * dim; }
  std::int64_t packed_v_floats() const { return key_tiles * key_tile * dv_pad; }
};

// Key tile kt of one (batch, kv-head): K transposed [dim][key_tile] so the Q·Kᵀ micro-kernel
// broadcasts one query element against whole vectors of keys; V row-major [key_tile][dv_pad].
// Keys past S_k and columns past D_v are zero so padded lanes never produce NaN. With RoPE
// each key is rotated here, into `row` (dim floats), on its way into the tile: the packing
// is the one pass over K there is, so the rotation costs no memory traffic of its own.
inline void PackKeyValueTile(const Problem& p, const FlashGeometry& g, std::int64_t b,
                             std::int64_t hk, std::int64_t kt, float* HWY_RESTRICT k_dst,
                             float* HWY_RESTRICT v_dst, float* HWY_RESTRICT row) {
  const std::int64_t k_step = p.k.strides[3], v_step = p.v.strides[3];
  const RopeTables* rope = key_rope_of(p.positional.get());
  for (std::int64_t t = 0; t < g.key_tile; ++t) {
    const std::int64_t j = kt * g.key_tile + t;
    float* v_row = v_dst + t * g.dv_pad;
    if (j >= p.seq_k()) {
      for (std::int64_t d = 0; d < g.dim; ++d) k_dst[d * g.key_tile + t] = 0.0f;
      std::fill(v_row, v_row + g.dv_pad, 0.0f);
      continue;
    }
    const float* k_row = p.k.ptr(b, hk, j);
    const float* v_src = p.v.ptr(b, hk, j);
    if (rope != nullptr) {
      rotate_row_at(k_row, k_step, g.dim, 1.0f, *rope, rope->rows(), RopeSide::kKey, j, row);
      for (std::int64_t d = 0; d < g.dim; ++d) k_dst[d * g.key_tile + t] = row[d];
    } else if (k_step == 1) {  // the usual layouts: let the compiler see contiguous reads
      for (std::int64_t d = 0; d < g.dim; ++d) k_dst[d * g.key_tile + t] = k_row[d];
    } else {
      for (std::int64_t d = 0; d < g.dim; ++d) k_dst[d * g.key_tile + t] = k_row[d * k_step];
    }
    if (v_step == 1) {
      std::copy(v_src, v_src + g.dim_v, v_row);
    } else {
      for (std::int64_t d = 0; d < g.dim_v; ++d) v_row[d] = v_src[d * v_step];
    }
    std::fill(v_row + g.dim_v, v_row + g.dv_pad, 0.0f);
  }
}
