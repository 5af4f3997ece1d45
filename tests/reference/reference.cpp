#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace seqattn::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

Result shaped(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, bool with_weights) {
  Result r;
  r.batch = q.shape[0];
  r.heads = q.shape[1];
  r.seq_q = q.shape[2];
  r.seq_k = k.shape[2];
  r.dim_v = v.shape[3];
  r.out.assign(static_cast<size_t>(r.batch * r.heads * r.seq_q * r.dim_v), 0.0);
  if (with_weights) {
    r.weights.assign(static_cast<size_t>(r.batch * r.heads * r.seq_q * r.seq_k), 0.0);
    r.lse.assign(static_cast<size_t>(r.batch * r.heads * r.seq_q), kNegInf);
  }
  return r;
}

std::int64_t key_length(const Mask& mask, std::int64_t b, std::int64_t s_k) {
  return mask.key_lengths.empty() ? s_k : mask.key_lengths[static_cast<size_t>(b)];
}

template <class T>
T broadcast_at(const TensorView<const T>& m, std::int64_t b, std::int64_t h, std::int64_t i,
               std::int64_t j) {
  return m.at(m.shape[0] == 1 ? 0 : b, m.shape[1] == 1 ? 0 : h, i, j);
}

bool visible(const Mask& mask, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j,
             std::int64_t s_q, std::int64_t s_k) {
  if (j >= key_length(mask, b, s_k)) return false;
  if (mask.causal && j > i + s_k - s_q) return false;
  if (mask.keep && broadcast_at(*mask.keep, b, h, i, j) == 0) return false;
  return true;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t d = 0; d < a.size(); ++d) s += a[d] * b[d];
  return s;
}

// Every row of x, rotated at its position: explicit ones, or first + row, plus the offset.
std::vector<std::vector<double>> rotated_rows(const ConstTensor& x,
                                              const std::optional<RotaryEmbedding>& rope,
                                              const std::vector<std::int64_t>& explicit_positions,
                                              std::int64_t first) {
  std::vector<std::vector<double>> rows;
  for (std::int64_t b = 0; b < x.shape[0]; ++b) {
    for (std::int64_t h = 0; h < x.shape[1]; ++h) {
      for (std::int64_t s = 0; s < x.shape[2]; ++s) {
        const std::int64_t pos =
            explicit_positions.empty() ? first + s : explicit_positions[static_cast<size_t>(s)];
        rows.push_back(rotated_row(x, b, h, s, rope, pos + (rope ? rope->offset : 0)));
      }
    }
  }
  return rows;
}

}  // namespace

Result shaped_result(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                     bool with_weights) {
  return shaped(q, k, v, with_weights);
}

std::vector<double> rotated_row(const ConstTensor& x, std::int64_t b, std::int64_t h,
                                std::int64_t s, const std::optional<RotaryEmbedding>& rope,
                                std::int64_t position) {
  const std::int64_t dim = x.shape[3];
  std::vector<double> row(static_cast<size_t>(dim));
  for (std::int64_t d = 0; d < dim; ++d) row[d] = x.at(b, h, s, d);
  if (!rope) return row;
  const std::int64_t dims = rope->dims == 0 ? dim : rope->dims, half = dims / 2;
  for (std::int64_t p = 0; p < half; ++p) {
    const double angle = static_cast<double>(position) / rope->linear_scaling *
                         std::pow(rope->theta, -2.0 * static_cast<double>(p) / dims);
    const bool halves = rope->layout == RopeLayout::kHalves;
    const std::int64_t i0 = halves ? p : 2 * p, i1 = halves ? p + half : 2 * p + 1;
    const double a = row[i0], c = row[i1];
    row[i0] = a * std::cos(angle) - c * std::sin(angle);
    row[i1] = a * std::sin(angle) + c * std::cos(angle);
  }
  return row;
}

Result dense(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, const Mask& mask,
             double scale, const Visibility& extra, const Positional& positional) {
  Result r = shaped(q, k, v, true);
  const std::int64_t group = q.shape[1] / k.shape[1];
  std::vector<double> s(static_cast<size_t>(r.seq_k));
  const std::optional<RotaryEmbedding>& rope = positional.rope;
  const std::vector<std::int64_t> none;
  const auto qr = rotated_rows(q, rope, rope ? rope->q_positions : none, r.seq_k - r.seq_q);
  const auto kr = rotated_rows(k, rope, rope ? rope->k_positions : none, 0);
  for (std::int64_t b = 0; b < r.batch; ++b) {
    for (std::int64_t h = 0; h < r.heads; ++h) {
      for (std::int64_t i = 0; i < r.seq_q; ++i) {
        double mx = kNegInf;
        for (std::int64_t j = 0; j < r.seq_k; ++j) {
          s[j] = kNegInf;
          if (!visible(mask, b, h, i, j, r.seq_q, r.seq_k)) continue;
          if (extra && !extra(b, h, i, j)) continue;
          s[j] = dot(qr[static_cast<size_t>((b * r.heads + h) * r.seq_q + i)],
                     kr[static_cast<size_t>((b * k.shape[1] + h / group) * r.seq_k + j)]) *
                 scale;
          if (mask.bias) s[j] += broadcast_at(*mask.bias, b, h, i, j);
          if (!positional.alibi_slopes.empty()) {
            const double slope = positional.alibi_slopes[static_cast<size_t>(h)];
            const auto dist = static_cast<double>(i + r.seq_k - r.seq_q - j);
            s[j] -= slope * (positional.alibi_symmetric ? std::abs(dist) : dist);
          }
          mx = std::max(mx, s[j]);
        }
        if (mx == kNegInf) continue;  // no visible key: zeros, lse = -inf
        double sum = 0;
        for (std::int64_t j = 0; j < r.seq_k; ++j) sum += std::exp(s[j] - mx);
        const double lse = mx + std::log(sum);
        r.lse[static_cast<size_t>((b * r.heads + h) * r.seq_q + i)] = lse;
        // A hidden key takes no part in the sum, whatever its value holds (as in the kernels,
        // which never read the keys of a skipped tile). Skipping them and reading v by row
        // took this oracle from 145-168 s to 11-13 s per long sliding-window test under the
        // sanitizers.
        double* out_row = r.out.data() + ((b * r.heads + h) * r.seq_q + i) * r.dim_v;
        for (std::int64_t j = 0; j < r.seq_k; ++j) {
          const double w = std::exp(s[j] - lse);
          r.weights[static_cast<size_t>(((b * r.heads + h) * r.seq_q + i) * r.seq_k + j)] = w;
          if (s[j] == kNegInf) continue;
          const float* v_row = v.ptr(b, h / group, j);
          for (std::int64_t d = 0; d < r.dim_v; ++d) out_row[d] += w * v_row[d * v.strides[3]];
        }
      }
    }
  }
  return r;
}

Result sliding_window(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                      const SlidingWindowSpec& spec, const Mask& mask, double scale,
                      const Positional& positional) {
  const std::int64_t offset = k.shape[2] - q.shape[2];
  auto is_global = [&](std::int64_t pos) {
    return std::find(spec.global_tokens.begin(), spec.global_tokens.end(), pos) !=
           spec.global_tokens.end();
  };
  auto band = [&](std::int64_t, std::int64_t, std::int64_t i, std::int64_t j) {
    const std::int64_t pos = i + offset;
    if (is_global(i) || is_global(j)) return true;
    return j >= pos - spec.left && j <= pos + spec.right;
  };
  return dense(q, k, v, mask, scale, band, positional);
}

namespace {

// φ applied to one row x (already multiplied by √scale); returns m features.
std::vector<double> features(const std::vector<double>& x, FeatureMap map,
                             const std::vector<float>& w, std::int64_t m) {
  const auto d = static_cast<std::int64_t>(x.size());
  std::vector<double> f;
  if (map == FeatureMap::kFavor) {
    double sq = 0;
    for (double t : x) sq += t * t;
    f.resize(static_cast<size_t>(m));
    for (std::int64_t r = 0; r < m; ++r) {
      double wx = 0;
      for (std::int64_t c = 0; c < d; ++c)
        wx += static_cast<double>(w[static_cast<size_t>(r * d + c)]) * x[c];
      f[r] = std::exp(wx - 0.5 * sq) / std::sqrt(static_cast<double>(m));
    }
    return f;
  }
  f.resize(x.size());
  for (size_t c = 0; c < x.size(); ++c) {
    f[c] =
        map == FeatureMap::kElu1 ? (x[c] > 0 ? x[c] + 1.0 : std::exp(x[c])) : std::max(x[c], 0.0);
  }
  return f;
}

// Row s of (b, h) rotated at its RoPE position (explicit, or first + s; plus the offset),
// times mul.
std::vector<double> positioned_row(const ConstTensor& x, std::int64_t b, std::int64_t h,
                                   std::int64_t s, const std::optional<RotaryEmbedding>& rope,
                                   bool query, std::int64_t first, double mul) {
  std::int64_t pos = first + s;
  if (rope) {
    const std::vector<std::int64_t>& given = query ? rope->q_positions : rope->k_positions;
    if (!given.empty()) pos = given[static_cast<size_t>(s)];
    pos += rope->offset;
  }
  std::vector<double> values = rotated_row(x, b, h, s, rope, pos);
  for (double& e : values) e *= mul;
  return values;
}

}  // namespace

// x rotated row by row at its RoPE positions, rounded to float, contiguous [B, H, S, D].
std::vector<float> rotated_copy(const ConstTensor& x, const std::optional<RotaryEmbedding>& rope,
                                bool query, std::int64_t first) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < x.shape[0]; ++b) {
    for (std::int64_t h = 0; h < x.shape[1]; ++h) {
      for (std::int64_t s = 0; s < x.shape[2]; ++s) {
        for (double e : positioned_row(x, b, h, s, rope, query, first, 1.0)) {
          out.push_back(static_cast<float>(e));
        }
      }
    }
  }
  return out;
}

Result linear(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
              FeatureMap feature_map, const std::vector<float>& favor_w, std::int64_t m,
              double epsilon, const Mask& mask, std::optional<double> scale,
              const std::optional<RotaryEmbedding>& rope) {
  Result r = shaped(q, k, v, false);
  const std::int64_t group = q.shape[1] / k.shape[1];
  const double default_scale =
      feature_map == FeatureMap::kFavor ? 1.0 / std::sqrt(static_cast<double>(q.shape[3])) : 1.0;
  const double root = std::sqrt(scale.value_or(default_scale));
  for (std::int64_t b = 0; b < r.batch; ++b) {
    const std::int64_t len = key_length(mask, b, r.seq_k);
    for (std::int64_t h = 0; h < r.heads; ++h) {
      std::vector<std::vector<double>> phi_k;
      for (std::int64_t j = 0; j < r.seq_k; ++j) {
        phi_k.push_back(features(positioned_row(k, b, h / group, j, rope, false, 0, root),
                                 feature_map, favor_w, m));
      }
      for (std::int64_t i = 0; i < r.seq_q; ++i) {
        const std::vector<double> phi_q =
            features(positioned_row(q, b, h, i, rope, true, r.seq_k - r.seq_q, root), feature_map,
                     favor_w, m);
        std::vector<double> num(static_cast<size_t>(r.dim_v), 0.0);
        double den = 0;
        for (std::int64_t j = 0; j < len; ++j) {
          if (mask.causal && j > i + r.seq_k - r.seq_q) break;
          double a = 0;
          for (size_t c = 0; c < phi_q.size(); ++c) a += phi_q[c] * phi_k[j][c];
          den += a;
          for (std::int64_t d = 0; d < r.dim_v; ++d) num[d] += a * v.at(b, h / group, j, d);
        }
        // The guard: elu1 and relu add epsilon to every denominator; FAVOR+ (whose kernel
        // rescales features for range) returns zeros where the denominator is exactly 0.
        const double g = feature_map == FeatureMap::kFavor ? den : den + epsilon;
        for (std::int64_t d = 0; d < r.dim_v; ++d) {
          r.out[static_cast<size_t>(((b * r.heads + h) * r.seq_q + i) * r.dim_v + d)] =
              g <= 0 ? 0.0 : num[d] / g;  // NaN stays NaN
        }
      }
    }
  }
  return r;
}

Result linformer(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                 const MatrixView<const float>& e, const MatrixView<const float>& f,
                 const Mask& mask, double scale, const std::optional<RotaryEmbedding>& rope) {
  const std::int64_t b_n = k.shape[0], h_n = k.shape[1], s_k = k.shape[2];
  const std::int64_t p = e.rows, d_k = k.shape[3], d_v = v.shape[3];
  // RoPE: keys rotated at their positions before projecting, queries at theirs.
  const std::vector<float> k_rot = rotated_copy(k, rope, false, 0);
  const std::vector<float> q_rot = rotated_copy(q, rope, true, s_k - q.shape[2]);
  const ConstTensor kr = bhsd<const float>(k_rot.data(), b_n, h_n, s_k, d_k);
  const ConstTensor qr = bhsd<const float>(q_rot.data(), q.shape[0], q.shape[1], q.shape[2], d_k);
  std::vector<float> kp(static_cast<size_t>(b_n * h_n * p * d_k), 0.0f);
  std::vector<float> vp(static_cast<size_t>(b_n * h_n * p * d_v), 0.0f);
  for (std::int64_t b = 0; b < b_n; ++b) {
    const std::int64_t len = key_length(mask, b, s_k);
    for (std::int64_t h = 0; h < h_n; ++h) {
      for (std::int64_t r = 0; r < p; ++r) {
        for (std::int64_t d = 0; d < d_k; ++d) {
          double s = 0;
          for (std::int64_t j = 0; j < len; ++j)
            s += static_cast<double>(e.row(r)[j]) * kr.at(b, h, j, d);
          kp[static_cast<size_t>(((b * h_n + h) * p + r) * d_k + d)] = static_cast<float>(s);
        }
        for (std::int64_t d = 0; d < d_v; ++d) {
          double s = 0;
          for (std::int64_t j = 0; j < len; ++j)
            s += static_cast<double>(f.row(r)[j]) * v.at(b, h, j, d);
          vp[static_cast<size_t>(((b * h_n + h) * p + r) * d_v + d)] = static_cast<float>(s);
        }
      }
    }
  }
  // The projected keys are rounded to float above only to reuse the view type; the rounding
  // (2^-24 relative) is far below the 1e-5 tolerance the tests use.
  Mask none;
  return dense(qr, bhsd<const float>(kp.data(), b_n, h_n, p, d_k),
               bhsd<const float>(vp.data(), b_n, h_n, p, d_v), none, scale);
}

double max_relative_error(const Tensor& actual, const Result& expected) {
  double max_ref = 0, max_err = 0;
  for (std::int64_t b = 0; b < expected.batch; ++b)
    for (std::int64_t h = 0; h < expected.heads; ++h)
      for (std::int64_t i = 0; i < expected.seq_q; ++i)
        for (std::int64_t d = 0; d < expected.dim_v; ++d) {
          const double ref = expected.out_at(b, h, i, d);
          max_ref = std::max(max_ref, std::abs(ref));
          const double err = std::abs(static_cast<double>(actual.at(b, h, i, d)) - ref);
          max_err =
              std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(max_err, err);
        }
  return max_err / std::max(max_ref, 1e-30);
}

double max_relative_error(const std::vector<float>& actual, const std::vector<double>& expected,
                          double absolute_floor) {
  double max_ref = 0, max_err = 0;
  const size_t n = std::min(actual.size(), expected.size());
  for (size_t i = 0; i < n; ++i) {
    max_ref = std::max(max_ref, std::abs(expected[i]));
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double err = diff <= absolute_floor ? 0.0 : diff;
    max_err = std::isnan(err) ? std::numeric_limits<double>::infinity() : std::max(max_err, err);
  }
  if (actual.size() != expected.size()) return std::numeric_limits<double>::infinity();
  return max_err / std::max(max_ref, 1e-30);
}

}  // namespace seqattn::reference
