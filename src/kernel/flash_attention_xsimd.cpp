// Runtime dispatch of the xsimd flash kernel (baseline ISA; the per-arch kernels live in
// flash_attention_xsimd_<arch>.cpp).
#include "src/kernel/flash_attention_xsimd.hpp"
#include "src/kernel/flash_attention.hpp"
#include "src/simd/xsimd_dispatch.hpp"

namespace seqattn::detail {

XsimdFlashEntry current_xsimd_flash() {
  switch (simd::current_xsimd_arch()) {
    case simd::XsimdArch::kSse4_2:
      return xsimd_flash_sse4_2();
    case simd::XsimdArch::kAvx2Fma:
      return xsimd_flash_avx2_fma();
    case simd::XsimdArch::kAvx512f:
      return xsimd_flash_avx512f();
  }
  return xsimd_flash_sse4_2();
}

bool tile_paths_built() { return false; }

void flash_forward(const Problem& p, const KeyStructure& keys) {
  current_xsimd_flash().forward(p, keys);
}

std::size_t flash_workspace_bytes(const Problem& p, const KeyStructure& keys) {
  return current_xsimd_flash().workspace_bytes(p, keys);
}

bool flash_streams_band(const Problem& p, const KeyStructure& keys) {
  return current_xsimd_flash().streams_band(p, keys);
}

}  // namespace seqattn::detail
