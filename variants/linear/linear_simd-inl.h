// Per-target element kernels of linear attention: feature maps, FAVOR+ stabilisers and the
// final numerator/denominator scaling. The O(S·m·D) work is in the tile kernel
// (linear_tiles-inl.h); these are the O(S·m) passes around it, vectorised along the
// contiguous (feature or value) axis.
// Included once per Highway target by linear_simd.cc.
#if defined(SEQATTN_VARIANTS_LINEAR_LINEAR_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef SEQATTN_VARIANTS_LINEAR_LINEAR_SIMD_INL_H_
#undef SEQATTN_VARIANTS_LINEAR_LINEAR_SIMD_INL_H_
#else
#define SEQATTN_VARIANTS_LINEAR_LINEAR_SIMD_INL_H_
#endif

#include <hwy/contrib/math/math-inl.h>
#include <hwy/highway.h>

#include <algorithm>
#include <cstdint>
#include <limits>

#include "src/runtime/positional.hpp"
#include "variants/linear/linear_simd.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::linear_simd {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using FullTag = hn::ScalableTag<float>;
// 2^-126: below it, 1/x overflows float.
constexpr float kSmallestSafeDenominator = 1.1754944e-38f;
using OneTag = hn::CappedTag<float, 1>;

// The blocking table of this target. The causal chunk trades the intra-chunk quadratic part
// (2·C·(m + D_v) FLOPs per token) against the tile kernel's efficiency (depth C in the
// intra-chunk product): four vectors keep it on whole tiles while staying below the 2·m·D_v
// state work per token for m = D_v = 64. A causal segment (8 chunks) is the unit threads share:
// its stored features, values and chunk sums (3 × 128 KB at m = D_v = 64) stay in L2 between
// its two phases. Key and query blocks keep a block's features, values and numerators in L1
// next to the 16 KB summary (64 keys, 32 queries: at S = 65536 these beat 128/64 and 256/128
// by 5-15%, within this machine's noise of ±10%).
constexpr Blocking TargetBlocking() {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::MaxLanes(FullTag()));
  const std::int64_t chunk = std::max<std::int64_t>(32, 4 * lanes);
  return Blocking{/*causal_chunk=*/chunk, /*segment=*/8 * chunk, /*key_block=*/64,
                  /*query_block=*/32};
}

// Applies fn to every element of x[0, n) in place: whole vectors, then single lanes, so that
// the tail goes through exactly the same arithmetic.
template <class Fn>
HWY_INLINE void TransformInPlace(float* HWY_RESTRICT x, std::int64_t n, const Fn& fn) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(fn(d, hn::LoadU(d, x + i)), d, x + i);
  const OneTag d1;
  for (; i < n; ++i) hn::StoreU(fn(d1, hn::LoadU(d1, x + i)), d1, x + i);
}

// Sum or max over x[0, n) into a scalar, with a vector accumulator for the body.
template <class Combine>
HWY_INLINE float Reduce(const float* HWY_RESTRICT x, std::int64_t n, float init,
                        const Combine& combine) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  auto acc = hn::Set(d, init);
  std::int64_t i = 0;
  for (; i + lanes <= n; i += lanes) acc = combine(acc, hn::LoadU(d, x + i));
  const OneTag d1;
  auto acc1 = hn::Set(d1, init);
  for (; i < n; ++i) acc1 = combine(acc1, hn::LoadU(d1, x + i));
  // Both accumulators fold to scalars through the same combine rule.
  HWY_ALIGN float lanes_out[hn::MaxLanes(FullTag())];
  hn::Store(acc, d, lanes_out);
  float result = hn::GetLane(acc1);
  for (std::int64_t l = 0; l < lanes; ++l) {
    result = hn::GetLane(combine(hn::Set(d1, result), hn::Set(d1, lanes_out[l])));
  }
  return result;
}

// e^x for x <= 0 (elu's negative branch) in 13 operations where Highway's Exp takes about 25
// (it handles the whole range): 2^(x·log2 e) split into 2^n · 2^f, |f| <= 1/2, 2^f by its
// degree-6 Taylor series in f·ln 2 (relative error <= 1.8e-7, 3 ulp), 2^n added to the
// exponent field. x below -125·ln 2 (e^x < 2.4e-38) gives 2^-125·2^f instead of a subnormal
// or 0: an absolute error under 3e-38 in a feature that enters sums of features >= e^x.
// The map took 30% of non-causal elu+1 at S = 65536 with Exp (compute-bound, not memory).
template <class D, class V>
HWY_INLINE V ExpNonPositive(D d, V x) {
  const hn::RebindToSigned<D> di;
  const V t = hn::Max(hn::Mul(x, hn::Set(d, 1.44269504f)), hn::Set(d, -125.0f));
  const V n = hn::Round(t);
  const V f = hn::Sub(t, n);
  // ln2^k / k! for k = 6 … 0.
  V p = hn::Set(d, 1.5403530e-4f);
  p = hn::MulAdd(p, f, hn::Set(d, 1.3333558e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 9.6181291e-3f));
  p = hn::MulAdd(p, f, hn::Set(d, 5.5504109e-2f));
  p = hn::MulAdd(p, f, hn::Set(d, 2.4022651e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 6.9314718e-1f));
  p = hn::MulAdd(p, f, hn::Set(d, 1.0f));
  const auto exponent = hn::ShiftLeft<23>(hn::ConvertTo(di, n));
  return hn::BitCast(d, hn::Add(hn::BitCast(di, p), exponent));
}

// φ(v · mul) for the map `kind`. Both maps select with a comparison that is false for NaN, so
// a NaN lane stays NaN (Max and Min may return either operand for NaN, depending on the
// target).
template <class D, class V>
HWY_INLINE V MapVector(D d, V v, float mul, RowMap kind) {
  v = hn::Mul(v, hn::Set(d, mul));
  if (kind == RowMap::kRelu) return hn::IfThenZeroElse(hn::Lt(v, hn::Zero(d)), v);
  if (kind == RowMap::kScale) return v;
  // elu(x) + 1; the exponential of a positive (or NaN) lane is discarded, so its input is 0
  // there (a NaN would reach a float-to-int conversion, undefined on the scalar targets).
  const auto negative = hn::Le(v, hn::Zero(d));
  const auto e = ExpNonPositive(d, hn::IfThenElseZero(negative, v));
  return hn::IfThenElse(negative, e, hn::Add(v, hn::Set(d, 1.0f)));
}

// dst[r, c] = φ(src[r·row_stride + c·col_stride] · mul) for the map `kind`, in one pass over
// contiguous rows (the common case) so that the block is read and written once.
void ScaledMapRows(const float* HWY_RESTRICT src, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                   float* HWY_RESTRICT dst) {
  const FullTag d;
  const OneTag d1;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * row_stride;
    float* out = dst + r * cols;
    std::int64_t c = 0;
    if (col_stride == 1) {
      for (; c + lanes <= cols; c += lanes) {
        hn::StoreU(MapVector(d, hn::LoadU(d, in + c), mul, kind), d, out + c);
      }
      for (; c < cols; ++c)
        hn::StoreU(MapVector(d1, hn::LoadU(d1, in + c), mul, kind), d1, out + c);
      continue;
    }
    for (; c < cols; ++c) {
      hn::StoreU(MapVector(d1, hn::Set(d1, in[c * col_stride]), mul, kind), d1, out + c);
    }
  }
}

// ScaledMapRows with each row rotated by RoPE (row first_row + r of q or k, at its position)
// after the multiplication by `mul` and before the map: rotate_row_at writes the row into
// dst, where it is still in L1 when the map rewrites it, so q and k are read once as without
// RoPE.
void RotatedMapRows(const float* HWY_RESTRICT src, std::int64_t rows, std::int64_t cols,
                    std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                    const RopeTables& rope, RopeSide side, std::int64_t first_row,
                    float* HWY_RESTRICT dst) {
  const RopeRows& tables = rope.rows();
  for (std::int64_t r = 0; r < rows; ++r) {
    float* out = dst + r * cols;
    rotate_row_at(src + r * row_stride, col_stride, cols, mul, rope, tables, side, first_row + r,
                  out);
    if (kind != RowMap::kScale) {
      TransformInPlace(out, cols, [kind](auto dd, auto v) { return MapVector(dd, v, 1.0f, kind); });
    }
  }
}

void HalfSquaredNorms(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld, float* HWY_RESTRICT out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    float sum = 0.0f;
    const FullTag d;
    const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
    auto acc = hn::Zero(d);
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      const auto v = hn::LoadU(d, row + c);
      acc = hn::MulAdd(v, v, acc);
    }
    sum = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; c < cols; ++c) sum += row[c] * row[c];
    out[r] = 0.5f * sum;
  }
}

void RowMax(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
            float* HWY_RESTRICT out) {
  for (std::int64_t r = 0; r < rows; ++r) {
    out[r] = Reduce(x + r * ld, cols, -std::numeric_limits<float>::infinity(),
                    [](auto a, auto b) { return hn::Max(a, b); });
  }
}

void ColumnMaxShifted(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols,
                      std::int64_t ld, const float* HWY_RESTRICT row_shift,
                      float* HWY_RESTRICT col_max) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    const auto shift = hn::Set(d, row_shift[r]);
    std::int64_t c = 0;
    // A NaN log-feature (a NaN key) leaves the maximum as it was, like std::max below, so that
    // it poisons only its own features, which the queries that cannot see it never read.
    for (; c + lanes <= cols; c += lanes) {
      const auto v = hn::Sub(hn::LoadU(d, row + c), shift);
      const auto acc = hn::LoadU(d, col_max + c);
      hn::StoreU(hn::IfThenElse(hn::Gt(v, acc), v, acc), d, col_max + c);
    }
    for (; c < cols; ++c) col_max[c] = std::max(col_max[c], row[c] - row_shift[r]);
  }
}

// Highway's Exp returns 0 for NaN (its underflow test is false for NaN): FAVOR+ features keep
// NaN instead, so that a NaN query or key reaches the rows that see it.
template <class D, class V>
HWY_INLINE V ExpKeepingNaN(D d, V v) {
  const auto nan = hn::IsNaN(v);
  // Exp's own float-to-int conversion must not see NaN or -Inf (undefined behaviour on the
  // scalar targets): the arguments here are <= 0, and e^-200 is 0 in float as e^-Inf is.
  const V safe = hn::Max(hn::IfThenZeroElse(nan, v), hn::Set(d, -200.0f));
  return hn::IfThenElse(nan, v, hn::Exp(d, safe));
}

void ExpShiftedRows(float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                    const float* HWY_RESTRICT row_shift, const float* HWY_RESTRICT col_shift) {
  const FullTag d;
  const OneTag d1;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    const float shift = row_shift[r];
    if (col_shift == nullptr) {
      TransformInPlace(row, cols, [shift](auto dd, auto v) {
        return ExpKeepingNaN(dd, hn::Sub(v, hn::Set(dd, shift)));
      });
      continue;
    }
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      const auto v =
          hn::Sub(hn::Sub(hn::LoadU(d, row + c), hn::Set(d, shift)), hn::LoadU(d, col_shift + c));
      hn::StoreU(ExpKeepingNaN(d, v), d, row + c);
    }
    for (; c < cols; ++c) {
      const auto v = hn::Sub(hn::Sub(hn::LoadU(d1, row + c), hn::Set(d1, shift)),
                             hn::LoadU(d1, col_shift + c));
      hn::StoreU(ExpKeepingNaN(d1, v), d1, row + c);
    }
  }
}

void AddToRows(float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
               const float* HWY_RESTRICT vec) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    float* row = x + r * ld;
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      hn::StoreU(hn::Add(hn::LoadU(d, row + c), hn::LoadU(d, vec + c)), d, row + c);
    }
    for (; c < cols; ++c) row[c] += vec[c];
  }
}

void ScaleRows(float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
               const float* HWY_RESTRICT factors) {
  for (std::int64_t r = 0; r < rows; ++r) {
    const float f = factors[r];
    TransformInPlace(x + r * ld, cols, [f](auto d, auto v) { return hn::Mul(v, hn::Set(d, f)); });
  }
}

void AddColumnSums(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols,
                   std::int64_t ld, float* HWY_RESTRICT sums) {
  const FullTag d;
  const OneTag d1;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  std::int64_t c = 0;
  for (; c + lanes <= cols; c += lanes) {
    auto acc = hn::LoadU(d, sums + c);
    for (std::int64_t r = 0; r < rows; ++r) acc = hn::Add(acc, hn::LoadU(d, x + r * ld + c));
    hn::StoreU(acc, d, sums + c);
  }
  for (; c < cols; ++c) {
    auto acc = hn::LoadU(d1, sums + c);
    for (std::int64_t r = 0; r < rows; ++r) acc = hn::Add(acc, hn::LoadU(d1, x + r * ld + c));
    hn::StoreU(acc, d1, sums + c);
  }
}

void AddRowDots(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                const float* HWY_RESTRICT y, float* HWY_RESTRICT out) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    auto acc = hn::Zero(d);
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      acc = hn::MulAdd(hn::LoadU(d, row + c), hn::LoadU(d, y + c), acc);
    }
    float sum = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; c < cols; ++c) sum += row[c] * y[c];
    out[r] += sum;
  }
}

void AddRowSums(const float* HWY_RESTRICT x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                float* HWY_RESTRICT out) {
  // SumOfLanes folds in log2(lanes) steps (Reduce's lane-by-lane fold took 4% of causal elu+1).
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = x + r * ld;
    auto acc = hn::Zero(d);
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) acc = hn::Add(acc, hn::LoadU(d, row + c));
    float sum = hn::GetLane(hn::SumOfLanes(d, acc));
    for (; c < cols; ++c) sum += row[c];
    out[r] += sum;
  }
}

bool AllFinite(const float* HWY_RESTRICT x, std::int64_t n) {
  // x·0 is 0 for finite x and NaN for Inf or NaN; the sum keeps any NaN.
  const float sum = Reduce(x, n, 0.0f, [](auto a, auto b) {
    return hn::MulAdd(b, hn::Zero(hn::DFromV<decltype(b)>()), a);
  });
  return sum == 0.0f;
}

void DivideRows(const float* HWY_RESTRICT num, std::int64_t rows, std::int64_t cols,
                std::int64_t ld, const float* HWY_RESTRICT den, float epsilon,
                bool zero_when_den_zero, float* HWY_RESTRICT out, std::int64_t out_row_stride,
                std::int64_t out_col_stride) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  for (std::int64_t r = 0; r < rows; ++r) {
    const float guarded = zero_when_den_zero ? den[r] : den[r] + epsilon;
    const float* src = num + r * ld;
    float* dst = out + r * out_row_stride;
    // The reference's guard: a non-positive denominator (no visible key) gives a zero row; a
    // NaN one (a NaN among the visible keys or the query) gives a NaN row.
    if (guarded <= 0.0f) {
      for (std::int64_t c = 0; c < cols; ++c) dst[c * out_col_stride] = 0.0f;
      continue;
    }
    // Multiplying by the reciprocal (<= 1.5 ulp) is cheaper than dividing every element; a
    // denominator so small that its reciprocal would overflow takes true divisions instead.
    const bool tiny = guarded < kSmallestSafeDenominator;
    const float inv = tiny ? 0.0f : 1.0f / guarded;
    std::int64_t c = 0;
    if (out_col_stride == 1 && !tiny) {
      const auto vinv = hn::Set(d, inv);
      for (; c + lanes <= cols; c += lanes) {
        hn::StoreU(hn::Mul(hn::LoadU(d, src + c), vinv), d, dst + c);
      }
    }
    for (; c < cols; ++c) dst[c * out_col_stride] = tiny ? src[c] / guarded : src[c] * inv;
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace seqattn::detail::linear_simd
HWY_AFTER_NAMESPACE();

#endif  // include guard
