// What the shared flash kernel bodies (flash_tiles_body.inc, flash_driver_body.inc)
// need, included by each backend shell before it opens its per-target namespace, so that no
// standard or project header is compiled inside a target region.
#pragma once

#include <hwy/aligned_allocator.h>
#include <hwy/base.h>
#include <hwy/cache_control.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <new>
#include <span>
#include <type_traits>
#include <vector>

#include "seqattn/half.hpp"
#include "src/core/problem.hpp"
#include "src/kernel/amx/amx_micro_kernels.hpp"
#include "src/kernel/amx/tile_backend.hpp"
#include "src/kernel/amx/vnni_packing.hpp"
#include "src/kernel/block_mask.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/kernel/tile_order.hpp"
#include "src/kernel/tile_visibility.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/workspace.hpp"
#include "src/simd/prefetch.hpp"
