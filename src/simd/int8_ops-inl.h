// The vector operations of an int8 KV cache's integer products (Q·Kᵀ over key quads, P·V over
// value pairs, src/kernel/decode/int8_products-inl.h), for the target being compiled. Two
// families give the same exact int32 sums:
// - MaddQuadOps / MaddPairOps (every target but the one-lane SCALAR): bytes sign-extended to
//   int16 and multiplied in pairs by Highway's ReorderWidenMulAccumulate, which is one pmaddwd
//   on x86 (the two products of each 32-bit lane added). One instruction makes 2·L products.
//   Elsewhere (EMU128, which clang compiles as the x86 fallback; NEON, SVE) it leaves part of
//   the products in its second sum, which RearrangeToOddPlusEven adds back.
// - QuadOps / PairOps (SCALAR, whose 32-bit lane holds no pair of 16-bit lanes; tested there
//   only): each byte moved to its own int32 lane and multiplied by vpmulld
//   (or its emulation). One instruction makes L products. On one Zen 3 thread (AVX2, no VNNI; S_k
//   32768, H 32, H_kv 8, D 128) these ran the int8 decode step in 16.1-16.2 ms, slower than a bf16
//   cache (14.6-15.2 ms); the pairs in 8.8-8.9 ms with AVX2's 16-key tiles (7.9-8.1 with the
//   worker's 64-key int8 tiles, alternating runs).
// Int8QuadOps / Int8PairOps name the family a target's kernels use. The kernels take the query
// and the weights in the family's own factor form (QueryFactors): the pairs need q's bytes
// regrouped, which the worker does once per row tile, not per key tile.

// Per-target include guard, toggled by foreach_target.h.
#if defined(SEQATTN_SIMD_INT8_OPS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_SIMD_INT8_OPS_INL_H_
#undef SEQATTN_SIMD_INT8_OPS_INL_H_
#else
#define SEQATTN_SIMD_INT8_OPS_INL_H_
#endif

#include <hwy/highway.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "src/simd/highway_ops-inl.h"

HWY_BEFORE_NAMESPACE();
namespace seqattn::simd::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// int32 lanes holding exact integer sums of int8 products: what every family shares.
struct Int32Ops {
  using D = hn::ScalableTag<std::int32_t>;
  using V = hn::Vec<D>;
  using DF = hn::Rebind<float, D>;
  static constexpr size_t kLanes = hn::MaxLanes(D());
  static constexpr size_t kRegisters = FloatOps::kRegisters;  // sizes the passes

  static HWY_INLINE V Zero() { return hn::Zero(D()); }
  // The sums as floats (rounded to nearest, as cvtdq2ps does: exact below 2^24).
  static HWY_INLINE void StoreFloat(V v, float* HWY_RESTRICT aligned) {
    hn::Store(hn::ConvertTo(DF(), v), DF(), aligned);
  }
  // kLanes keys' quads (4 bytes each), any alignment, one key per int32 lane.
  static HWY_INLINE V LoadLanes(const std::int8_t* p) {
    return hn::LoadU(D(), reinterpret_cast<const std::int32_t*>(p));
  }
  // A factor (of a query quad or a pair of weights, in the family's form) in every lane.
  static HWY_INLINE V Factor(std::int32_t f) { return hn::Set(D(), f); }
  // Byte kByte (0 = bits 0-7) of each lane, sign-extended: moved to the top, shifted back down
  // arithmetically.
  template <int kByte>
  static HWY_INLINE V SignedByte(V v) {
    return hn::ShiftRight<24>(hn::ShiftLeft<24 - 8 * kByte>(v));
  }
};

// The probabilities' quantisation to int16 that every P·V path shares.
struct PairWeights : Int32Ops {
  // out[i] = round-to-nearest-even(w[i] · mul) as int16 for kLanes weights in [0, 32767.5):
  // the probabilities of an int8 cache's P·V. Rounded by adding and subtracting 1.5·2^23 (IEEE
  // adds, so every target rounds the same way; Highway's scalar NearestInt adds 0.5 instead,
  // which can differ next to a tie), then converted exactly.
  static HWY_INLINE void QuantizeWeights(const float* HWY_RESTRICT w, float mul,
                                         std::int16_t* HWY_RESTRICT out) {
    const hn::Rebind<std::int16_t, D> d16;
    const auto magic = hn::Set(DF(), 12582912.0f);
    const auto scaled = hn::Mul(hn::Load(DF(), w), hn::Set(DF(), mul));
    const auto rounded = hn::Sub(hn::Add(scaled, magic), magic);
    hn::StoreU(hn::DemoteTo(d16, hn::ConvertTo(D(), rounded)), d16, out);
  }
};

// Over int8 key quads (an int8 KV cache stores 4 consecutive d of one key per 32-bit lane,
// src/kernel/decode/packed_kv.hpp). Byte i of a lane, sign-extended, is multiplied by query
// element i: 4 parts per quad, one int32 factor (q's byte) each. |q|, |k| <= 127, so a product and
// the sum over any D stay exact modulo 2^32 and exact outright for D < 2^17.
struct QuadOps : Int32Ops {
  static constexpr size_t kParts = 4;
  static HWY_INLINE void Split(V quad, V* HWY_RESTRICT part) {
    part[0] = SignedByte<0>(quad);
    part[1] = SignedByte<1>(quad);
    part[2] = SignedByte<2>(quad);
    part[3] = SignedByte<3>(quad);
  }
  // The factors of query quad q4 (4 bytes), one per part.
  static HWY_INLINE void QueryFactors(const std::int8_t* q4, std::int32_t* HWY_RESTRICT f) {
    for (size_t i = 0; i < 4; ++i) f[i] = q4[i];
  }
  // acc + part · factor.
  static HWY_INLINE V MulAddPart(V part, V factor, V acc) {
    return hn::Add(acc, hn::Mul(part, factor));
  }
};

// Over int8 value pairs (an int8 KV cache stores tokens t and t+1 of one column in one 16-bit
// lane): the pair's two bytes, sign-extended, each times its weight.
struct PairOps : PairWeights {
  static constexpr size_t kParts = 2;
  // kLanes columns' pairs (2 bytes each, any alignment), one column per lane: key t (bits 0-7)
  // and key t+1 (bits 8-15).
  static HWY_INLINE V Load(const std::int8_t* p) {
    const hn::Rebind<std::int16_t, D> d16;
    return hn::PromoteTo(D(), hn::LoadU(d16, reinterpret_cast<const std::int16_t*>(p)));
  }
  static HWY_INLINE void Split(V pair, V* HWY_RESTRICT part) {
    part[0] = SignedByte<0>(pair);
    part[1] = SignedByte<1>(pair);
  }
  // acc + part[0] · w2[0] + part[1] · w2[1]: the pair's keys times their weights.
  static HWY_INLINE V MulAddPair(const V* HWY_RESTRICT part, const std::int16_t* w2, V acc) {
    acc = hn::Add(acc, hn::Mul(part[0], Factor(w2[0])));
    return hn::Add(acc, hn::Mul(part[1], Factor(w2[1])));
  }
};

#if HWY_TARGET != HWY_SCALAR  // the pairs need two 16-bit lanes in each 32-bit lane

// acc + a[2i]·b[2i] + a[2i+1]·b[2i+1] for int16 lanes a, b and int32 lanes acc. Highway's
// contract splits the products over two sums in a target's own order and has
// RearrangeToOddPlusEven make lane i the pair's sum; on x86 the first sum is the whole pmaddwd
// and the rearrangement returns it, so this is one pmaddwd and one add there.
HWY_INLINE Int32Ops::V MulAddInt16Pairs(Int32Ops::V a, Int32Ops::V b, Int32Ops::V acc) {
  const hn::Repartition<std::int16_t, Int32Ops::D> d16;
  Int32Ops::V odd = Int32Ops::Zero();
  const Int32Ops::V even = hn::ReorderWidenMulAccumulate(
      Int32Ops::D(), hn::BitCast(d16, a), hn::BitCast(d16, b), Int32Ops::Zero(), odd);
  return hn::Add(acc, hn::RearrangeToOddPlusEven(even, odd));
}

// Two int16 as the 32-bit pattern pmaddwd reads as a pair: lo in bits 0-15, hi in 16-31.
HWY_INLINE std::int32_t Int16Pair(std::int32_t lo, std::int32_t hi) {
  return static_cast<std::int32_t>((static_cast<std::uint32_t>(hi) << 16) |
                                   (static_cast<std::uint32_t>(lo) & 0xFFFFu));
}

// Key quads in two parts of int16 pairs: the 16-bit halves of a quad lane are (b0, b1) and
// (b2, b3); shifting each left and back right by 8 sign-extends the low bytes, giving the pairs
// (b0, b2), and shifting right alone the high ones, (b1, b3). The query factors pair q's bytes
// the same way, so one pmaddwd per part adds two of a key's four products.
struct MaddQuadOps : Int32Ops {
  static constexpr size_t kParts = 2;
  static HWY_INLINE void Split(V quad, V* HWY_RESTRICT part) {
    const hn::Repartition<std::int16_t, D> d16;
    const auto halves = hn::BitCast(d16, quad);
    part[0] = hn::BitCast(D(), hn::ShiftRight<8>(hn::ShiftLeft<8>(halves)));
    part[1] = hn::BitCast(D(), hn::ShiftRight<8>(halves));
  }
  static HWY_INLINE void QueryFactors(const std::int8_t* q4, std::int32_t* HWY_RESTRICT f) {
    f[0] = Int16Pair(q4[0], q4[2]);
    f[1] = Int16Pair(q4[1], q4[3]);
  }
  static HWY_INLINE V MulAddPart(V part, V factor, V acc) {
    return MulAddInt16Pairs(part, factor, acc);
  }
};

// Value pairs sign-extended to int16 in place (pmovsxbw): lane c holds (v[t][c], v[t+1][c]),
// and the pair's two int16 weights, read as one int32, are its factor.
struct MaddPairOps : PairWeights {
  static constexpr size_t kParts = 1;
  static HWY_INLINE V Load(const std::int8_t* p) {
    const hn::Repartition<std::int16_t, D> d16;
    return hn::BitCast(D(),
                       hn::PromoteTo(d16, hn::LoadU(hn::Rebind<std::int8_t, decltype(d16)>(), p)));
  }
  static HWY_INLINE void Split(V pair, V* HWY_RESTRICT part) { part[0] = pair; }
  static HWY_INLINE V MulAddPair(const V* HWY_RESTRICT part, const std::int16_t* w2, V acc) {
    std::int32_t both;
    std::memcpy(&both, w2, sizeof(both));  // w2[0] in the low half, as pmaddwd pairs them
    return MulAddInt16Pairs(part[0], Factor(both), acc);
  }
};

using Int8QuadOps = MaddQuadOps;
using Int8PairOps = MaddPairOps;

#else

using Int8QuadOps = QuadOps;
using Int8PairOps = PairOps;

#endif  // HWY_TARGET != HWY_SCALAR

}  // namespace seqattn::simd::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#endif  // per-target include guard
