// Compiles the flash kernel (the shared source, over the Highway ops) for every Highway
// target and dispatches to the best one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/kernel/flash_attention.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "src/kernel/flash_kernel_deps.hpp"
#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
using simd::HWY_NAMESPACE::Exp2NonPositive;
#include "src/kernel/flash_driver_body.inc"  // IWYU pragma: keep

// The products by Problem::compute_path: fp32, or the tile products (AMX or its emulation:
// one instantiation, the backend is a table chosen at run time).
void FlashForwardOnTarget(const Problem& p, const KeyStructure& keys) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  if (p.compute_path == ComputePath::kAmxBf16 || p.compute_path == ComputePath::kAmxEmulated) {
    FlashForward<Ops, TileProducts<Ops>>(p, keys);
  } else {
    FlashForward<Ops, Fp32Products<Ops>>(p, keys);
  }
}
std::size_t FlashWorkspaceBytesOnTarget(const Problem& p, const KeyStructure& keys) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  if (p.compute_path == ComputePath::kAmxBf16 || p.compute_path == ComputePath::kAmxEmulated) {
    return FlashWorkspaceBytes<Ops, TileProducts<Ops>>(p, keys);
  }
  return FlashWorkspaceBytes<Ops, Fp32Products<Ops>>(p, keys);
}
bool FlashStreamsBandOnTarget(const Problem& p, const KeyStructure& keys) {
  using Ops = simd::HWY_NAMESPACE::FloatOps;
  if (p.compute_path == ComputePath::kAmxBf16 || p.compute_path == ComputePath::kAmxEmulated) {
    return FlashStreamsBand<Ops, TileProducts<Ops>>(p, keys);
  }
  return FlashStreamsBand<Ops, Fp32Products<Ops>>(p, keys);
}
}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include "src/kernel/flash_attention.hpp"

namespace seqattn::detail {

HWY_EXPORT(FlashForwardOnTarget);
HWY_EXPORT(FlashWorkspaceBytesOnTarget);
HWY_EXPORT(FlashStreamsBandOnTarget);

bool tile_paths_built() { return true; }

void flash_forward(const Problem& p, const KeyStructure& keys) {
  HWY_DYNAMIC_DISPATCH(FlashForwardOnTarget)(p, keys);
}

std::size_t flash_workspace_bytes(const Problem& p, const KeyStructure& keys) {
  return HWY_DYNAMIC_DISPATCH(FlashWorkspaceBytesOnTarget)(p, keys);
}

bool flash_streams_band(const Problem& p, const KeyStructure& keys) {
  return HWY_DYNAMIC_DISPATCH(FlashStreamsBandOnTarget)(p, keys);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
