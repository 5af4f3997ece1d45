// Positional encodings applied inside attention: rotary embeddings (RoPE) on q and k, ALiBi
// biases on the scores, and the sinusoidal absolute encoding as a helper on the input.
// The formulas, and where in each kernel they are applied, are in docs/architecture.md.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "seqattn/tensor.hpp"

namespace seqattn {

// Which dimensions form a rotated pair (p = 0 .. dims/2 - 1).
enum class RopeLayout {
  kHalves,       // (x[p], x[p + dims/2]): GPT-NeoX, Hugging Face's Llama (rotate_half)
  kInterleaved,  // (x[2p], x[2p + 1]): GPT-J, Meta's Llama reference code
};

// Rotary position embedding (Su et al., RoFormer): pair p of the first `dims` dimensions of
// q and k is rotated by the angle (position / linear_scaling) · theta^(-2p / dims); the
// remaining D - dims dimensions pass unchanged (partial rotary, e.g. dims = D/4). Scores then
// depend on q and k only through their relative position. Linear attention rotates q and k
// before its feature map, φ(R_i q_i)·φ(R_j k_j) (the rotation applied to Q and K as everywhere
// else; not RoFormer's eq. 19, which rotates φ(q), φ(k) in the numerator only), and Linformer
// rotates each key at its position before projecting, (R_i q_i)·Σ_j E[r, j] R_j k_j.
struct RotaryEmbedding {
  double theta = 10000.0;  // base θ: finite, > 0
  std::int64_t dims = 0;   // rotated dimensions: even, in [2, D]; 0 = all D (D even)
  RopeLayout layout = RopeLayout::kHalves;
  // Default positions: key j at offset + j, query i at offset + (S_k - S_q) + i (the last
  // query aligned with the last key, as the causal mask is). Over a KvCache: key j at
  // offset + j (its cache index), query i at offset + L - S_q + i for a cache of L tokens.
  std::int64_t offset = 0;
  // Linear position scaling (position interpolation): positions are divided by it. >= 1
  // stretches a model to longer contexts; finite, > 0.
  double linear_scaling = 1.0;
  // Explicit positions, one per query row / key row (each >= 0), replacing the defaults
  // (offset still added). Empty = defaults. Not accepted over a KvCache (its keys are
  // rotated at their cache index when appended).
  std::vector<std::int64_t> q_positions, k_positions;
};

// Which distance ALiBi penalises.
enum class AlibiForm {
  kCausal,     // bias -slope·(i - j): the decoder form (Press et al.), for keys j <= i
  kSymmetric,  // bias -slope·|i - j|: the bidirectional (encoder) form
};

// ALiBi (Press et al., "Train Short, Test Long"): score(i, j) += bias_h(i - j), computed per
// tile in the kernel, never stored. i and j are positions as above (query i at
// i + S_k - S_q; over a cache, absolute), so a decode step sees the same biases as the
// full sequence.
struct Alibi {
  std::vector<float> slopes;        // one per query head (finite); empty = alibi_slopes(H_q)
  std::optional<AlibiForm> form{};  // default: kCausal under a causal mask, else kSymmetric
};

// The published slopes for `heads` heads: with n = 2^floor(log2 heads), the geometric
// sequence 2^(-8k/n), k = 1..n, followed (when heads is not a power of two) by the odd
// terms 2^(-4(2k-1)/n), k = 1..heads-n, of the sequence for 2n heads. Throws Error unless
// 1 <= heads <= 2^20.
std::vector<float> alibi_slopes(std::int64_t heads);

// The sinusoidal absolute encoding of Vaswani et al.: adds PE(pos, 2p) = sin(pos·10000^(-2p/d))
// and PE(pos, 2p+1) = cos(pos·10000^(-2p/d)) to x [B, 1, S, d_model] (heads axis of extent
// 1; strided), pos = offset + s; an odd d_model ends with a sine. Throws Error (and writes
// nothing) for a bad view or a negative offset.
void add_sinusoidal_positions(const Tensor& x, std::int64_t offset = 0);

}  // namespace seqattn
