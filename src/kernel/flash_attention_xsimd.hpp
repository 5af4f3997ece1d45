// The flash kernel compiled once per xsimd arch (flash_attention_xsimd_<arch>.cpp, each with
// its own -m flags); flash_attention_xsimd.cpp picks one at run time.
#pragma once

#include <cstddef>

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"

namespace seqattn::detail {

struct XsimdFlashEntry {
  void (*forward)(const Problem& p, const KeyStructure& keys);
  std::size_t (*workspace_bytes)(const Problem& p, const KeyStructure& keys);
  bool (*streams_band)(const Problem& p, const KeyStructure& keys);
  // 2^x for x <= 0 over n floats (the softmax's exp, exposed for the accuracy test).
  void (*exp2_non_positive)(const float* in, float* out, size_t n);
};

XsimdFlashEntry xsimd_flash_sse4_2();
XsimdFlashEntry xsimd_flash_avx2_fma();
XsimdFlashEntry xsimd_flash_avx512f();

// The entry of the arch simd::current_xsimd_arch() names.
XsimdFlashEntry current_xsimd_flash();

}  // namespace seqattn::detail
