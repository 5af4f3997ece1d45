// The recurrent (streaming) form of causal linear attention: a state that holds, per (batch,
// kv head), the m×D_v summary Σ_j φ(k_j) v_jᵀ and the m-vector normaliser Σ_j φ(k_j) of every
// token consumed so far, so that generating token t costs O(m·D) instead of O(t·D).
// Running step() over a sequence, in pieces of any length, gives the same output as
// attend() with LinearSpec and mask.causal = true over the whole sequence (up to rounding).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

struct LinearStateShape {
  std::int64_t batch = 1;
  std::int64_t heads_q = 1;
  std::int64_t heads_kv = 1;  // a divisor of heads_q (GQA/MQA)
  std::int64_t dim = 64;      // D of q and k
  std::int64_t dim_v = 64;    // D_v of v and out
};

// FAVOR+ numerics: feature r of every key is stored multiplied by exp(-s_r), where s_r is the
// largest key log-feature w_r·k - |k|²/2 seen so far for that feature (a running key
// stabiliser, one per feature, per batch and kv head). When new tokens raise s_r, row r of the
// stored sums is first rescaled by exp(s_r,old - s_r,new) <= 1. Queries take exp(s_r) back
// into their features and subtract their own row maximum, so every shift cancels exactly in
// the output ratio and nothing overflows however long the stream. A denominator can still
// underflow to 0 (giving a zero row) only when the keys a query sees are all e^-87 times
// smaller in every feature than a later key of the same chunk (extreme input norms).
// elu1/relu need no stabiliser.
class LinearAttentionState {
 public:
  // Validates the spec and shape like attend() does (Error naming the argument). The FAVOR+
  // matrix is copied (or drawn from spec.seed), so spec.favor_matrix need not outlive the state.
  // scale (finite, > 0) defaults as in attend(): elu1/relu unscaled, FAVOR+ 1/√D (see
  // LinearSpec); threads = 0 uses every core (the result does not depend on it).
  LinearAttentionState(const LinearSpec& spec, const LinearStateShape& shape,
                       std::optional<float> scale = std::nullopt, int threads = 0);
  ~LinearAttentionState();
  LinearAttentionState(LinearAttentionState&&) noexcept;
  LinearAttentionState& operator=(LinearAttentionState&&) noexcept;

  // Consumes n new positions: q [B, H_q, n, D], k [B, H_kv, n, D], v [B, H_kv, n, D_v] (any
  // strides), writes out [B, H_q, n, D_v]. New position i attends to every earlier token and
  // to new positions 0..i. Throws Error (state and out untouched) on bad shapes or overlap.
  void step(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v, const Tensor& out);

  void reset();                       // forget every token
  std::int64_t position() const;      // tokens consumed since construction or reset()
  std::int64_t num_features() const;  // m
  const LinearStateShape& shape() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqattn
