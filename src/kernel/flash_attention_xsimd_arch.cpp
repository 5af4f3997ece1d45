// The shared flash kernel over xsimd::batch<float, SEQATTN_XSIMD_ARCH_TYPE>: this one source is
// compiled once per xsimd arch (src/kernel/CMakeLists.txt: sse4_2, avx2_fma, avx512f), each
// compile with its own -m flags and three definitions:
//   SEQATTN_XSIMD_NAMESPACE  the arch's namespace (xsimd_<arch>): everything compiled here sits
//                            in it, so no arch-specific code can stand in for another arch's
//   SEQATTN_XSIMD_ARCH_TYPE  the xsimd arch, e.g. xsimd::fma3<xsimd::avx2>
//   SEQATTN_XSIMD_ENTRY      the entry flash_attention_xsimd.cpp dispatches to
#if !defined(SEQATTN_XSIMD_NAMESPACE) || !defined(SEQATTN_XSIMD_ARCH_TYPE) || \
    !defined(SEQATTN_XSIMD_ENTRY)
#error "compiled once per xsimd arch by src/kernel/CMakeLists.txt, which defines the arch"
#endif

#include "src/kernel/flash_attention_xsimd.hpp"
#include "src/kernel/flash_kernel_deps.hpp"
#include "src/simd/xsimd_ops.hpp"

namespace seqattn::detail::SEQATTN_XSIMD_NAMESPACE {
#include "src/simd/exp2_body.inc"  // IWYU pragma: keep
// After the exp2 body: the driver calls Exp2NonPositive<Ops>.
#include "src/kernel/flash_driver_body.inc"  // IWYU pragma: keep

using Ops = simd::XsimdFloatOps<SEQATTN_XSIMD_ARCH_TYPE>;

void Forward(const Problem& p, const KeyStructure& keys) { FlashForward<Ops>(p, keys); }
std::size_t WorkspaceBytes(const Problem& p, const KeyStructure& keys) {
  return FlashWorkspaceBytes<Ops>(p, keys);
}
bool StreamsBand(const Problem& p, const KeyStructure& keys) {
  return FlashStreamsBand<Ops>(p, keys);
}
void Exp2(const float* in, float* out, size_t n) { Exp2NonPositiveSpan<Ops>(in, out, n); }
}  // namespace seqattn::detail::SEQATTN_XSIMD_NAMESPACE

namespace seqattn::detail {
XsimdFlashEntry SEQATTN_XSIMD_ENTRY() {
  return {&SEQATTN_XSIMD_NAMESPACE::Forward, &SEQATTN_XSIMD_NAMESPACE::WorkspaceBytes,
          &SEQATTN_XSIMD_NAMESPACE::StreamsBand, &SEQATTN_XSIMD_NAMESPACE::Exp2};
}
}  // namespace seqattn::detail
