// Vectorised 2^x for the softmax, written once over a SIMD ops type (FloatOps of
// highway_ops-inl.h or XsimdFloatOps of xsimd_ops.hpp). The flash kernel keeps its scores in
// log2 units (queries are pre-multiplied by scale·log2(e)), so exp becomes exp2 and needs no
// range-reduction multiply.
//
// Accuracy: x = n + f with n = round(x), |f| <= 1/2; 2^f is a degree-6 polynomial
// interpolating 2^f at the Chebyshev nodes of [-1/2, 1/2] (max relative error 1.9e-8 in exact
// arithmetic); with float Horner rounding the result is within 2.5e-7 relative of 2^x
// (about 2 ulp) for x in [-126, 0], which the tests check against std::exp2. Inputs below
// -126 (including -inf) give exactly 0 instead of a denormal, an absolute error below 1.2e-38.
// NaN propagates. Inputs above 0 are not needed by the softmax (scores minus the row max).
//
// No include guard and no namespace: a backend shell includes this once inside its
// per-target namespace and target region (after <hwy/base.h> for HWY_INLINE).

// 2^x for x <= 0 (see the accuracy note above); 0 for x below kZeroBelow (>= -126).
template <class Ops, int kZeroBelow = -126>
HWY_INLINE typename Ops::V Exp2NonPositive(typename Ops::V x) {
  static_assert(kZeroBelow >= -126 && kZeroBelow < 0);
  using V = typename Ops::V;
  // x below the floor (including -inf) becomes -127, whose biased exponent 0 gives exactly
  // 0. The floor is at least -126, not -127: x in [-126.5, -126) would round to n = -126
  // with 2^f < 1, a denormal. A compare-and-select rather than Max: Max's NaN behaviour
  // differs between targets, and a NaN score must propagate.
  x = Ops::Select(Ops::Lt(x, Ops::Set(static_cast<float>(kZeroBelow))), Ops::Set(-127.0f), x);
  // Adding 1.5·2^23 rounds x to the nearest integer n held in the low mantissa bits of t:
  // cheaper than Round + ConvertTo (which must guard against out-of-range lanes).
  const V shifter = Ops::Set(12582912.0f);
  const V t = Ops::Add(x, shifter);
  const V n = Ops::Sub(t, shifter);
  const V f = Ops::Sub(x, n);
  V p = Ops::Set(1.5461444695632573e-4f);
  p = Ops::MulAdd(p, f, Ops::Set(1.3400428177416093e-3f));
  p = Ops::MulAdd(p, f, Ops::Set(9.618056678532362e-3f));
  p = Ops::MulAdd(p, f, Ops::Set(5.550327226670846e-2f));
  p = Ops::MulAdd(p, f, Ops::Set(2.402265092228873e-1f));
  p = Ops::MulAdd(p, f, Ops::Set(6.931472067028324e-1f));
  p = Ops::MulAdd(p, f, Ops::Set(1.0f));
  return Ops::Mul(p, Ops::Pow2FromShiftedInteger(t));
}

// Exp2NonPositive over n floats (any alignment): full vectors, then the tail through a
// padded vector.
template <class Ops>
void Exp2NonPositiveSpan(const float* in, float* out, size_t n) {
  size_t i = 0;
  for (; i + Ops::kLanes <= n; i += Ops::kLanes) {
    Ops::StoreU(Exp2NonPositive<Ops>(Ops::LoadU(in + i)), out + i);
  }
  if (i == n) return;
  float tail[Ops::kLanes] = {};
  for (size_t j = i; j < n; ++j) tail[j - i] = in[j];
  Ops::StoreU(Exp2NonPositive<Ops>(Ops::LoadU(tail)), tail);
  for (size_t j = i; j < n; ++j) out[j] = tail[j - i];
}
