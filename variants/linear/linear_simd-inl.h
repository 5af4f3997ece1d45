// Per-target element kernels of linear attention: feature maps, FAVOR+ stabilisers and the
// final numerator/denominator scaling. The O(S·m·D) work is in the GEMM engine; these are the
// O(S·m) passes around it, vectorised along the contiguous (feature or value) axis.
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
// (2·C·(m + D_v) FLOPs per token) against GEMM efficiency (k = C in the intra-chunk product):
// four vectors wide keeps the intra-chunk GEMMs on whole micro-tiles while staying below the
// 2·m·D_v state work per token for m = D_v = 64. Key and query blocks only bound the workspace
// (block × m floats stay in L2).
constexpr Blocking TargetBlocking() {
  const std::int64_t lanes = static_cast<std::int64_t>(hn::MaxLanes(FullTag()));
  return Blocking{/*causal_chunk=*/std::max<std::int64_t>(32, 4 * lanes), /*key_block=*/256,
                  /*query_block=*/256};
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

// dst[r, c] = φ(src[r·row_stride + c·col_stride] · mul) for the map `kind`, in one pass over
// contiguous rows (the common case) so that the block is read and written once.
void ScaledMapRows(const float* HWY_RESTRICT src, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                   float* HWY_RESTRICT dst) {
  const FullTag d;
  const OneTag d1;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto apply = [kind, mul](auto dd, auto v) {
    v = hn::Mul(v, hn::Set(dd, mul));
    if (kind == RowMap::kRelu) return hn::Max(v, hn::Zero(dd));
    if (kind == RowMap::kScale) return v;
    // elu(x) + 1; Exp of a positive lane is discarded, so clamp it where it cannot overflow.
    const auto e = hn::Exp(dd, hn::Min(v, hn::Zero(dd)));
    return hn::IfThenElse(hn::Gt(v, hn::Zero(dd)), hn::Add(v, hn::Set(dd, 1.0f)), e);
  };
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = src + r * row_stride;
    float* out = dst + r * cols;
    std::int64_t c = 0;
    if (col_stride == 1) {
      for (; c + lanes <= cols; c += lanes) hn::StoreU(apply(d, hn::LoadU(d, in + c)), d, out + c);
      for (; c < cols; ++c) hn::StoreU(apply(d1, hn::LoadU(d1, in + c)), d1, out + c);
      continue;
    }
    for (; c < cols; ++c) hn::StoreU(apply(d1, hn::Set(d1, in[c * col_stride])), d1, out + c);
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
    for (; c + lanes <= cols; c += lanes) {
      const auto v = hn::Sub(hn::LoadU(d, row + c), shift);
      hn::StoreU(hn::Max(hn::LoadU(d, col_max + c), v), d, col_max + c);
    }
    for (; c < cols; ++c) col_max[c] = std::max(col_max[c], row[c] - row_shift[r]);
  }
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
        return hn::Exp(dd, hn::Sub(v, hn::Set(dd, shift)));
      });
      continue;
    }
    std::int64_t c = 0;
    for (; c + lanes <= cols; c += lanes) {
      const auto v =
          hn::Sub(hn::Sub(hn::LoadU(d, row + c), hn::Set(d, shift)), hn::LoadU(d, col_shift + c));
      hn::StoreU(hn::Exp(d, v), d, row + c);
    }
    for (; c < cols; ++c) {
      const auto v = hn::Sub(hn::Sub(hn::LoadU(d1, row + c), hn::Set(d1, shift)),
                             hn::LoadU(d1, col_shift + c));
      hn::StoreU(hn::Exp(d1, v), d1, row + c);
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
  for (std::int64_t r = 0; r < rows; ++r) {
    out[r] += Reduce(x + r * ld, cols, 0.0f, [](auto a, auto b) { return hn::Add(a, b); });
  }
}

// c[i, :] = beta·c[i, :] + Σ_p a[i, p]·b[p, :] for i < n: a row-times-matrix product for the
// few-row blocks of token-by-token decoding, where packing for the GEMM engine costs more than

// out[0, cols) += w·row[0, cols): one row of the small products below.
HWY_INLINE void AxpyRow(float w, const float* HWY_RESTRICT row, std::int64_t cols,
                        float* HWY_RESTRICT out) {
  const FullTag d;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(d));
  const auto vw = hn::Set(d, w);
  std::int64_t j = 0;
  for (; j + lanes <= cols; j += lanes) {
    hn::StoreU(hn::MulAdd(vw, hn::LoadU(d, row + j), hn::LoadU(d, out + j)), d, out + j);
  }
  for (; j < cols; ++j) out[j] += w * row[j];
}

// the arithmetic.
void SmallMultiply(std::int64_t n, std::int64_t cols, std::int64_t k, const float* HWY_RESTRICT a,
                   std::int64_t lda, const float* HWY_RESTRICT b, std::int64_t ldb, float beta,
                   float* HWY_RESTRICT c, std::int64_t ldc) {
  for (std::int64_t i = 0; i < n; ++i) {
    float* out = c + i * ldc;
    if (beta == 0.0f) std::fill(out, out + cols, 0.0f);
    for (std::int64_t p = 0; p < k; ++p) {
      const float w = a[i * lda + p];
      AxpyRow(w, b + p * ldb, cols, out);
    }
  }
}

// c[r, :] += Σ_p a[p, r]·b[p, :] (c += aᵀ·b) for a few rows p: the state update of decoding.
void SmallTransposedAccumulate(std::int64_t k, std::int64_t m, std::int64_t cols,
                               const float* HWY_RESTRICT a, std::int64_t lda,
                               const float* HWY_RESTRICT b, std::int64_t ldb, float* HWY_RESTRICT c,
                               std::int64_t ldc) {
  for (std::int64_t r = 0; r < m; ++r) {
    float* out = c + r * ldc;
    for (std::int64_t p = 0; p < k; ++p) {
      const float w = a[p * lda + r];
      AxpyRow(w, b + p * ldb, cols, out);
    }
  }
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
    // The reference's guard: a non-positive denominator (no visible key) gives a zero row.
    if (!(guarded > 0.0f)) {
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
