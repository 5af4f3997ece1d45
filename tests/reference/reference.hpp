// Double-precision scalar reference implementations of every variant: straightforward loops
// that follow the definitions in docs/architecture.md, used as the oracle by the tests and
// never on the fast path. Outputs are contiguous [B, H_q, S_q, *] arrays of doubles.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn::reference {

struct Result {
  std::int64_t batch = 0, heads = 0, seq_q = 0, seq_k = 0, dim_v = 0;
  std::vector<double> out;      // [B, H_q, S_q, D_v]
  std::vector<double> weights;  // [B, H_q, S_q, S_k] (dense and sliding window only)
  std::vector<double> lse;      // [B, H_q, S_q] (dense and sliding window only)

  double out_at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t d) const {
    return out[static_cast<size_t>(((b * heads + h) * seq_q + i) * dim_v + d)];
  }
  double weight_at(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j) const {
    return weights[static_cast<size_t>(((b * heads + h) * seq_q + i) * seq_k + j)];
  }
  double lse_at(std::int64_t b, std::int64_t h, std::int64_t i) const {
    return lse[static_cast<size_t>((b * heads + h) * seq_q + i)];
  }
};

// A zero result shaped for q [B, H_q, S_q, ·], k [·, ·, S_k, ·], v [·, ·, ·, D_v]: out zeros, and
// with_weights: weights zeros and lse -inf.
Result shaped_result(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                     bool with_weights);

// Extra visibility rule (b, h, i, j) -> visible, combined with the mask.
using Visibility = std::function<bool(std::int64_t, std::int64_t, std::int64_t, std::int64_t)>;

// Positional encodings applied explicitly, in double, from their definitions: q and k rotated
// pair by pair (RoPE; positions as in seqattn/positional.hpp), and -slope_h·(i' - j) or
// -slope_h·|i' - j| added to the scores (ALiBi; i' = i + S_k - S_q, slopes given per head).
struct Positional {
  std::optional<RotaryEmbedding> rope;
  std::vector<double> alibi_slopes;  // empty = no ALiBi
  bool alibi_symmetric = false;
};

// softmax(q·kᵀ·scale + bias, restricted to visible keys)·v with every Mask part honoured.
// A row with no visible key gives zeros, zero weights and lse = -inf.
Result dense(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, const Mask& mask,
             double scale, const Visibility& extra = {}, const Positional& positional = {});

// Dense restricted to the band [i' - left, i' + right] (i' = i + S_k - S_q) plus global tokens.
Result sliding_window(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                      const SlidingWindowSpec& spec, const Mask& mask, double scale,
                      const Positional& positional = {});

// Row (b, h, s) of x in double, rotated by RoPE at `position` (unrotated without rope).
std::vector<double> rotated_row(const ConstTensor& x, std::int64_t b, std::int64_t h,
                                std::int64_t s, const std::optional<RotaryEmbedding>& rope,
                                std::int64_t position);

// x rotated row by row at its RoPE positions (explicit ones of its side, or first + s; plus the
// offset; unrotated without rope), rounded to float, contiguous [B, H, S, D].
std::vector<float> rotated_copy(const ConstTensor& x, const std::optional<RotaryEmbedding>& rope,
                                bool query, std::int64_t first);

// Kernelised linear attention (see LinearSpec). favor_w is the [m, D] FAVOR+ matrix (row-major,
// contiguous) and is ignored for the other feature maps. Honours key_lengths and causal.
// RoPE rotates q and k (positions as in dense) before √scale and φ.
// q and k are multiplied by √scale before φ; without a scale, elu1 and relu take the raw
// vectors (Katharopoulos et al. 2020) and FAVOR+ uses softmax's 1/√D.
Result linear(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
              FeatureMap feature_map, const std::vector<float>& favor_w, std::int64_t m,
              double epsilon, const Mask& mask, std::optional<double> scale,
              const std::optional<RotaryEmbedding>& rope = {});

// Dense attention over K' = E·K and V' = F·V, E and F [proj_len, >= S_k] row-major
// (first S_k columns used); keys past key_lengths are zeroed before projecting. RoPE rotates
// each key at its position before projecting and each query at its own.
Result linformer(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                 const MatrixView<const float>& e, const MatrixView<const float>& f,
                 const Mask& mask, double scale, const std::optional<RotaryEmbedding>& rope = {});

// Hierarchical attention from its definition (see HierarchicalSpec): each visible pair (i, j)
// at the finest level whose blocks of b·2^l positions holding i and j are equal or adjacent,
// scored with the mean of j's group of 2^l valid keys and the mean of i's group of queries (i's
// own query when causal); pairs beyond the top level are not seen. Honours key_lengths and
// causal (S_q = S_k). RoPE rotates q and k at their positions before any mean. Writes out
// and lse.
Result hierarchical(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                    const HierarchicalSpec& spec, const Mask& mask, double scale,
                    const std::optional<RotaryEmbedding>& rope = {});

// Reformer's LSH attention from its definition (see LshSpec), round by round: buckets
// h_r(x) = argmax [x·R_r, -x·R_r] in double (the first of equal values, the first NaN) of the
// first key_lengths[b] positions, sorted by (bucket, position), chunks of chunk_length slots,
// a query of chunk t seeing key chunks t and t-1 (mod the chunk count) as a set, j <= i when
// causal and j != i when shared (keys then q RMS-normalised, k not read); a shared row seeing
// nothing attends to itself alone in that round; rounds combine by logsumexp. R is
// spec.rotations or lsh_random_rotations (buckets 0: min(128, 2·max(1, S/c))). GQA (separate)
// reads kv head h / (H_q/H_kv). Rows >= key_lengths[b] are 0 with lse -inf. Writes out and lse.
Result lsh(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, const LshSpec& spec,
           const Mask& mask, double scale);

// The smallest hash margin of x's rows over every round: the gap between the two largest of
// z = [x·R_r, -x·R_r] over |x|·max|R|·√D, in double (NaN rows skipped; +inf without rows).
// float32 and double agree on a bucket when it is >= 1e-6 (docs/architecture.md, "LSH
// attention"). R is `rot` ([hashes·D, M]) or the spec's, as lsh() takes it.
double lsh_hash_margin(const ConstTensor& x, const MatrixView<const float>& rot);
double lsh_hash_margin(const ConstTensor& x, const LshSpec& spec);

// The reference of whichever variant `spec` names (the functions above; a row of the variant
// table must have one). scale unset: softmax's 1/√D, and linear's own default. A FAVOR+ or
// Linformer matrix, or LSH rotations, left to the seed are drawn as the library draws them.
Result variant(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const ConcreteSpec& spec, const Mask& mask, std::optional<double> scale,
               const Positional& positional = {});

// Error metric used by every test: max_i |x_i - ref_i| / max(max_i |ref_i|, 1e-30), i.e. the
// largest absolute error relative to the output's scale (not per element, which is
// meaningless where the output crosses zero).
double max_relative_error(const Tensor& actual, const Result& expected);
// max |actual - expected| over max |expected|; errors up to `absolute_floor` (the resolution
// of the format actual was stored in, e.g. f16's 2^-25 near zero) count as none.
double max_relative_error(const std::vector<float>& actual, const std::vector<double>& expected,
                          double absolute_floor = 0.0);

}  // namespace seqattn::reference
