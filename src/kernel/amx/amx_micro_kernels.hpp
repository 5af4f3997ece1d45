// The two products of one flash block on AMX tiles, written once over a tile-ops type
// (EmulatedTiles or AmxTiles, tile_ops.hpp). They know packed bf16 operands (vnni_packing.hpp)
// and fp32 outputs, nothing of heads, masks or the softmax.
//
// One tile assignment serves both products, so one configuration (every tile 16 rows × 64
// bytes) is loaded per thread per run and neither product reconfigures:
//   tmm0..3  C: the 2 × 2 fp32 accumulators of a 32 × 32 output block (16 × 16 each)
//   tmm4..5  A: rows 0..15 and 16..31 (32 bf16 of the reduction per row)
//   tmm6..7  B: output columns 0..15 and 16..31 (16 pair rows = 32 reduction steps)
// Fewer valid rows, keys or depth are zeros in the packed operands, never a branch here: the
// tiles are always full, and the caller ignores the outputs of padding rows and columns.
#pragma once

#include <array>
#include <cstddef>

#include "seqattn/half.hpp"
#include "src/kernel/amx/tile_config.hpp"
#include "src/kernel/amx/vnni_packing.hpp"

namespace seqattn::detail::amx {

inline constexpr std::size_t kBlockRows = 32;  // query rows of a block (two A tiles)
// Keys of one ScoresBlock (two B tiles of scores); the flash kernel's blocks are four of these
// (TileProducts::kKeys), summed by one ValuesBlock.
inline constexpr std::size_t kBlockKeys = 32;

inline constexpr int kC00 = 0, kC01 = 1, kC10 = 2, kC11 = 3;  // C[row half][column half]
inline constexpr int kA0 = 4, kA1 = 5, kB0 = 6, kB1 = 7;

// Every tile 16 rows × 64 bytes: 16 × 16 fp32 (C), 16 × 32 bf16 (A), 16 × 16 bf16 pairs (B).
inline const TileConfig& block_tile_config() {
  static const TileConfig config = [] {
    std::array<TileShape, kMaxTiles> shapes;
    shapes.fill(TileShape{kMaxTileRows, kMaxTileColsb});
    return make_tile_config(shapes);
  }();
  return config;
}

// The configuration is per thread and stays loaded for a whole run of blocks; release it
// afterwards so the 8 KiB of tile data return to their initial state (XSAVE then skips them at
// every context switch and signal of this thread).
template <class Tiles>
void configure_tiles() {
  Tiles::Configure(block_tile_config());
}
template <class Tiles>
void release_tiles() {
  Tiles::Release();
}

// S[32][32] = A · Xᵀ in fp32 (s: row stride s_stride floats; exactly the 32 × 32 block is
// written). a: 32 rows of pack_a_rows output, row stride a_stride bf16 (>= depth_pad). b: the
// pack_b_vnni buffer of X at the block's first key j0 (buffer + vnni_index(0, j0, n_pad), with
// j0 + 32 <= n_pad). depth_pad: a multiple of 32. Tiles must be configured.
template <class Tiles>
void ScoresBlock(const bfloat16* a, std::size_t a_stride, const bfloat16* b, std::size_t n_pad,
                 std::size_t depth_pad, float* s, std::size_t s_stride) {
  const std::size_t a_bytes = a_stride * sizeof(bfloat16);
  const std::size_t b_bytes = n_pad * 2 * sizeof(bfloat16);  // one pair row of every key
  const bfloat16* a1 = a + 16 * a_stride;
  Tiles::template Zero<kC00>();
  Tiles::template Zero<kC01>();
  Tiles::template Zero<kC10>();
  Tiles::template Zero<kC11>();
  for (std::size_t d = 0; d < depth_pad; d += kReductionStep) {
    const bfloat16* b_rows = b + vnni_index(d, 0, n_pad);
    Tiles::template Load<kA0>(a + d, a_bytes);
    Tiles::template Load<kA1>(a1 + d, a_bytes);
    Tiles::template Load<kB0>(b_rows, b_bytes);
    Tiles::template Load<kB1>(b_rows + 2 * kColumnsPerTile, b_bytes);
    Tiles::template DotBf16<kC00, kA0, kB0>();
    Tiles::template DotBf16<kC01, kA0, kB1>();
    Tiles::template DotBf16<kC10, kA1, kB0>();
    Tiles::template DotBf16<kC11, kA1, kB1>();
  }
  const std::size_t s_bytes = s_stride * sizeof(float);
  float* s1 = s + 16 * s_stride;
  Tiles::template Store<kC00>(s, s_bytes);
  Tiles::template Store<kC01>(s + kColumnsPerTile, s_bytes);
  Tiles::template Store<kC10>(s1, s_bytes);
  Tiles::template Store<kC11>(s1 + kColumnsPerTile, s_bytes);
}

// T[32][cols_pad] = P · V in fp32 (t: row stride t_stride floats; exactly 32 × cols_pad
// written). p: 32 rows × keys_pad keys of bf16 probabilities (pack_a_rows with depth <=
// keys_pad), row stride p_stride bf16. v: the pack_b_vnni_rows buffer at the block's first
// key t0 (buffer + vnni_index(t0, 0, cols_pad), t0 a multiple of 32). keys_pad: a multiple
// of 32, the reduction; cols_pad: a multiple of 16.
//
// T is stored, not accumulated: the caller rescales its fp32 output rows by the online
// softmax's correction and adds T. Keeping the output in tiles instead would need 32 × D_v
// fp32 = 16 tiles at D_v = 128, and the 8 tile registers also hold P and V. So each C tile
// sums keys_pad / 32 products between its zeroing and its store: the flash kernel's 128-key
// blocks store, and its caller adds, a quarter of what 32-key ones did.
template <class Tiles>
void ValuesBlock(const bfloat16* p, std::size_t p_stride, const bfloat16* v, std::size_t keys_pad,
                 std::size_t cols_pad, float* t, std::size_t t_stride) {
  const std::size_t p_bytes = p_stride * sizeof(bfloat16);
  const std::size_t v_bytes = cols_pad * 2 * sizeof(bfloat16);
  const std::size_t t_bytes = t_stride * sizeof(float);
  const bfloat16* p1 = p + 16 * p_stride;
  float* t1 = t + 16 * t_stride;
  std::size_t c = 0;
  for (; c + 2 * kColumnsPerTile <= cols_pad; c += 2 * kColumnsPerTile) {
    Tiles::template Zero<kC00>();
    Tiles::template Zero<kC01>();
    Tiles::template Zero<kC10>();
    Tiles::template Zero<kC11>();
    for (std::size_t k = 0; k < keys_pad; k += kReductionStep) {
      Tiles::template Load<kA0>(p + k, p_bytes);
      Tiles::template Load<kA1>(p1 + k, p_bytes);
      Tiles::template Load<kB0>(v + vnni_index(k, c, cols_pad), v_bytes);
      Tiles::template Load<kB1>(v + vnni_index(k, c + kColumnsPerTile, cols_pad), v_bytes);
      Tiles::template DotBf16<kC00, kA0, kB0>();
      Tiles::template DotBf16<kC01, kA0, kB1>();
      Tiles::template DotBf16<kC10, kA1, kB0>();
      Tiles::template DotBf16<kC11, kA1, kB1>();
    }
    Tiles::template Store<kC00>(t + c, t_bytes);
    Tiles::template Store<kC01>(t + c + kColumnsPerTile, t_bytes);
    Tiles::template Store<kC10>(t1 + c, t_bytes);
    Tiles::template Store<kC11>(t1 + c + kColumnsPerTile, t_bytes);
  }
  if (c < cols_pad) {  // a last chunk of 16 columns (cols_pad an odd multiple of 16)
    Tiles::template Zero<kC00>();
    Tiles::template Zero<kC10>();
    for (std::size_t k = 0; k < keys_pad; k += kReductionStep) {
      Tiles::template Load<kA0>(p + k, p_bytes);
      Tiles::template Load<kA1>(p1 + k, p_bytes);
      Tiles::template Load<kB0>(v + vnni_index(k, c, cols_pad), v_bytes);
      Tiles::template DotBf16<kC00, kA0, kB0>();
      Tiles::template DotBf16<kC10, kA1, kB0>();
    }
    Tiles::template Store<kC00>(t + c, t_bytes);
    Tiles::template Store<kC10>(t1 + c, t_bytes);
  }
}

}  // namespace seqattn::detail::amx
