// The shared flash kernel over xsimd::batch<float, xsimd::avx512f>; this file alone is compiled
// with -mavx512f -mavx2 -mfma (variants/dense/CMakeLists.txt), everything it shares with other
// files sits in its own namespace so no arch-specific code can stand in for another arch's.
#include "src/simd/xsimd_ops.hpp"
#include "variants/dense/flash_attention_xsimd.hpp"
#include "variants/dense/flash_kernel_deps.hpp"

namespace seqattn::detail::xsimd_avx512f {
#include "src/simd/exp2_shared-inl.h"                // IWYU pragma: keep
#include "variants/dense/flash_driver_shared-inl.h"  // IWYU pragma: keep

using Ops = simd::XsimdFloatOps<xsimd::avx512f>;

void Forward(const Problem& p, const KeyPattern& pattern) { FlashForward<Ops>(p, pattern); }
void Exp2(const float* in, float* out, size_t n) { Exp2NonPositiveSpan<Ops>(in, out, n); }
}  // namespace seqattn::detail::xsimd_avx512f

namespace seqattn::detail {
XsimdFlashEntry xsimd_flash_avx512f() { return {&xsimd_avx512f::Forward, &xsimd_avx512f::Exp2}; }
}  // namespace seqattn::detail
