// MultiHeadAttention's private state, shared by the weight setters (mha.cpp) and the forward
// pass (mha_forward.cpp).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/mha.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/workspace.hpp"
#include "src/core/problem.hpp"
#include "src/gemm/gemm.hpp"
#include "src/gemm/gemm_bf16_tiles.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {

struct MultiHeadAttention::Impl {
  MhaConfig config;
  std::int64_t d_k = 0;        // = d_v
  std::int64_t h_kv = 0;       // resolved num_kv_heads
  std::int64_t kv_width = 0;   // h_kv · d_k, the columns of W_K and W_V
  std::int64_t qkv_width = 0;  // d_model + 2·kv_width

  // W_Q, W_K and W_V side by side as one [d_model, qkv_width] matrix, so that self-attention
  // projects with a single GEMM; W_O is [d_model, d_model]. Both [in, out] row-major.
  std::vector<float> w_qkv, w_o;
  std::vector<float> b_qkv, b_o;  // sized only when config.bias
  std::array<bool, 4> weights_set{};
  std::array<bool, 4> bias_set{};

  // The tile path's operands (mha_tiles.cpp): W_Q, [W_K | W_V] and W_O rounded to bf16 and
  // packed the first time a forward runs on tiles, dropped whenever a weight is set; and the
  // packed activations of the GEMM being run.
  std::optional<detail::TilePackedB> tile_q, tile_kv, tile_o;
  detail::TilePackedA tile_a;

  // The attention plan of the last forward, reused while the shape, the causal flag and the
  // precision stay (the rest of its options is the config, copied only to plan): a forward
  // re-plans only when they change, and its masks and weights are run arguments.
  std::optional<AttentionPlan> plan;
  bool plan_causal = false;
  Fp32Precision plan_precision = Fp32Precision::kIeee;
  const AttentionPlan& plan_for(const AttentionShape& shape, bool causal, Fp32Precision precision);

  // Projected activations, reused between calls (uninitialised: every element is written by a
  // beta = 0 GEMM before it is read).
  std::unique_ptr<float[]> workspace;
  std::size_t workspace_floats = 0;

  // The attention run's scratch (AttentionPlan::qkv_workspace_bytes), grown to the largest
  // plan met, so a steady forward's attention allocates nothing either.
  WorkspaceBuffer attention_workspace;

  // The fp32 projections' GEMM packing scratch, grown to the largest product met
  // (sgemm_pack_floats), so a steady forward's projections allocate nothing either.
  WorkspaceBuffer gemm_pack;
  std::span<float> pack_for(std::int64_t m, std::int64_t n, std::int64_t k) {
    const std::size_t floats = detail::sgemm_pack_floats(m, n, k, threads());
    return {reinterpret_cast<float*>(gemm_pack.get(4 * floats).data()), floats};
  }

  // Copies of a forward's inputs and output, kept between calls and grown to the largest met,
  // so that a steady forward with sinusoidal positions or on bf16 activations allocates
  // nothing either: x_q and x_kv plus the positions, bf16 x_q and x_kv widened to fp32 (the
  // positions then added to these in place), and the fp32 output rounded into a bf16 out
  // (detail::grown).
  std::vector<float> positions_q, positions_kv, widened_q, widened_kv, staged_out;

  float* scratch(std::size_t floats) {
    if (workspace_floats < floats) {
      workspace = std::make_unique_for_overwrite<float[]>(floats);
      workspace_floats = floats;
    }
    return workspace.get();
  }

  // First column of a projection's weights in the fused matrix (Q, K, V) or 0 for W_O.
  std::int64_t column_offset(Projection which) const {
    switch (which) {
      case Projection::kQuery:
        return 0;
      case Projection::kKey:
        return config.d_model;
      case Projection::kValue:
        return config.d_model + kv_width;
      case Projection::kOutput:
        return 0;
    }
    return 0;
  }
  int threads() const { return config.threads; }

  // Throws Error naming the first weight or bias forward() needs that was never set.
  void check_ready() const;

  // mha_forward.cpp. One forward's projected activations, in the workspace: Q|K|V side by side
  // (self) or Q then K|V (cross), then the concatenated heads (with an output projection).
  struct Buffers {
    float* q = nullptr;
    float* kv = nullptr;
    float* concat = nullptr;
    std::int64_t q_ld = 0, kv_ld = 0, rows_q = 0, rows_kv = 0;
  };
  Buffers buffers(const SequenceView<const float>& xq, const SequenceView<const float>& xkv,
                  bool self);
  // Q = x_q·W_Q and K|V = x_kv·[W_K | W_V] on `path` (the fp32 GEMM, or bf16 tiles); biases
  // apart (add_input_biases), so the projection time excludes them.
  void project_inputs(detail::ComputePath path, const SequenceView<const float>& xq,
                      const SequenceView<const float>& xkv, bool self, const Buffers& b);
  void add_input_biases(bool self, const Buffers& b);
  // out = concat·W_O on `path`.
  void project_output(detail::ComputePath path, const Buffers& b, const SequenceView<float>& out);

  // mha_tiles.cpp. The path of the projection GEMMs: a tile path (kAmxBf16, kAmxEmulated) when
  // the layer runs in bf16 (bf16 activations, or config.fp32_precision = kBf16) and bf16
  // operands take that path here (bf16_path_for_runs(), which throws the Error of a forced path
  // that cannot run); kFp32 otherwise.
  detail::ComputePath projection_path(bool bf16_activations) const;
  // tile_a = x [rows, d_model] (rows ldx apart) rounded to bf16 and packed; then
  // C [rows, n] (rows ldc apart) = tile_a · w on `path`'s tiles.
  void tile_pack(const float* x, std::int64_t ldx, std::int64_t rows);
  void tile_multiply(detail::ComputePath path, const detail::TilePackedB& w, float* c,
                     std::int64_t ldc) const;
  // Packs the weights the tile path needs (once; set_weights drops them).
  void pack_tile_weights();
  void drop_tile_weights();
};

namespace detail {

// `copy` with at least `floats` elements, never shrunk (an Error naming `argument` when it
// cannot be allocated; the name is built only then).
inline float* grown(std::vector<float>& copy, std::int64_t floats, const char* argument) {
  if (static_cast<std::int64_t>(copy.size()) < floats)
    copy = checked_vector<float>(floats, argument);
  return copy.data();
}

// A [batch, seq, features] view's fields against d_model: an Error naming `name`.field.
// Names are built only to throw: forward() runs in steady loops (a name joined on every call
// was two allocations a self-attention forward, three a cross-attention one).
template <class T>
void check_sequence(std::string_view name, const SequenceView<T>& s, std::int64_t d_model) {
  const auto str = [](std::int64_t x) { return std::to_string(x); };
  const auto field = [&](const char* f) { return std::string(name) + f; };
  if (s.data == nullptr) fail(field(".data"), "a non-null pointer", "nullptr");
  if (s.batch < 1) fail(field(".batch"), ">= 1", str(s.batch));
  if (s.seq < 1) fail(field(".seq"), ">= 1", str(s.seq));
  if (s.features != d_model) fail(field(".features"), str(d_model) + " (d_model)", str(s.features));
  if (s.row_stride != 0 && s.row_stride < s.features) {
    fail(field(".row_stride"), "0 (contiguous) or >= features = " + str(s.features),
         str(s.row_stride));
  }
  // The span of the rows in bytes (UBSan found this product overflowing unchecked).
  checked_product({s.batch, s.seq, s.stride(), 4}, name, " (batch x seq x row stride)");
}

}  // namespace detail

}  // namespace seqattn
