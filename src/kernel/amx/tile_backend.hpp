// The block products of amx_micro_kernels.hpp behind plain function pointers, one table per
// implementation, so the flash kernel (compiled for every Highway target, without AMX flags)
// calls the AMX instructions or their emulation through the same four entries. A call
// multiplies a whole 32 × 32 × depth scores block or a 32 × keys × D_v values block, so the
// indirect call costs nothing measurable.
#pragma once

#include <cstddef>

#include "seqattn/half.hpp"

namespace seqattn::detail::amx {

struct TileBackend {
  // Loads / releases this thread's tile configuration (once per thread per run).
  void (*configure)();
  void (*release)();
  // ScoresBlock and ValuesBlock (amx_micro_kernels.hpp), same arguments.
  void (*scores)(const bfloat16* a, std::size_t a_stride, const bfloat16* b, std::size_t n_pad,
                 std::size_t depth_pad, float* s, std::size_t s_stride);
  void (*values)(const bfloat16* p, std::size_t p_stride, const bfloat16* v, std::size_t keys_pad,
                 std::size_t cols_pad, float* t, std::size_t t_stride);
};

// The instructions (amx_tiles.cpp): only where the CPU has AMX and Linux granted the tiles.
const TileBackend& amx_tile_backend();
// EmulatedTiles: scalar, any CPU (tests of the tiling, packing and rounding).
const TileBackend& emulated_tile_backend();

}  // namespace seqattn::detail::amx
