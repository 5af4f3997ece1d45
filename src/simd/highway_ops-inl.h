// The Highway backend of the SIMD primitive layer: the few vector operations the kernels are
// written over, for the target being compiled (xsimd_ops.hpp is the other backend). Kernels
// take the ops type as a template parameter, so their source is shared by both backends and
// only this file names hn:: for them (int8_ops-inl.h has the int8 cache's integer ops, which
// only the Highway backend has).

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

#include "seqattn/half.hpp"

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
  // kLanes 16-bit elements widened exactly to fp32 (any alignment). bf16 is the top half of
  // a float: a shift. f16 uses F16C (vcvtph2ps) on AVX2 and AVX-512; the older targets
  // rebuild the float from its fields with integer operations (Highway 1.0.3's own fallback
  // maps f16 Inf and NaN to finite values, so it is not used).
  static HWY_INLINE V LoadWide(const bfloat16* p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const auto bits = hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p));
    return hn::BitCast(D(), hn::ShiftLeft<16>(hn::PromoteTo(du, bits)));
  }
  // int8 (an int8 KV cache): sign-extended to int32 and converted, exact.
  static HWY_INLINE V LoadWide(const std::int8_t* p) {
    const hn::Rebind<std::int8_t, D> d8;
    const hn::RebindToSigned<D> di;
    return hn::ConvertTo(D(), hn::PromoteTo(di, hn::LoadU(d8, p)));
  }
  static HWY_INLINE V LoadWide(const float16* p) {
    if constexpr (HWY_TARGET <= HWY_AVX2) {
      const hn::Rebind<hwy::float16_t, D> dh;
      return hn::PromoteTo(D(), hn::LoadU(dh, reinterpret_cast<const hwy::float16_t*>(p)));
    } else {
      return WidenHalfBits(p);
    }
  }
  static HWY_INLINE V WidenHalfBits(const float16* p) {
    const hn::Rebind<uint16_t, D> d16;
    const hn::RebindToUnsigned<D> du;
    const hn::RebindToSigned<D> di;
    const auto h = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(p)));
    const auto sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
    const auto exponent = hn::And(hn::ShiftRight<10>(h), hn::Set(du, 0x1fu));
    const auto mantissa = hn::And(h, hn::Set(du, 0x3ffu));
    const auto normal = hn::Or(hn::ShiftLeft<23>(hn::Add(exponent, hn::Set(du, 112u))),
                               hn::ShiftLeft<13>(mantissa));
    const auto special = hn::Or(hn::Set(du, 0x7f800000u), hn::ShiftLeft<13>(mantissa));
    const auto subnormal = hn::BitCast(
        du, hn::Mul(hn::ConvertTo(D(), hn::BitCast(di, mantissa)), hn::Set(D(), 0x1p-24f)));
    const auto magnitude =
        hn::IfThenElse(hn::Eq(exponent, hn::Zero(du)), subnormal,
                       hn::IfThenElse(hn::Eq(exponent, hn::Set(du, 0x1fu)), special, normal));
    return hn::BitCast(D(), hn::Or(sign, magnitude));
  }
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
  // rows[0, kLanes) as a kLanes x kLanes matrix, transposed in place (lane j of rows[i]
  // becomes lane i of rows[j]). log2(kLanes) rounds of ConcatEven/ConcatOdd over pairs of rows:
  // each round rotates the bits of (row, lane) one place, so the rounds swap row and lane.
  // 64 two-source shuffles for a 16 x 16 block against 256 scalar loads and stores (the flash
  // kernel's K packing, TransposeKeyRows). A template only so that the 1-lane target, which
  // has no ConcatEven, never instantiates the rounds.
  template <class DV = D>
  static HWY_INLINE void TransposeSquare(hn::Vec<DV>* HWY_RESTRICT rows) {
    constexpr size_t n = hn::MaxLanes(DV());
    if constexpr (n > 1) {
      hn::Vec<DV> next[n];
      for (size_t round = 1; round < n; round *= 2) {
        for (size_t i = 0; i < n / 2; ++i) {
          next[i] = ConcatEven(DV(), rows[2 * i + 1], rows[2 * i]);
          next[i + n / 2] = ConcatOdd(DV(), rows[2 * i + 1], rows[2 * i]);
        }
        for (size_t i = 0; i < n; ++i) rows[i] = next[i];
      }
    }
  }
};

}  // namespace seqattn::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
