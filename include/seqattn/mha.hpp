// MultiHeadAttention: the transformer layer of the reference documents,
//   Q = X·W_Q (+ b_Q), K = X·W_K (+ b_K), V = X·W_V (+ b_V),
//   heads = attend(Q, K, V) per head,  out = concat(heads)·W_O (+ b_O),
// over any attention variant. The configuration (what to compute) is separate from running it;
// weights are copied in once, forward() runs on caller buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "seqattn/attention.hpp"
#include "seqattn/half.hpp"
#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

// A [batch, seq, features] activation, row-major. Consecutive tokens are `row_stride` floats
// apart (0 means `features`, i.e. contiguous rows) and batches seq·row_stride apart, so the
// batch × seq rows form one matrix.
template <class T>
struct SequenceView {
  T* data = nullptr;
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t features = 0;
  std::int64_t row_stride = 0;

  std::int64_t stride() const { return row_stride == 0 ? features : row_stride; }
  operator SequenceView<const T>() const { return {data, batch, seq, features, row_stride}; }
};

struct MhaConfig {
  std::int64_t d_model = 0;
  std::int64_t num_heads = 1;     // H; d_k = d_v = d_model / H
  std::int64_t num_kv_heads = 0;  // 0 = num_heads. GQA/MQA: W_K, W_V have num_kv_heads·d_k columns
  bool bias = false;              // the four projections carry biases (all must then be set)
  // false: out = concat(heads), no W_O (the documents' SingleHeadSelfAttention).
  bool output_projection = true;
  VariantSpec variant = DenseSpec{};  // any variant, exactly as in attend()
  int threads = 0;                    // 0 = all available cores
  // Positional encodings: the sinusoidal absolute one (Vaswani et al.) added to the inputs
  // before the projections (positions 0..S-1 of each sequence; the inputs are not modified),
  // and RoPE / ALiBi inside the attention kernel (AttentionOptions::rope / ::alibi).
  bool sinusoidal_positions = false;
  std::optional<RotaryEmbedding> rope{};
  std::optional<Alibi> alibi{};
  // kBf16 runs the layer in bf16 as forward() on bf16 activations does: where bf16 operands take
  // a tile path (AMX, or its emulation when SEQATTN_COMPUTE_PATH=amx-emulated) the projections
  // are bf16 GEMMs on tiles; elsewhere they stay fp32 and only the attention rounds the
  // projected q, k, v to bf16 (AttentionOptions::fp32_precision). MhaRecord::projection_path
  // says which ran.
  Fp32Precision fp32_precision = Fp32Precision::kIeee;
};

enum class Projection { kQuery, kKey, kValue, kOutput };

// Where the time went: the benchmark shows projections vs attention vs the rest.
struct MhaRecord {
  RunRecord attention;            // attend()'s own record (variant, FLOPs, kernel time)
  double projection_seconds = 0;  // the projection GEMMs
  double attention_seconds = 0;   // the attend() call, validation included
  // The whole forward(); what exceeds projection + attention is the layer's own overhead
  // (argument checks, bias additions, workspace; heads are split and merged by views, free).
  double total_seconds = 0;
  double projection_flops = 0;  // 2·rows·in·out summed over the projections
  // What the projection GEMMs ran on: "fp32", or "amx-bf16" / "amx-emulated" (bf16 tiles).
  std::string projection_path = "fp32";
};

// Not thread-safe: forward() reuses a workspace owned by the object. Use one object per thread.
// The object keeps what its forwards need (projected activations, the attention's and the
// GEMMs' scratch, copies of inputs with sinusoidal positions or widened from bf16) at the
// largest size met, so that a steady loop of forwards allocates nothing after its first.
class MultiHeadAttention {
 public:
  // Throws Error naming the field for d_model < 1, num_heads < 1, d_model not divisible by
  // num_heads, num_heads not a multiple of num_kv_heads, threads < 0.
  explicit MultiHeadAttention(const MhaConfig& config);
  ~MultiHeadAttention();
  MultiHeadAttention(MultiHeadAttention&&) noexcept;
  MultiHeadAttention& operator=(MultiHeadAttention&&) noexcept;

  const MhaConfig& config() const;
  std::int64_t head_dim() const;  // d_k = d_v = d_model / num_heads
  std::int64_t kv_heads() const;  // num_kv_heads, resolved
  // Columns of a projection's weight in [in, out] layout: d_model for Q and O,
  // num_kv_heads·d_k for K and V.
  std::int64_t out_features(Projection which) const;

  // Copies a weight stored [in, out] row-major (the documents' Q = X·W_Q), rows `row_stride`
  // floats apart (0 = cols). Expects rows = d_model (H·d_v for W_O), cols = out_features(which).
  void set_weights(Projection which, const float* data, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_stride = 0);
  // Copies a PyTorch nn.Linear weight stored [out_features, in_features] (y = x·Wᵀ).
  void set_weights_pytorch(Projection which, const float* data, std::int64_t out_features,
                           std::int64_t in_features);
  // Copies a bias of out_features(which) floats. Error(kUnsupported) when config.bias is false.
  void set_bias(Projection which, const float* data, std::int64_t size);
  // The same from bfloat16 (a bf16 model's weights), widened exactly; the tile path rounds the
  // stored weights back to bf16 (exact for these) when it packs them.
  void set_weights(Projection which, const bfloat16* data, std::int64_t rows, std::int64_t cols,
                   std::int64_t row_stride = 0);
  void set_weights_pytorch(Projection which, const bfloat16* data, std::int64_t out_features,
                           std::int64_t in_features);
  void set_bias(Projection which, const bfloat16* data, std::int64_t size);

  // Self-attention: out [B, S, d_model] from x [B, S, d_model]. `mask` and `weights`
  // ([B, H, S, S]) are passed to attend(). out may alias x (x is fully read first).
  // Throws Error (nothing written) for bad views, weights or biases not set, and whatever
  // attend() raises for the variant (e.g. kUnsupported, kNotImplemented).
  MhaRecord forward(const SequenceView<const float>& x, const SequenceView<float>& out,
                    const Mask& mask = {}, const std::optional<Tensor>& weights = {});
  // Cross attention: queries from x_q [B, S_q, d_model], keys/values from x_kv [B, S_k, d_model];
  // out is [B, S_q, d_model], weights [B, H, S_q, S_k].
  MhaRecord forward(const SequenceView<const float>& x_q, const SequenceView<const float>& x_kv,
                    const SequenceView<float>& out, const Mask& mask = {},
                    const std::optional<Tensor>& weights = {});
  // bfloat16 activations: a bf16 layer. Where bf16 operands take a tile path (AMX, or its
  // emulation) every GEMM runs on bf16 tiles with fp32 accumulation (weights and the
  // concatenated heads rounded to bf16 while packed, biases added in fp32) and the attention
  // rounds q, k, v to bf16, as a PyTorch bf16 module rounds every op's output. Elsewhere x is
  // widened exactly and the fp32 layer runs (its attention by config.fp32_precision). out is
  // rounded to nearest even once. Same checks, and nothing written on an error.
  MhaRecord forward(const SequenceView<const bfloat16>& x, const SequenceView<bfloat16>& out,
                    const Mask& mask = {}, const std::optional<Tensor>& weights = {});
  MhaRecord forward(const SequenceView<const bfloat16>& x_q,
                    const SequenceView<const bfloat16>& x_kv, const SequenceView<bfloat16>& out,
                    const Mask& mask = {}, const std::optional<Tensor>& weights = {});

 private:
  struct Impl;
  template <class T>
  void copy_weights(Projection which, const T* data, std::int64_t rows, std::int64_t cols,
                    std::int64_t row_stride);
  template <class T>
  void copy_weights_pytorch(Projection which, const T* data, std::int64_t out_features,
                            std::int64_t in_features);
  template <class T>
  void copy_bias(Projection which, const T* data, std::int64_t size);
  // The layer on fp32 rows; bf16_activations: they were bf16 (widened), so the layer runs in
  // bf16 where a tile path is chosen.
  MhaRecord forward_rows(const SequenceView<const float>& x_q,
                         const SequenceView<const float>& x_kv, bool self,
                         const SequenceView<float>& out, const Mask& mask,
                         const std::optional<Tensor>& weights, bool bf16_activations);
  MhaRecord run_forward(const SequenceView<const float>& x_q, const SequenceView<const float>& x_kv,
                        bool self, const SequenceView<float>& out, const Mask& mask,
                        const std::optional<Tensor>& weights, bool bf16_activations);
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqattn
