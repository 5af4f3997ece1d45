// The KV cache as the kernels see it: per (batch, kv head) a run of 64-token blocks, keys
// transposed [D][64] and values row-major [64][dv_pad] (int8: interleaved, below). 64 tokens is the
// AVX-512 key tile (4 vectors of 16) and a whole number of every narrower target's fp32 tiles (AVX2
// 16, SSE4 and SCALAR 8; an int8 tile is the whole block on every target), so any target reads
// the cache in place: a tile of W keys starting at token t0
// of a block is the block's keys + t0 with row stride 64. dv_pad (D_v rounded up to 16
// floats, one AVX-512 vector) is likewise a whole number of vectors on every target.
// Elements are the cache's dtype (f32, bf16, f16 or int8); the kernel is instantiated per dtype.
// An int8 cache also holds one fp32 scale per token slot for K and for V, [blocks][64] per
// (batch, kv head) like the slots: element (token t, d) stands for int8 · scale[t]. Its keys
// are stored in quads, [ceil(D/4)][64][4] per block (element (t, d) at (d/4)·256 + 4t + d%4,
// D padded with zeros to a multiple of 4): one 32-bit lane holds 4 consecutive d of one key,
// the operand of an int8 dot-product instruction (vpdpbusd), so Q·Kᵀ runs in integers. Its
// values are stored in pairs of tokens, [32][dv_pad][2] per block (element (t, d) at
// (t/2)·2·dv_pad + 2d + t%2): one 16-bit lane holds tokens t and t+1 of one column, the
// operand of vpdpwssd, so P·V runs in integers too. A tile starting at token t0 (even) starts
// t0·dv_pad bytes into the block, as in the plain layout.
#pragma once

#include <cstdint>

#include "seqattn/half.hpp"

namespace seqattn::detail {

inline constexpr std::int64_t kKvBlock = 64;        // tokens per block
inline constexpr std::int64_t kKvColumnAlign = 16;  // D_v padded to a multiple of this
inline constexpr std::int64_t kKeyQuad = 4;         // int8 keys: d per 32-bit lane

// Rows of a key block: D, or D rounded up to whole quads for an int8 cache.
inline std::int64_t key_rows_of(DType dtype, std::int64_t dim) {
  return dtype == DType::kI8 ? (dim + kKeyQuad - 1) / kKeyQuad * kKeyQuad : dim;
}

struct PackedKv {
  const void* k = nullptr;                // [B][H_kv][blocks][key_rows][kKvBlock]
  const void* v = nullptr;                // [B][H_kv][blocks][kKvBlock][dv_pad] (i8: pairs)
  DType dtype = DType::kF32;              // of k and v
  const std::int64_t* lengths = nullptr;  // [B]: tokens appended (absolute positions)
  std::int64_t batch = 0, heads_kv = 0, dim = 0, dim_v = 0, dv_pad = 0;
  std::int64_t capacity = 0;  // tokens kept per sequence
  std::int64_t blocks = 0;    // storage blocks per (batch, kv head): ceil(capacity / 64)
  bool ring = false;
  const float* k_scale = nullptr;  // int8 only: [B][H_kv][blocks][kKvBlock]
  const float* v_scale = nullptr;
  // A paged pool (PagedKvCache): k, v and the scales hold [H_kv][pool block][...], and row b of
  // the table names the pool block of each 64 positions of sequence b. Null: the contiguous
  // KvCache layout above.
  const std::int64_t* block_table = nullptr;
  std::int64_t table_width = 0;
  std::int64_t pool_blocks = 0;  // blocks in the pool

  std::int64_t length(std::int64_t b) const { return lengths[b]; }
  // Rows of a key block: D, or whole quads of D for int8 (the caches' own layout rule).
  std::int64_t key_rows() const { return key_rows_of(dtype, dim); }
  // First position still stored: a ring keeps the last `capacity` tokens.
  std::int64_t base(std::int64_t b) const {
    return lengths[b] > capacity ? lengths[b] - capacity : 0;
  }
  // The storage block holding absolute position j of (b, hk) (a ring wraps over its storage
  // blocks; a paged pool looks it up in the block table). The decode kernel finds a tile's
  // block once and reads its keys, values and scales through the *_at accessors.
  std::int64_t block(std::int64_t b, std::int64_t hk, std::int64_t j) const {
    if (block_table != nullptr)
      return hk * pool_blocks + block_table[b * table_width + j / kKvBlock];
    return (b * heads_kv + hk) * blocks + j / kKvBlock % blocks;
  }
  // T is the dtype's element type (float, bfloat16, float16 or std::int8_t).
  template <class T>
  const T* key_block_at(std::int64_t block) const {
    return static_cast<const T*>(k) + block * key_rows() * kKvBlock;
  }
  template <class T>
  const T* value_block_at(std::int64_t block) const {
    return static_cast<const T*>(v) + block * kKvBlock * dv_pad;
  }
  // The 64 key (value) scales of a block (int8 caches).
  const float* key_scales_at(std::int64_t block) const { return k_scale + block * kKvBlock; }
  const float* value_scales_at(std::int64_t block) const { return v_scale + block * kKvBlock; }
};

}  // namespace seqattn::detail
