#include "variants/hierarchical/coarse_tokens.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "src/kernel/team_loops.hpp"

namespace seqattn::detail {
namespace {

// Below this many floats a thread team costs more than the pass.
constexpr std::int64_t kMinParallelFloats = std::int64_t{1} << 16;

}  // namespace

void halve_rows(const RowSource& src, const std::int64_t* counts, std::int64_t valid,
                const RowTarget& dst, std::int64_t* counts_out, int threads) {
  const std::int64_t out_rows = (src.rows + 1) / 2;
  const bool parallel = threads > 1 && out_rows * src.cols >= kMinParallelFloats;
  auto halve = [&](std::int64_t t) {
    std::int64_t c[2] = {0, 0};
    const float* row[2] = {nullptr, nullptr};
    for (std::int64_t k = 0; k < 2; ++k) {
      const std::int64_t r = 2 * t + k;
      if (r >= src.rows) continue;
      c[k] = counts != nullptr ? counts[r] : (r < valid ? 1 : 0);
      row[k] = src.base + (src.position ? src.position[r] : r) * src.row_stride;
    }
    const std::int64_t total = c[0] + c[1];
    if (counts_out != nullptr) counts_out[t] = total;
    float* out = dst.row(t);
    if (total == 0) {
      std::fill(out, out + src.cols, 0.0f);
      return;
    }
    // Weights as floats: counts are powers of two except at the ends, exact up to 2^24.
    const float w0 = static_cast<float>(c[0]) / static_cast<float>(total);
    const float w1 = static_cast<float>(c[1]) / static_cast<float>(total);
    const std::int64_t step = src.col_stride;
    if (c[1] == 0) {
      for (std::int64_t d = 0; d < src.cols; ++d) out[d] = row[0][d * step];
    } else if (c[0] == 0) {
      for (std::int64_t d = 0; d < src.cols; ++d) out[d] = row[1][d * step];
    } else if (step == 1) {  // the usual case: contiguous rows vectorise
      for (std::int64_t d = 0; d < src.cols; ++d) out[d] = w0 * row[0][d] + w1 * row[1][d];
    } else {
      for (std::int64_t d = 0; d < src.cols; ++d)
        out[d] = w0 * row[0][d * step] + w1 * row[1][d * step];
    }
  };
  // A thread team only when it pays; one thread runs a plain loop (a one-thread OpenMP region
  // allocates its team, and a steady run in a workspace must not).
  RunOnTeam(parallel ? threads : 1, [&](const auto& team) { team.for_static(out_rows, halve); });
}

void write_log_counts(const std::int64_t* counts, std::int64_t rows, float scale,
                      const RowTarget& dst, std::int64_t col) {
  for (std::int64_t t = 0; t < rows; ++t) {
    const double c = static_cast<double>(counts[t]);
    dst.row(t)[col] = c > 0 ? static_cast<float>(std::log(c) / static_cast<double>(scale))
                            : -std::numeric_limits<float>::infinity();
  }
}

void write_ones(std::int64_t rows, const RowTarget& dst, std::int64_t col) {
  for (std::int64_t t = 0; t < rows; ++t) dst.row(t)[col] = 1.0f;
}

RowSource rows_from(const RowSource& src, std::int64_t first, std::int64_t end) {
  RowSource part = src;
  part.rows = end - first;
  if (part.position != nullptr) {
    part.position += first;
  } else {
    part.base += first * part.row_stride;
  }
  return part;
}

RowTarget rows_from(const RowTarget& dst, std::int64_t first) {
  RowTarget part = dst;
  if (part.position != nullptr) {
    part.position += first;
  } else {
    part.base += first * part.ld;
  }
  return part;
}

void merge_partial(float* out_a, std::int64_t step_a, float& lse_a, const float* out_b, float lse_b,
                   std::int64_t dim_v) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  if (lse_b == kNegInf) return;
  if (lse_a == kNegInf) {
    for (std::int64_t d = 0; d < dim_v; ++d) out_a[d * step_a] = out_b[d];
    lse_a = lse_b;
    return;
  }
  const float m = lse_a > lse_b ? lse_a : lse_b;  // NaN on either side: NaN below
  const float wa = std::exp(lse_a - m), wb = std::exp(lse_b - m);
  const float inv = 1.0f / (wa + wb);
  const float ka = wa * inv, kb = wb * inv;
  if (step_a == 1) {
    for (std::int64_t d = 0; d < dim_v; ++d) out_a[d] = ka * out_a[d] + kb * out_b[d];
  } else {
    for (std::int64_t d = 0; d < dim_v; ++d)
      out_a[d * step_a] = ka * out_a[d * step_a] + kb * out_b[d];
  }
  lse_a = m + std::log(wa + wb);
}

}  // namespace seqattn::detail
