// What the shared flash kernel bodies (flash_tiles_shared-inl.h, flash_driver_shared-inl.h)
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
#include <type_traits>
#include <vector>

#include "runtime/positional.hpp"
#include "seqattn/half.hpp"
#include "variants/attention_variant.hpp"
#include "variants/dense/key_pattern.hpp"
#include "variants/dense/tile_visibility.hpp"
