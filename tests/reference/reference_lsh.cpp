// Reformer's LSH attention from its definition (LshSpec in seqattn/variant_specs.hpp;
// docs/architecture.md, "LSH attention"), round by round and row by row in double. Per
// (batch, head) and round r, only the first L = key_lengths[b] positions take part: each is
// hashed to argmax [x·R_r, -x·R_r] (the first of equal values, the first NaN), the positions
// sorted by (bucket, position) are cut into chunks of c slots, and a query of chunk t sees the
// keys of chunks t and t-1 (mod the chunk count, inside the round) as a set, j <= i when
// causal, j != i when shared. A shared row seeing nothing attends to itself alone in that
// round; the rounds combine by logsumexp of their log-normalisers, counting the self-only
// rounds only when no round saw anything else.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "reference.hpp"
#include "seqattn/attention.hpp"

namespace seqattn::reference {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

using Rows = std::vector<std::vector<double>>;

Rows rows_of(const ConstTensor& x, std::int64_t b, std::int64_t h) {
  Rows rows(static_cast<size_t>(x.shape[2]), std::vector<double>(static_cast<size_t>(x.shape[3])));
  for (std::int64_t s = 0; s < x.shape[2]; ++s) {
    for (std::int64_t d = 0; d < x.shape[3]; ++d) rows[s][d] = x.at(b, h, s, d);
  }
  return rows;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t d = 0; d < a.size(); ++d) s += a[d] * b[d];
  return s;
}

// R [hashes, D, M] in double: the given rotations (row r·D + d holds R[r, d, :]) or the seed's.
struct Rotations {
  std::int64_t hashes = 0, dim = 0, half = 0;
  std::vector<double> r;
  double at(std::int64_t round, std::int64_t d, std::int64_t m) const {
    return r[static_cast<size_t>((round * dim + d) * half + m)];
  }
};

Rotations rotations_of(const LshSpec& spec, std::int64_t dim, std::int64_t seq) {
  Rotations rot{spec.hashes, dim, 0, {}};
  if (spec.rotations.data != nullptr) {
    rot.half = spec.rotations.cols;
    for (std::int64_t row = 0; row < spec.hashes * dim; ++row) {
      const float* x = spec.rotations.row(row);
      rot.r.insert(rot.r.end(), x, x + rot.half);
    }
    return rot;
  }
  const std::int64_t buckets =
      spec.buckets != 0
          ? spec.buckets
          : std::min<std::int64_t>(128, 2 * std::max<std::int64_t>(1, seq / spec.chunk_length));
  rot.half = buckets / 2;
  const std::vector<float> drawn = lsh_random_rotations(spec.hashes, dim, buckets, spec.seed);
  rot.r.assign(drawn.begin(), drawn.end());
  return rot;
}

// h_r(x) = argmax_m z_m, z = [x·R_r, -x·R_r]: ties to the lowest index, a NaN is the maximum
// (the first NaN wins).
std::int64_t bucket_of(const std::vector<double>& x, const Rotations& rot, std::int64_t round) {
  std::vector<double> z(static_cast<size_t>(2 * rot.half));
  for (std::int64_t m = 0; m < rot.half; ++m) {
    double y = 0;
    for (std::int64_t d = 0; d < rot.dim; ++d) y += x[static_cast<size_t>(d)] * rot.at(round, d, m);
    z[static_cast<size_t>(m)] = y;
    z[static_cast<size_t>(rot.half + m)] = -y;
  }
  std::int64_t best = 0;
  for (std::int64_t m = 1; m < 2 * rot.half && !std::isnan(z[best]); ++m) {
    if (std::isnan(z[m]) || z[m] > z[best]) best = m;
  }
  return best;
}

// Positions 0..len-1 ordered by (bucket, position).
std::vector<std::int64_t> sorted_slots(const std::vector<std::int64_t>& bucket, std::int64_t len) {
  std::vector<std::int64_t> slots(static_cast<size_t>(len));
  std::iota(slots.begin(), slots.end(), std::int64_t{0});
  std::sort(slots.begin(), slots.end(), [&](std::int64_t a, std::int64_t b) {
    return bucket[a] != bucket[b] ? bucket[a] < bucket[b] : a < b;
  });
  return slots;
}

// log Σ e^{x}, NaN when any x is NaN (std::max skips a NaN; exp(NaN) brings it back).
double logsumexp(const std::vector<double>& x) {
  double mx = kNegInf;
  for (const double e : x) mx = std::max(mx, e);
  if (mx == kNegInf) {
    for (const double e : x) {
      if (std::isnan(e)) return e;
    }
    return kNegInf;
  }
  double sum = 0;
  for (const double e : x) sum += std::exp(e - mx);
  return mx + std::log(sum);
}

enum class RoundKind { kCounted, kSelfOnly, kEmpty };

struct RoundRow {
  RoundKind kind = RoundKind::kEmpty;
  double lse = kNegInf;
  std::vector<double> out;
};

}  // namespace

Result lsh(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, const LshSpec& spec,
           const Mask& mask, double scale) {
  Result r = shaped_result(q, k, v, false);
  r.lse.assign(static_cast<size_t>(r.batch * r.heads * r.seq_q), kNegInf);
  const std::int64_t seq = r.seq_q, dim = q.shape[3], dim_v = r.dim_v, c = spec.chunk_length;
  const bool shared = spec.shared_qk;
  const std::int64_t group_k = r.heads / k.shape[1], group_v = r.heads / v.shape[1];
  const Rotations rot = rotations_of(spec, dim, seq);
  for (std::int64_t b = 0; b < r.batch; ++b) {
    const std::int64_t len =
        mask.key_lengths.empty() ? seq : mask.key_lengths[static_cast<size_t>(b)];
    const std::int64_t chunks = (len + c - 1) / c;
    for (std::int64_t h = 0; h < r.heads; ++h) {
      const Rows qr = rows_of(q, b, h), vr = rows_of(v, b, h / group_v);
      // Keys: shared, q RMS-normalised (k is not read); separate, k of the kv head.
      Rows kr;
      if (shared) {
        kr = qr;
        for (std::vector<double>& x : kr) {
          const double norm = std::sqrt(dot(x, x) / static_cast<double>(dim) + 1e-6);
          for (double& e : x) e /= norm;
        }
      } else {
        kr = rows_of(k, b, h / group_k);
      }
      // rounds[i][round]: row i's result in each round.
      std::vector<std::vector<RoundRow>> rounds(static_cast<size_t>(len),
                                                std::vector<RoundRow>(rot.hashes));
      for (std::int64_t round = 0; round < rot.hashes; ++round) {
        // Buckets of the valid positions only (kr is raw k when separate; shared keys take
        // the bucket of their raw q).
        std::vector<std::int64_t> qb(static_cast<size_t>(len)), kb(static_cast<size_t>(len));
        for (std::int64_t p = 0; p < len; ++p) {
          qb[p] = bucket_of(qr[p], rot, round);
          kb[p] = shared ? qb[p] : bucket_of(kr[p], rot, round);
        }
        const std::vector<std::int64_t> qs = sorted_slots(qb, len), ks = sorted_slots(kb, len);
        for (std::int64_t slot = 0; slot < len; ++slot) {
          const std::int64_t i = qs[slot], t = slot / c;
          // The window: key chunks t and (t - 1) mod n_c, as a set.
          std::vector<std::int64_t> window_chunks{t};
          const std::int64_t prev = (t - 1 + chunks) % chunks;
          if (prev != t) window_chunks.push_back(prev);
          std::vector<std::int64_t> visible;
          for (const std::int64_t u : window_chunks) {
            for (std::int64_t ks_slot = u * c; ks_slot < std::min((u + 1) * c, len); ++ks_slot) {
              const std::int64_t j = ks[ks_slot];
              if (mask.causal && j > i) continue;
              if (shared && j == i) continue;
              visible.push_back(j);
            }
          }
          RoundRow& row = rounds[i][round];
          if (visible.empty()) {
            if (!shared) continue;  // empty: not counted
            row.kind = RoundKind::kSelfOnly;
            row.lse = scale * dot(qr[i], kr[i]);
            row.out = vr[i];
            continue;
          }
          std::vector<double> s;
          for (const std::int64_t j : visible) s.push_back(scale * dot(qr[i], kr[j]));
          row.kind = RoundKind::kCounted;
          row.lse = logsumexp(s);
          row.out.assign(static_cast<size_t>(dim_v), 0.0);
          for (size_t n = 0; n < visible.size(); ++n) {
            const double w = std::exp(s[n] - row.lse);
            const std::vector<double>& vj = vr[static_cast<size_t>(visible[n])];
            for (std::int64_t d = 0; d < dim_v; ++d) row.out[d] += w * vj[d];
          }
        }
      }
      // Combine: the counted rounds, else the self-only ones, else zeros and -inf.
      for (std::int64_t i = 0; i < len; ++i) {
        RoundKind take = RoundKind::kEmpty;
        for (const RoundRow& row : rounds[i]) {
          if (row.kind == RoundKind::kCounted) take = RoundKind::kCounted;
          if (row.kind == RoundKind::kSelfOnly && take == RoundKind::kEmpty) {
            take = RoundKind::kSelfOnly;
          }
        }
        if (take == RoundKind::kEmpty) continue;
        std::vector<double> lses;
        for (const RoundRow& row : rounds[i]) {
          if (row.kind == take) lses.push_back(row.lse);
        }
        const double lse = logsumexp(lses);
        r.lse[static_cast<size_t>((b * r.heads + h) * seq + i)] = lse;
        double* out = &r.out[static_cast<size_t>(((b * r.heads + h) * seq + i) * dim_v)];
        for (const RoundRow& row : rounds[i]) {
          if (row.kind != take) continue;
          const double w = std::exp(row.lse - lse);
          for (std::int64_t d = 0; d < dim_v; ++d) out[d] += w * row.out[d];
        }
      }
    }
  }
  return r;
}

double lsh_hash_margin(const ConstTensor& x, const MatrixView<const float>& rot) {
  const std::int64_t dim = x.shape[3], half = rot.cols, hashes = rot.rows / dim;
  double r_max = 0;
  for (std::int64_t row = 0; row < rot.rows; ++row) {
    for (std::int64_t m = 0; m < half; ++m)
      r_max = std::max(r_max, std::abs(double{rot.row(row)[m]}));
  }
  double worst = std::numeric_limits<double>::infinity();
  std::vector<double> xd(static_cast<size_t>(dim)), z(static_cast<size_t>(2 * half));
  for (std::int64_t b = 0; b < x.shape[0]; ++b) {
    for (std::int64_t h = 0; h < x.shape[1]; ++h) {
      for (std::int64_t s = 0; s < x.shape[2]; ++s) {
        double norm = 0;
        for (std::int64_t d = 0; d < dim; ++d) {
          xd[d] = x.at(b, h, s, d);
          norm += xd[d] * xd[d];
        }
        const double unit = std::sqrt(norm) * r_max * std::sqrt(static_cast<double>(dim));
        for (std::int64_t r = 0; r < hashes; ++r) {
          for (std::int64_t m = 0; m < half; ++m) {
            double y = 0;
            for (std::int64_t d = 0; d < dim; ++d) y += xd[d] * rot.row(r * dim + d)[m];
            z[m] = y;
            z[half + m] = -y;
          }
          std::partial_sort(z.begin(), z.begin() + 2, z.end(), std::greater<>());
          const double margin = (z[0] - z[1]) / unit;
          if (margin < worst) worst = margin;  // (a NaN margin is skipped)
        }
      }
    }
  }
  return worst;
}

double lsh_hash_margin(const ConstTensor& x, const LshSpec& spec) {
  const Rotations rot = rotations_of(spec, x.shape[3], x.shape[2]);
  const std::vector<float> r(rot.r.begin(), rot.r.end());
  return lsh_hash_margin(x, {r.data(), rot.hashes * rot.dim, rot.half, rot.half});
}

}  // namespace seqattn::reference
