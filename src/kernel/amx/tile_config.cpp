#include "src/kernel/amx/tile_config.hpp"

#include <string>

#include "src/runtime/validate.hpp"

namespace seqattn::detail::amx {

TileConfig make_tile_config(std::span<const TileShape> shapes) {
  if (shapes.size() > kMaxTiles) {
    fail("shapes", "at most " + std::to_string(kMaxTiles) + " tile shapes (palette 1)",
         std::to_string(shapes.size()) + " shapes");
  }
  TileConfig config;
  config.palette_id = 1;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const TileShape& s = shapes[i];
    const std::string name = "shapes[" + std::to_string(i) + "]";
    if (s.rows > kMaxTileRows) {
      fail(name + ".rows", "at most " + std::to_string(kMaxTileRows) + " (palette 1)",
           std::to_string(s.rows));
    }
    if (s.colsb > kMaxTileColsb) {
      fail(name + ".colsb", "at most " + std::to_string(kMaxTileColsb) + " bytes (palette 1)",
           std::to_string(s.colsb));
    }
    if ((s.rows == 0) != (s.colsb == 0)) {
      fail(name, "rows and colsb both zero (unused tile) or both nonzero",
           "rows " + std::to_string(s.rows) + ", colsb " + std::to_string(s.colsb));
    }
    config.rows[i] = static_cast<std::uint8_t>(s.rows);
    config.colsb[i] = static_cast<std::uint16_t>(s.colsb);
  }
  return config;
}

}  // namespace seqattn::detail::amx
