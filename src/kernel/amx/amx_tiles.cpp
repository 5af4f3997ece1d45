// AmxTiles: the tile-ops interface of tile_ops.hpp on the instructions themselves. The only
// file compiled with -mamx-tile -mamx-bf16 (src/kernel/amx/CMakeLists.txt); nothing here runs
// unless a caller has checked the CPU and obtained the permission (amx_permission.hpp).
#include "src/kernel/amx/amx_tiles.hpp"

#include <immintrin.h>

#include "src/kernel/amx/amx_micro_kernels.hpp"
#include "src/kernel/amx/tile_config.hpp"

// (GCC spells the macros __AMX_TILE__ / __AMX_BF16__, clang __AMXTILE__ / __AMXBF16__.)
#if !(defined(__AMX_TILE__) || defined(__AMXTILE__)) || \
    !(defined(__AMX_BF16__) || defined(__AMXBF16__))
#error "amx_tiles.cpp must be compiled with -mamx-tile -mamx-bf16"
#endif

namespace seqattn::detail::amx {
namespace {

struct AmxTiles {
  static void Configure(const TileConfig& config) {
    // GCC's _tile_loadconfig declares only the first 8 bytes of the configuration as read; the
    // barrier makes the compiler finish writing all 64 before LDTILECFG reads them.
    __asm__ volatile("" ::: "memory");
    _tile_loadconfig(&config);
  }
  static void Release() { _tile_release(); }

#if defined(__clang__)
  // Clang's intrinsics are builtins taking the tile number as a constant expression.
  template <int kT>
  static void Zero() {
    _tile_zero(kT);
  }
  template <int kT>
  static void Load(const void* base, std::size_t stride_bytes) {
    _tile_loadd(kT, base, stride_bytes);
  }
  template <int kT>
  static void Store(void* base, std::size_t stride_bytes) {
    _tile_stored(kT, base, stride_bytes);
  }
  template <int kC, int kA, int kB>
  static void DotBf16() {
    _tile_dpbf16ps(kC, kA, kB);
  }
#else
  // GCC's _tile_* are macros that paste their tile argument into the instruction text
  // ("%%tmm"#dst), so a template parameter would assemble as "%tmmkT". These are the same
  // inline assembly with the number passed as an immediate operand and printed bare by %c.
  // TILELOADD and TILESTORED also clobber "memory": GCC's own loadd declares no memory read at
  // all, which would let the compiler sink the packing stores past it.
  template <int kT>
  static void Zero() {
    __asm__ volatile("{tilezero\t%%tmm%c0|tilezero\ttmm%c0}" ::"i"(kT));
  }
  template <int kT>
  static void Load(const void* base, std::size_t stride_bytes) {
    __asm__ volatile("{tileloadd\t(%0,%1,1), %%tmm%c2|tileloadd\ttmm%c2, [%0+%1*1]}" ::"r"(base),
                     "r"(stride_bytes), "i"(kT)
                     : "memory");
  }
  template <int kT>
  static void Store(void* base, std::size_t stride_bytes) {
    __asm__ volatile("{tilestored\t%%tmm%c2, (%0,%1,1)|tilestored\t[%0+%1*1], tmm%c2}" ::"r"(base),
                     "r"(stride_bytes), "i"(kT)
                     : "memory");
  }
  template <int kC, int kA, int kB>
  static void DotBf16() {
    __asm__ volatile(
        "{tdpbf16ps\t%%tmm%c2, %%tmm%c1, %%tmm%c0|tdpbf16ps\ttmm%c0, tmm%c1, tmm%c2}" ::"i"(kC),
        "i"(kA), "i"(kB));
  }
#endif
};

}  // namespace

void amx_configure_tiles() { configure_tiles<AmxTiles>(); }
void amx_release_tiles() { release_tiles<AmxTiles>(); }

void amx_scores_block(const bfloat16* a, std::size_t a_stride, const bfloat16* b, std::size_t n_pad,
                      std::size_t depth_pad, float* s, std::size_t s_stride) {
  ScoresBlock<AmxTiles>(a, a_stride, b, n_pad, depth_pad, s, s_stride);
}

void amx_values_block(const bfloat16* p, std::size_t p_stride, const bfloat16* v,
                      std::size_t keys_pad, std::size_t cols_pad, float* t, std::size_t t_stride) {
  ValuesBlock<AmxTiles>(p, p_stride, v, keys_pad, cols_pad, t, t_stride);
}

}  // namespace seqattn::detail::amx
