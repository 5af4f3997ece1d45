// The xsimd backend of the SIMD primitive layer: the same operations as FloatOps in
// highway_ops-inl.h over xsimd::batch<float, Arch>. Included only by translation units
// compiled for Arch (per-source -m flags), so the batch type is complete there.
#pragma once

#include <xsimd/xsimd.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace seqattn::simd {

template <class Arch>
struct XsimdFloatOps {
  using V = xsimd::batch<float, Arch>;
  using M = xsimd::batch_bool<float, Arch>;
  using VI = xsimd::batch<std::int32_t, Arch>;
  static constexpr size_t kLanes = V::size;
  static constexpr size_t kRegisters = kLanes >= 16 ? 32 : 16;

  static V Zero() { return V(0.0f); }
  static V Set(float x) { return V(x); }
  static V Iota() {
    alignas(64) static constexpr float kIndices[16] = {0, 1, 2,  3,  4,  5,  6,  7,
                                                       8, 9, 10, 11, 12, 13, 14, 15};
    static_assert(kLanes <= 16, "kIndices covers the widest batch");
    return V::load_aligned(kIndices);
  }
  static V Load(const float* aligned) { return V::load_aligned(aligned); }
  static void Store(V v, float* aligned) { v.store_aligned(aligned); }
  static V LoadU(const float* p) { return V::load_unaligned(p); }
  static void StoreU(V v, float* p) { v.store_unaligned(p); }
  static V MulAdd(V a, V b, V c) { return xsimd::fma(a, b, c); }
  static V Add(V a, V b) { return a + b; }
  static V Sub(V a, V b) { return a - b; }
  static V Mul(V a, V b) { return a * b; }
  static V Max(V a, V b) { return xsimd::max(a, b); }
  static M Lt(V a, V b) { return a < b; }
  static M Ge(V a, V b) { return a >= b; }
  static M And(M a, M b) { return a & b; }
  static V Select(M mask, V yes, V no) { return xsimd::select(mask, yes, no); }
  // xsimd 8 has no horizontal max, and its AVX-512F hadd uses an AVX-512DQ instruction (which
  // the avx512f arch does not promise); both run once per row and tile at most, so a spill and
  // a scalar pass cost little.
  static float ReduceMax(V v) {
    alignas(64) float lanes[kLanes];
    v.store_aligned(lanes);
    float m = lanes[0];
    for (size_t i = 1; i < kLanes; ++i) m = std::max(m, lanes[i]);
    return m;
  }
  static float ReduceSum(V v) {
    alignas(64) float lanes[kLanes];
    v.store_aligned(lanes);
    float sum = 0.0f;
    for (size_t i = 0; i < kLanes; ++i) sum += lanes[i];
    return sum;
  }
  // See FloatOps::Pow2FromShiftedInteger.
  static V Pow2FromShiftedInteger(V t) {
    const VI biased = xsimd::bitwise_cast<VI>(t) + VI(127 - 0x4B400000);
    return xsimd::bitwise_cast<V>(biased << 23);
  }
  // See FloatOps::TransposeSquare. xsimd 8 has no lane-crossing even/odd concatenation, so
  // the block goes through memory: the scalar transpose the Highway backend replaces.
  static void TransposeSquare(V* rows) {
    alignas(64) float block[kLanes * kLanes];
    for (size_t i = 0; i < kLanes; ++i) rows[i].store_aligned(block + i * kLanes);
    for (size_t i = 0; i < kLanes; ++i) {
      alignas(64) float column[kLanes];
      for (size_t j = 0; j < kLanes; ++j) column[j] = block[j * kLanes + i];
      rows[i] = V::load_aligned(column);
    }
  }
};

}  // namespace seqattn::simd
