// FLOPs and bytes of exact softmax attention over a number of visible (query, key) pairs:
// shared by dense and sliding window, which differ only in how many pairs they visit.
#pragma once

#include "src/core/problem.hpp"

namespace seqattn::detail {

// The bytes of the attention weights [B, H_q, S_q, S_k] when p asks for them, else 0.
inline double weights_bytes(const Problem& p) {
  if (!p.weights) return 0.0;
  return 4.0 * static_cast<double>(p.batch()) * p.heads_q() * p.seq_q() * p.seq_k();
}

// 2·(D + D_v) FLOPs per pair (q·k and p·v); bytes: q and out once, k and v once per kv head,
// plus the weights when they are written.
inline Cost softmax_attention_cost(const Problem& p, double pairs) {
  const auto d = static_cast<double>(p.dim() + p.dim_v());
  Cost c;
  c.flops = pairs * 2.0 * d;
  c.bytes = 4.0 * d *
            (static_cast<double>(p.batch()) * static_cast<double>(p.heads_q() * p.seq_q()) +
             static_cast<double>(p.batch()) * static_cast<double>(p.heads_kv() * p.seq_k()));
  c.bytes += weights_bytes(p);
  return c;
}

}  // namespace seqattn::detail
