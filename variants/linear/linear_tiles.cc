// Compiles linear_tiles-inl.h once per Highway target and dispatches to the best one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "variants/linear/linear_tiles.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "variants/linear/linear_tiles-inl.h"

#if HWY_ONCE

namespace seqattn::detail::linear_tiles {

HWY_EXPORT(MultiplyBroadcast);

void multiply_broadcast(std::int64_t rows, std::int64_t cols, std::int64_t depth, const float* a,
                        std::int64_t a_row, std::int64_t a_depth, const float* b, std::int64_t ldb,
                        float* c, std::int64_t ldc, bool accumulate, Lines ahead) {
  HWY_DYNAMIC_DISPATCH(MultiplyBroadcast)
  (rows, cols, depth, a, a_row, a_depth, b, ldb, c, ldc, accumulate, ahead);
}

}  // namespace seqattn::detail::linear_tiles
#endif  // HWY_ONCE
