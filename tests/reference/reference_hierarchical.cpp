// Hierarchical attention from its definition (HierarchicalSpec in seqattn/options.hpp), pair by
// pair: each visible (i, j) belongs to the finest level l whose blocks of b·2^l positions
// holding i and j are equal or adjacent; its score is scale·q̃·k̄, where k̄ is the mean of the
// valid keys of j's group of 2^l positions and q̃ the mean of the queries of i's group (the
// query itself when causal). out_i = Σ_j exp(s_ij)·v_j / Σ_j exp(s_ij): summing v_j over a
// group is its count times its mean value, so a coarse key counts for every key it holds.
#include <algorithm>
#include <cmath>
#include <limits>

#include "reference.hpp"

namespace seqattn::reference {
namespace {

using Rows = std::vector<std::vector<double>>;

// Rows of x(b, h, ·) in double, rotated by RoPE at their positions (explicit ones of their
// side, or the row index; plus the offset) when `rope` is given.
Rows rows_of(const ConstTensor& x, std::int64_t b, std::int64_t h,
             const std::optional<RotaryEmbedding>& rope, bool query) {
  Rows rows;
  for (std::int64_t r = 0; r < x.shape[2]; ++r) {
    std::int64_t pos = r;
    if (rope) {
      const std::vector<std::int64_t>& given = query ? rope->q_positions : rope->k_positions;
      pos = (given.empty() ? r : given[static_cast<size_t>(r)]) + rope->offset;
    }
    rows.push_back(rotated_row(x, b, h, r, rope, pos));
  }
  return rows;
}

// Mean of rows [first, last).
std::vector<double> mean_rows(const Rows& x, std::int64_t first, std::int64_t last) {
  std::vector<double> m(x[0].size(), 0.0);
  for (std::int64_t r = first; r < last; ++r) {
    for (size_t d = 0; d < m.size(); ++d) m[d] += x[static_cast<size_t>(r)][d];
  }
  for (double& e : m) e /= static_cast<double>(last - first);
  return m;
}

std::int64_t levels_for(std::int64_t seq, std::int64_t block, std::int64_t requested) {
  std::int64_t needed = 0;
  while (seq > 2 * block * (std::int64_t{1} << needed)) ++needed;
  return requested == 0 ? needed : std::min(requested, needed);
}

// The finest level at which i and j are in equal or adjacent blocks of block·2^l positions,
// from their level-0 block indices (i / (block·2^l) = (i / block) >> l).
std::int64_t level_of(std::int64_t block_i, std::int64_t block_j) {
  std::int64_t l = 0;
  while (std::abs((block_i >> l) - (block_j >> l)) > 1) ++l;
  return l;
}

}  // namespace

Result hierarchical(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                    const HierarchicalSpec& spec, const Mask& mask, double scale,
                    const std::optional<RotaryEmbedding>& rope) {
  Result r = shaped_result(q, k, v, false);
  r.lse.assign(static_cast<size_t>(r.batch * r.heads * r.seq_q),
               -std::numeric_limits<double>::infinity());
  const std::int64_t group = q.shape[1] / k.shape[1], seq = r.seq_k;
  const std::int64_t levels = levels_for(seq, spec.block, spec.levels);
  std::vector<double> s(static_cast<size_t>(seq));
  for (std::int64_t b = 0; b < r.batch; ++b) {
    const std::int64_t len = mask.key_lengths.empty() ? seq : mask.key_lengths[b];
    for (std::int64_t h = 0; h < r.heads; ++h) {
      const Rows qr = rows_of(q, b, h, rope, true), kr = rows_of(k, b, h / group, rope, false);
      // Group means per level: keys of group u (valid keys only), queries of group t.
      std::vector<std::vector<std::vector<double>>> kbar(static_cast<size_t>(levels + 1)),
          qbar(static_cast<size_t>(levels + 1));
      for (std::int64_t l = 0; l <= levels; ++l) {
        const std::int64_t size = std::int64_t{1} << l;
        for (std::int64_t u = 0; u * size < seq; ++u) {
          const std::int64_t first = u * size;
          kbar[l].push_back(first < len ? mean_rows(kr, first, std::min(first + size, len))
                                        : std::vector<double>{});
          qbar[l].push_back(mean_rows(qr, first, std::min(first + size, seq)));
        }
      }
      const Rows vr = rows_of(v, b, h / group, std::nullopt, false);
      for (std::int64_t i = 0; i < r.seq_q; ++i) {
        double mx = -std::numeric_limits<double>::infinity();
        for (std::int64_t j = 0; j < seq; ++j) {
          s[j] = -std::numeric_limits<double>::infinity();
          if (j >= len || (mask.causal && j > i)) continue;
          const std::int64_t l = level_of(i / spec.block, j / spec.block);
          if (l > levels) continue;
          const std::vector<double>& kb = kbar[l][static_cast<size_t>(j >> l)];
          const std::int64_t lq = mask.causal ? 0 : l;  // causal: the query itself
          const std::vector<double>& qb = qbar[lq][static_cast<size_t>(i >> lq)];
          double dot = 0;
          for (size_t d = 0; d < kb.size(); ++d) dot += qb[d] * kb[d];
          s[j] = dot * scale;
          mx = std::max(mx, s[j]);
        }
        if (mx == -std::numeric_limits<double>::infinity()) continue;
        // s becomes exp(s - max): hidden keys (s = -inf) weigh 0 and are skipped.
        double sum = 0;
        for (std::int64_t j = 0; j < seq; ++j) {
          s[j] = s[j] == -std::numeric_limits<double>::infinity() ? 0.0 : std::exp(s[j] - mx);
          sum += s[j];
        }
        r.lse[static_cast<size_t>((b * r.heads + h) * r.seq_q + i)] = mx + std::log(sum);
        double* out = &r.out[static_cast<size_t>(((b * r.heads + h) * r.seq_q + i) * r.dim_v)];
        for (std::int64_t j = 0; j < seq; ++j) {
          if (s[j] == 0.0) continue;
          const double w = s[j] / sum;
          const std::vector<double>& vj = vr[static_cast<size_t>(j)];
          for (std::int64_t d = 0; d < r.dim_v; ++d) out[d] += w * vj[static_cast<size_t>(d)];
        }
      }
    }
  }
  return r;
}

}  // namespace seqattn::reference
