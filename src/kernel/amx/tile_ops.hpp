// The tile operations the AMX block products need, as a *type* that the micro-kernels take as
// a template parameter (amx_micro_kernels.hpp), so one kernel source serves two
// implementations without a virtual call per instruction:
//   EmulatedTiles (here)        plain C++, runs on any CPU: the tests' model of the hardware
//   AmxTiles (amx_tiles.cpp)    the instructions, in the one file compiled with AMX flags
// Both have this static interface, tile numbers as template arguments because the AMX
// instructions encode them (there is no tile register to pass at run time):
//   Configure(const TileConfig&)            LDTILECFG
//   Release()                                TILERELEASE
//   Zero<t>()                                TILEZERO   tmm t
//   Load<t>(const void* base, stride_bytes)  TILELOADD  tmm t (rows × colsb from the config)
//   Store<t>(void* base, stride_bytes)       TILESTORED tmm t
//   DotBf16<c, a, b>()                       TDPBF16PS  tmm c += tmm a · tmm b
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "src/kernel/amx/tile_config.hpp"

namespace seqattn::detail::amx {

// One emulated tile register: 16 rows × 64 bytes and the shape LDTILECFG gave it. Loads and
// products take the shape from here, not from their arguments, because the instructions do:
// a shape passed per call would let the emulation accept what the hardware computes otherwise.
struct TileReg {
  std::uint8_t rows = 0;
  std::uint16_t colsb = 0;
  alignas(64) std::uint8_t bytes[kMaxTileRows][kMaxTileColsb] = {};

  float fp32(std::size_t row, std::size_t i) const {
    float f;
    std::memcpy(&f, &bytes[row][4 * i], 4);
    return f;
  }
  std::uint16_t bf16_bits(std::size_t row, std::size_t i) const {
    std::uint16_t b;
    std::memcpy(&b, &bytes[row][2 * i], 2);
    return b;
  }
};

struct EmulatedTiles {
  // ---- The instructions on explicit registers (Intel SDM pseudo-code). ----

  // TILEZERO: every byte of the register, whatever its shape.
  static void Zero(TileReg& t) { std::memset(t.bytes, 0, sizeof(t.bytes)); }

  // TILELOADD: `rows` rows of `colsb` bytes from base + row · stride; the rest of the
  // register (bytes past colsb, rows past rows) becomes zero.
  static void Load(TileReg& t, const void* base, std::size_t stride_bytes) {
    Zero(t);
    const auto* src = static_cast<const std::uint8_t*>(base);
    for (std::size_t r = 0; r < t.rows; ++r)
      std::memcpy(t.bytes[r], src + r * stride_bytes, t.colsb);
  }

  // TILESTORED: `rows` rows of `colsb` bytes; nothing else is written.
  static void Store(const TileReg& t, void* base, std::size_t stride_bytes) {
    auto* dst = static_cast<std::uint8_t*>(base);
    for (std::size_t r = 0; r < t.rows; ++r)
      std::memcpy(dst + r * stride_bytes, t.bytes[r], t.colsb);
  }

  // TDPBF16PS as the SDM's pseudo-code states it. Per row m, two fp32 partial sums per output
  // column n, one over the even and one over the odd members of the bf16 pairs, each an FMA
  // per pair row k (a·b of two bf16 is exact in fp32, so the FMA rounds once per step); then
  // c[m][n] += (even + odd). Every FMA and addition rounds to nearest even, treats denormal
  // inputs as zero (DAZ) and flushes denormal results to zero (FTZ), whatever MXCSR says.
  // K = a.colsb / 4 pairs, N = c.colsb / 4 columns, M = c.rows; mismatched shapes or a register
  // named twice are #UD on the hardware, an exception here.
  static void DotBf16(TileReg& c, const TileReg& a, const TileReg& b) {
    if (&c == &a || &c == &b || &a == &b) throw std::logic_error("TDPBF16PS: a tile named twice");
    if (c.rows != a.rows || a.colsb / 4 != b.rows || c.colsb != b.colsb || c.colsb % 4 != 0) {
      throw std::logic_error("TDPBF16PS: tile shapes do not match (#UD)");
    }
    const std::size_t pairs = a.colsb / 4, columns = c.colsb / 4;
    // B widened (DAZ) once per instruction rather than once per row of A: the same values, and
    // the emulation is what the sanitizer flavours spend their tile-path tests in.
    float wide_b[kMaxTileRows][kMaxTileColsb / 2];
    for (std::size_t k = 0; k < pairs; ++k) {
      for (std::size_t e = 0; e < 2 * columns; ++e) wide_b[k][e] = Bf16Daz(b.bf16_bits(k, e));
    }
    for (std::size_t m = 0; m < c.rows; ++m) {
      float even[kMaxTileColsb / 4] = {}, odd[kMaxTileColsb / 4] = {};
      for (std::size_t k = 0; k < pairs; ++k) {
        const float a0 = Bf16Daz(a.bf16_bits(m, 2 * k)), a1 = Bf16Daz(a.bf16_bits(m, 2 * k + 1));
        for (std::size_t n = 0; n < columns; ++n) {
          even[n] = Ftz(std::fma(a0, wide_b[k][2 * n], even[n]));
          odd[n] = Ftz(std::fma(a1, wide_b[k][2 * n + 1], odd[n]));
        }
      }
      for (std::size_t n = 0; n < columns; ++n) {
        const float sum = Ftz(Ftz(c.fp32(m, n)) + Ftz(even[n] + odd[n]));
        std::memcpy(&c.bytes[m][4 * n], &sum, 4);
      }
      std::memset(&c.bytes[m][c.colsb], 0, kMaxTileColsb - c.colsb);
    }
    for (std::size_t m = c.rows; m < kMaxTileRows; ++m) std::memset(c.bytes[m], 0, kMaxTileColsb);
  }

  // ---- The interface the micro-kernels use: this thread's register file of 8 tiles. ----

  // LDTILECFG: the shapes, every register zeroed. Only palette 1 is modelled.
  static void Configure(const TileConfig& config) {
    if (config.palette_id != 1) throw std::logic_error("LDTILECFG: only palette 1 is emulated");
    RegisterFile& file = Registers();
    for (std::size_t i = 0; i < kMaxTiles; ++i) {
      file.tiles[i].rows = config.rows[i];
      file.tiles[i].colsb = config.colsb[i];
      Zero(file.tiles[i]);
    }
    file.configured = true;
  }
  // TILERELEASE: back to the initial state, every register unconfigured and zero.
  static void Release() { Registers() = RegisterFile{}; }

  template <int kT>
  static void Zero() {
    Zero(Tile<kT>());
  }
  template <int kT>
  static void Load(const void* base, std::size_t stride_bytes) {
    Load(Tile<kT>(), base, stride_bytes);
  }
  template <int kT>
  static void Store(void* base, std::size_t stride_bytes) {
    Store(Tile<kT>(), base, stride_bytes);
  }
  template <int kC, int kA, int kB>
  static void DotBf16() {
    static_assert(kC != kA && kC != kB && kA != kB, "TDPBF16PS needs three distinct tiles");
    DotBf16(Tile<kC>(), Tile<kA>(), Tile<kB>());
  }

 private:
  struct RegisterFile {
    bool configured = false;
    std::array<TileReg, kMaxTiles> tiles{};
  };
  static RegisterFile& Registers() {
    thread_local RegisterFile file;  // tile state is per thread on the hardware too
    return file;
  }
  template <int kT>
  static TileReg& Tile() {
    static_assert(kT >= 0 && kT < static_cast<int>(kMaxTiles), "palette 1 has tmm0..tmm7");
    RegisterFile& file = Registers();
    if (!file.configured) throw std::logic_error("AMX tile used before LDTILECFG (#UD)");
    return file.tiles[kT];
  }

  // make_fp32 of the SDM (the bf16 bits above 16 zero bits), with denormals as signed zeros.
  static float Bf16Daz(std::uint16_t bits) {
    if ((bits & 0x7f80u) == 0) bits &= 0x8000u;
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  // A denormal result becomes a zero of its sign. The result is rounded at denormal precision
  // first: a value just below the smallest normal that rounds up to it is kept, where hardware
  // that judges tininess before rounding would flush it (not checked on an AMX CPU).
  static float Ftz(float f) {
    const bool subnormal = f != 0.0f && std::fabs(f) < std::numeric_limits<float>::min();
    return subnormal ? std::copysign(0.0f, f) : f;
  }
};

}  // namespace seqattn::detail::amx
