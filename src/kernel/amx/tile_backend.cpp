// The two tables of tile_backend.hpp.
#include "src/kernel/amx/tile_backend.hpp"

#include "src/kernel/amx/amx_micro_kernels.hpp"
#include "src/kernel/amx/amx_tiles.hpp"
#include "src/kernel/amx/tile_ops.hpp"

namespace seqattn::detail::amx {

const TileBackend& amx_tile_backend() {
  static constexpr TileBackend kAmx{&amx_configure_tiles, &amx_release_tiles, &amx_scores_block,
                                    &amx_values_block};
  return kAmx;
}

const TileBackend& emulated_tile_backend() {
  static constexpr TileBackend kEmulated{&configure_tiles<EmulatedTiles>,
                                         &release_tiles<EmulatedTiles>, &ScoresBlock<EmulatedTiles>,
                                         &ValuesBlock<EmulatedTiles>};
  return kEmulated;
}

}  // namespace seqattn::detail::amx
