// The 64-byte AMX tile configuration that LDTILECFG reads (palette 1: 8 tiles of at most 16
// rows × 64 bytes), built from the shapes a kernel wants and checked against the palette's
// limits before the instruction could fault on them (#GP, which kills the process).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace seqattn::detail::amx {

// Palette 1, the only palette AMX CPUs implement (Sapphire Rapids onwards).
inline constexpr std::size_t kMaxTiles = 8;
inline constexpr std::size_t kMaxTileRows = 16;
inline constexpr std::size_t kMaxTileColsb = 64;  // bytes per tile row

// One tile: `rows` rows of `colsb` bytes. {0, 0} leaves the tile unused.
struct TileShape {
  std::size_t rows = 0;
  std::size_t colsb = 0;
};

// The memory image LDTILECFG reads, field for field (Intel SDM, "TILECFG"): the byte offsets
// are fixed by the instruction, so they are asserted below rather than left to the compiler.
// The format has 16 slots per array although palette 1 names only tiles 0..7; the upper
// slots must stay zero.
struct alignas(64) TileConfig {
  std::uint8_t palette_id = 0;     // byte 0: 1 = palette 1 (0 would mean "release")
  std::uint8_t start_row = 0;      // byte 1: restart row of an interrupted load/store
  std::uint8_t reserved[14] = {};  // bytes 2..15: must be zero
  std::uint16_t colsb[16] = {};    // bytes 16..47: bytes per row of tile i (little endian)
  std::uint8_t rows[16] = {};      // bytes 48..63: rows of tile i
};
static_assert(sizeof(TileConfig) == 64);
static_assert(offsetof(TileConfig, colsb) == 16 && offsetof(TileConfig, rows) == 48);

// Palette 1 with shapes[i] for tile i. Throws seqattn::Error naming the argument
// ("shapes[2].rows", …) when there are more than 8 shapes, a tile has more than 16 rows or
// 64 bytes per row, or exactly one of rows and colsb is zero (a half-described tile is a
// caller's mistake, not an unused one).
TileConfig make_tile_config(std::span<const TileShape> shapes);

}  // namespace seqattn::detail::amx
