// The Highway backend of the SIMD primitive layer: the few vector operations the kernels are
// written over, for the target being compiled (xsimd_ops.hpp is the other backend). Kernels
// take the ops type as a template parameter, so their source is shared by both backends and
// only this file names hn::.

// Per-target include guard, toggled by foreach_target.h.
#if defined(SEQATTN_SIMD_HIGHWAY_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_SIMD_HIGHWAY_OPS_INL_H_
#undef SEQATTN_SIMD_HIGHWAY_OPS_INL_H_
#else
#define SEQATTN_SIMD_HIGHWAY_OPS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace seqattn::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

struct FloatOps {
  using D = hn::ScalableTag<float>;
  using V = hn::Vec<D>;
  using M = hn::Mask<D>;
  static constexpr size_t kLanes = hn::MaxLanes(D());
  // Vector registers of the target: the blocking table sizes its accumulators by it.
  static constexpr size_t kRegisters = HWY_TARGET <= HWY_AVX3 ? 32 : 16;

  static HWY_INLINE V Zero() { return hn::Zero(D()); }
  static HWY_INLINE V Set(float x) { return hn::Set(D(), x); }
  // Lane i holds i.
  static HWY_INLINE V Iota() { return hn::Iota(D(), 0.0f); }
  static HWY_INLINE V Load(const float* HWY_RESTRICT aligned) { return hn::Load(D(), aligned); }
  static HWY_INLINE void Store(V v, float* HWY_RESTRICT aligned) { hn::Store(v, D(), aligned); }
  static HWY_INLINE V LoadU(const float* p) { return hn::LoadU(D(), p); }
  static HWY_INLINE void StoreU(V v, float* p) { hn::StoreU(v, D(), p); }
  // a·b + c.
  static HWY_INLINE V MulAdd(V a, V b, V c) { return hn::MulAdd(a, b, c); }
  static HWY_INLINE V Add(V a, V b) { return hn::Add(a, b); }
  static HWY_INLINE V Sub(V a, V b) { return hn::Sub(a, b); }
  static HWY_INLINE V Mul(V a, V b) { return hn::Mul(a, b); }
  static HWY_INLINE V Max(V a, V b) { return hn::Max(a, b); }
  static HWY_INLINE M Lt(V a, V b) { return hn::Lt(a, b); }
  static HWY_INLINE M Ge(V a, V b) { return hn::Ge(a, b); }
  static HWY_INLINE M And(M a, M b) { return hn::And(a, b); }
  static HWY_INLINE V Select(M mask, V yes, V no) { return hn::IfThenElse(mask, yes, no); }
  static HWY_INLINE float ReduceMax(V v) { return hn::GetLane(hn::MaxOfLanes(D(), v)); }
  static HWY_INLINE float ReduceSum(V v) { return hn::GetLane(hn::SumOfLanes(D(), v)); }
  // 2^n from t = n + 1.5·2^23 (n an integer in [-127, 0] held in t's low mantissa bits):
  // t's bits are 0x4B400000 + n; rebias to n + 127 and move it into the exponent field.
  static HWY_INLINE V Pow2FromShiftedInteger(V t) {
    const hn::RebindToSigned<D> di;
    const auto biased = hn::Add(hn::BitCast(di, t), hn::Set(di, 127 - 0x4B400000));
    return hn::BitCast(D(), hn::ShiftLeft<23>(biased));
  }
};

}  // namespace seqattn::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
