// Compiles linear_simd-inl.h once per Highway target and dispatches to the best one at run time.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "variants/linear/linear_simd.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include "variants/linear/linear_simd-inl.h"

#if HWY_ONCE
namespace seqattn::detail::linear_simd {

HWY_EXPORT(TargetBlocking);
HWY_EXPORT(ScaledMapRows);
HWY_EXPORT(RotatedMapRows);
HWY_EXPORT(HalfSquaredNorms);
HWY_EXPORT(RowMax);
HWY_EXPORT(ColumnMaxShifted);
HWY_EXPORT(AddToRows);
HWY_EXPORT(ScaleRows);
HWY_EXPORT(ExpShiftedRows);
HWY_EXPORT(AddColumnSums);
HWY_EXPORT(AddRowDots);
HWY_EXPORT(AddRowSums);
HWY_EXPORT(AllFinite);
HWY_EXPORT(DivideRows);

Blocking blocking() { return HWY_DYNAMIC_DISPATCH(TargetBlocking)(); }

void scaled_map_rows(const float* src, std::int64_t rows, std::int64_t cols,
                     std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                     float* dst) {
  HWY_DYNAMIC_DISPATCH(ScaledMapRows)(src, rows, cols, row_stride, col_stride, mul, kind, dst);
}
void rotated_map_rows(const float* src, std::int64_t rows, std::int64_t cols,
                      std::int64_t row_stride, std::int64_t col_stride, float mul, RowMap kind,
                      const RopeTables& rope, RopeSide side, std::int64_t first_row, float* dst) {
  HWY_DYNAMIC_DISPATCH(RotatedMapRows)
  (src, rows, cols, row_stride, col_stride, mul, kind, rope, side, first_row, dst);
}
void half_squared_norms(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                        float* out) {
  HWY_DYNAMIC_DISPATCH(HalfSquaredNorms)(x, rows, cols, ld, out);
}
void row_max(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld, float* out) {
  HWY_DYNAMIC_DISPATCH(RowMax)(x, rows, cols, ld, out);
}
void column_max_shifted(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                        const float* row_shift, float* col_max) {
  HWY_DYNAMIC_DISPATCH(ColumnMaxShifted)(x, rows, cols, ld, row_shift, col_max);
}
void exp_shifted_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                      const float* row_shift, const float* col_shift) {
  HWY_DYNAMIC_DISPATCH(ExpShiftedRows)(x, rows, cols, ld, row_shift, col_shift);
}
void add_to_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                 const float* vec) {
  HWY_DYNAMIC_DISPATCH(AddToRows)(x, rows, cols, ld, vec);
}
void scale_rows(float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                const float* factors) {
  HWY_DYNAMIC_DISPATCH(ScaleRows)(x, rows, cols, ld, factors);
}
void add_column_sums(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                     float* sums) {
  HWY_DYNAMIC_DISPATCH(AddColumnSums)(x, rows, cols, ld, sums);
}
void add_row_dots(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  const float* y, float* out) {
  HWY_DYNAMIC_DISPATCH(AddRowDots)(x, rows, cols, ld, y, out);
}
void add_row_sums(const float* x, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                  float* out) {
  HWY_DYNAMIC_DISPATCH(AddRowSums)(x, rows, cols, ld, out);
}
bool all_finite(const float* x, std::int64_t n) { return HWY_DYNAMIC_DISPATCH(AllFinite)(x, n); }
void divide_rows(const float* num, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                 const float* den, float epsilon, bool zero_when_den_zero, float* out,
                 std::int64_t out_row_stride, std::int64_t out_col_stride) {
  HWY_DYNAMIC_DISPATCH(DivideRows)
  (num, rows, cols, ld, den, epsilon, zero_when_den_zero, out, out_row_stride, out_col_stride);
}

}  // namespace seqattn::detail::linear_simd
#endif  // HWY_ONCE
