// The block products on the AMX hardware: the AmxTiles instantiations of
// amx_micro_kernels.hpp, compiled in amx_tiles.cpp, the one file built with -mamx-tile
// -mamx-bf16 (the rest of the library stays baseline x86-64, so this header is safe to include
// anywhere). Calling any of these on a CPU without AMX-TILE and AMX-BF16, or before
// request_amx_permission() returned kGranted, kills the process with SIGILL: a dispatch layer
// decides first. Arguments are those of configure_tiles, ScoresBlock and ValuesBlock.
#pragma once

#include <cstddef>

#include "seqattn/half.hpp"

namespace seqattn::detail::amx {

// Per thread: configure before the first block of a run, release after the last.
void amx_configure_tiles();
void amx_release_tiles();

void amx_scores_block(const bfloat16* a, std::size_t a_stride, const bfloat16* b, std::size_t n_pad,
                      std::size_t depth_pad, float* s, std::size_t s_stride);
void amx_values_block(const bfloat16* p, std::size_t p_stride, const bfloat16* v,
                      std::size_t keys_pad, std::size_t cols_pad, float* t, std::size_t t_stride);

}  // namespace seqattn::detail::amx
