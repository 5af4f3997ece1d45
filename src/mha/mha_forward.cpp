// MultiHeadAttention::forward: projections by the packed GEMM, heads split and merged through
// strided views (no transposing copies), attention by the layer's plan for any variant.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <new>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/mha.hpp"
#include "src/gemm/gemm.hpp"
#include "src/kernel/compute_path.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/mha/mha_impl.hpp"
#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

using Clock = std::chrono::steady_clock;
using detail::check_sequence;
using detail::Transpose;

using detail::str;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void check_out(const SequenceView<float>& out, const SequenceView<const float>& x_q,
               std::int64_t d_model) {
  check_sequence("out", out, d_model);
  if (out.batch != x_q.batch)
    detail::fail("out.batch", str(x_q.batch) + " (the queries' batch)", str(out.batch));
  if (out.seq != x_q.seq)
    detail::fail("out.seq", str(x_q.seq) + " (the queries' seq)", str(out.seq));
}

// Bytes [first, last) spanned by the B·S rows of a sequence view.
detail::ByteRange span_of(const SequenceView<float>& s) {
  const auto first = reinterpret_cast<std::uintptr_t>(s.data);
  const std::int64_t elements = (s.batch * s.seq - 1) * s.stride() + s.features;
  return {first, first + static_cast<std::uintptr_t>(elements) * sizeof(float)};
}

// rows × cols block (ld apart) += bias broadcast over rows. A small block, or one thread, runs
// a plain loop (RunOnTeam): libgomp allocates a team for every one-thread region it enters.
void add_bias(float* c, std::int64_t rows, std::int64_t cols, std::int64_t ld, const float* bias,
              int threads) {
  const int nt = rows * cols > (1 << 16) ? detail::resolve_threads(threads, "threads") : 1;
  detail::RunOnTeam(nt, [&](const auto& team) {
    team.for_static(rows, [&](std::int64_t r) {
      float* row = c + r * ld;
      for (std::int64_t j = 0; j < cols; ++j) row[j] += bias[j];
    });
  });
}

// A projected [B, S, heads·d] activation (rows ld floats apart) seen as [B, heads, S, d]: bshd()
// generalised to a row stride, since the fused Q|K|V rows are wider than one projection.
ConstTensor head_view(const float* data, std::int64_t batch, std::int64_t seq, std::int64_t heads,
                      std::int64_t d, std::int64_t ld) {
  return {data, {batch, heads, seq, d}, {seq * ld, d, ld, 1}};
}

}  // namespace

const AttentionPlan& MultiHeadAttention::Impl::plan_for(const AttentionShape& shape, bool causal,
                                                        Fp32Precision precision) {
  if (plan && plan->shape() == shape && plan_causal == causal && plan_precision == precision) {
    return *plan;
  }
  AttentionOptions options;  // what defines the computation; the mask's rest is run arguments
  options.variant = config.variant;
  options.mask.causal = causal;
  options.threads = threads();
  options.rope = config.rope;
  options.alibi = config.alibi;
  options.fp32_precision = precision;
  plan.reset();  // a make_plan that throws leaves no plan behind
  plan = make_plan(shape, options);
  plan_causal = causal;
  plan_precision = precision;
  return *plan;
}

void MultiHeadAttention::Impl::check_ready() const {
  constexpr const char* kWeights[4] = {"W_Q", "W_K", "W_V", "W_O"};
  constexpr const char* kBiases[4] = {"b_Q", "b_K", "b_V", "b_O"};
  const std::size_t used = config.output_projection ? 4 : 3;
  for (std::size_t i = 0; i < used; ++i) {
    if (!weights_set[i]) {
      detail::fail(kWeights[i], "set by set_weights() or set_weights_pytorch() before forward()",
                   "not set");
    }
    if (config.bias && !bias_set[i]) {
      detail::fail(kBiases[i], "set by set_bias() before forward() (config.bias = true)",
                   "not set");
    }
  }
}

namespace {

// x plus the sinusoidal encoding, contiguous, in `rows`: added in place when x already lives
// there (`in_place`: the layer's copy of bf16 activations widened to fp32, contiguous; copying
// it again cost a pass over x), else copied there first (the caller's x is read, never
// written: out may alias it).
SequenceView<const float> with_positions(const SequenceView<const float>& x,
                                         std::vector<float>& rows, bool in_place) {
  const std::int64_t n = x.batch * x.seq, f = x.features;
  float* rows_out = rows.data();
  if (!in_place) {
    rows_out = detail::grown(rows, detail::checked_product({n, f}, "x"), "x");
    for (std::int64_t r = 0; r < n; ++r) {
      std::copy(x.data + r * x.stride(), x.data + r * x.stride() + f, rows_out + r * f);
    }
  }
  add_sinusoidal_positions(Tensor{rows_out, {x.batch, 1, x.seq, f}, {x.seq * f, x.seq * f, f, 1}});
  return {rows_out, x.batch, x.seq, f, 0};
}

}  // namespace

MhaRecord MultiHeadAttention::forward(const SequenceView<const float>& x,
                                      const SequenceView<float>& out, const Mask& mask,
                                      const std::optional<Tensor>& weights) {
  check_sequence("x", x, impl_->config.d_model);
  return forward_rows(x, x, true, out, mask, weights, false);
}

MhaRecord MultiHeadAttention::forward(const SequenceView<const float>& x_q,
                                      const SequenceView<const float>& x_kv,
                                      const SequenceView<float>& out, const Mask& mask,
                                      const std::optional<Tensor>& weights) {
  check_sequence("x_q", x_q, impl_->config.d_model);
  check_sequence("x_kv", x_kv, impl_->config.d_model);
  return forward_rows(x_q, x_kv, false, out, mask, weights, false);
}

// Checked views in; the sinusoidal positions added to copies when the layer has them.
MhaRecord MultiHeadAttention::forward_rows(const SequenceView<const float>& x_q,
                                           const SequenceView<const float>& x_kv, bool self,
                                           const SequenceView<float>& out, const Mask& mask,
                                           const std::optional<Tensor>& weights,
                                           bool bf16_activations) {
  if (!self && x_kv.batch != x_q.batch)
    detail::fail("x_kv.batch", str(x_q.batch) + " (x_q's batch)", str(x_kv.batch));
  if (!impl_->config.sinusoidal_positions) {
    return run_forward(x_q, x_kv, self, out, mask, weights, bf16_activations);
  }
  // Over bf16 activations x_q and x_kv are the layer's widened copies: the positions go there.
  Impl& m = *impl_;
  const bool in_place = bf16_activations;
  const SequenceView<const float> xq =
      with_positions(x_q, in_place ? m.widened_q : m.positions_q, in_place);
  const SequenceView<const float> xkv =
      self ? xq : with_positions(x_kv, in_place ? m.widened_kv : m.positions_kv, in_place);
  return run_forward(xq, xkv, self, out, mask, weights, bf16_activations);
}

MultiHeadAttention::Impl::Buffers MultiHeadAttention::Impl::buffers(
    const SequenceView<const float>& xq, const SequenceView<const float>& xkv, bool self) {
  const std::int64_t d_model = config.d_model;
  Buffers b;
  b.rows_q = xq.batch * xq.seq;
  b.rows_kv = xkv.batch * xkv.seq;
  b.q_ld = self ? qkv_width : d_model;
  b.kv_ld = self ? qkv_width : 2 * kv_width;
  const std::int64_t proj_floats =
      self ? detail::checked_product({b.rows_q, qkv_width}, "workspace (rows x Q|K|V width)")
           : detail::checked_product({b.rows_q, d_model}, "workspace (rows_q x d_model)") +
                 detail::checked_product({b.rows_kv, b.kv_ld}, "workspace (rows_kv x K|V width)");
  const std::int64_t concat_floats =
      config.output_projection ? detail::checked_product({b.rows_q, d_model}, "workspace") : 0;
  const std::int64_t ws_floats =
      detail::checked_product({proj_floats + concat_floats, 4}, "workspace bytes") / 4;
  float* ws = nullptr;
  try {
    ws = scratch(static_cast<std::size_t>(ws_floats));
  } catch (const std::bad_alloc&) {
    throw Error(ErrorKind::kInvalidArgument, "x", "a workspace that fits in memory",
                str(ws_floats * 4) + " bytes for the projections", "use a smaller batch or seq");
  }
  b.q = ws;
  b.kv = self ? ws + d_model : ws + b.rows_q * d_model;
  b.concat = ws + proj_floats;
  return b;
}

// Self-attention projects x once through the fused [W_Q | W_K | W_V] (on tiles: x packed once,
// two products); cross attention projects x_q through W_Q and x_kv through [W_K | W_V].
void MultiHeadAttention::Impl::project_inputs(detail::ComputePath path,
                                              const SequenceView<const float>& xq,
                                              const SequenceView<const float>& xkv, bool self,
                                              const Buffers& b) {
  const std::int64_t d_model = config.d_model;
  if (path != detail::ComputePath::kFp32) {
    pack_tile_weights();
    tile_pack(xq.data, xq.stride(), b.rows_q);
    tile_multiply(path, *tile_q, b.q, b.q_ld);
    if (!self) tile_pack(xkv.data, xkv.stride(), b.rows_kv);
    tile_multiply(path, *tile_kv, b.kv, b.kv_ld);
    return;
  }
  const float* w = w_qkv.data();
  if (self) {
    detail::sgemm(Transpose::kNo, Transpose::kNo, b.rows_q, qkv_width, d_model, 1.0f, xq.data,
                  xq.stride(), w, qkv_width, 0.0f, b.q, qkv_width, threads(),
                  pack_for(b.rows_q, qkv_width, d_model));
    return;
  }
  detail::sgemm(Transpose::kNo, Transpose::kNo, b.rows_q, d_model, d_model, 1.0f, xq.data,
                xq.stride(), w, qkv_width, 0.0f, b.q, d_model, threads(),
                pack_for(b.rows_q, d_model, d_model));
  detail::sgemm(Transpose::kNo, Transpose::kNo, b.rows_kv, 2 * kv_width, d_model, 1.0f, xkv.data,
                xkv.stride(), w + d_model, qkv_width, 0.0f, b.kv, b.kv_ld, threads(),
                pack_for(b.rows_kv, 2 * kv_width, d_model));
}

void MultiHeadAttention::Impl::add_input_biases(bool self, const Buffers& b) {
  if (!config.bias) return;
  if (self) {
    add_bias(b.q, b.rows_q, qkv_width, qkv_width, b_qkv.data(), threads());
    return;
  }
  add_bias(b.q, b.rows_q, config.d_model, config.d_model, b_qkv.data(), threads());
  add_bias(b.kv, b.rows_kv, 2 * kv_width, b.kv_ld, b_qkv.data() + config.d_model, threads());
}

void MultiHeadAttention::Impl::project_output(detail::ComputePath path, const Buffers& b,
                                              const SequenceView<float>& out) {
  const std::int64_t d_model = config.d_model;
  if (path != detail::ComputePath::kFp32) {
    tile_pack(b.concat, d_model, b.rows_q);
    tile_multiply(path, *tile_o, out.data, out.stride());
    return;
  }
  detail::sgemm(Transpose::kNo, Transpose::kNo, b.rows_q, d_model, d_model, 1.0f, b.concat, d_model,
                w_o.data(), d_model, 0.0f, out.data, out.stride(), threads(),
                pack_for(b.rows_q, d_model, d_model));
}

MhaRecord MultiHeadAttention::run_forward(const SequenceView<const float>& xq,
                                          const SequenceView<const float>& xkv, bool self,
                                          const SequenceView<float>& out, const Mask& mask,
                                          const std::optional<Tensor>& weights,
                                          bool bf16_activations) {
  Impl& m = *impl_;
  const auto start = Clock::now();
  const std::int64_t d_model = m.config.d_model, heads = m.config.num_heads;
  check_out(out, xq, d_model);
  m.check_ready();
  const detail::ComputePath path = m.projection_path(bf16_activations);
  if (weights && m.config.output_projection) {
    const detail::ByteRange rw = detail::check_view("weights", weights->data, weights->shape,
                                                    weights->strides, sizeof(float));
    if (rw.overlaps(span_of(out))) {
      detail::fail("weights", "memory disjoint from 'out'", "overlapping address ranges");
    }
  }
  const Impl::Buffers b = m.buffers(xq, xkv, self);

  MhaRecord record;
  const auto proj_start = Clock::now();
  m.project_inputs(path, xq, xkv, self, b);
  const auto proj_stop = Clock::now();
  m.add_input_biases(self, b);
  const auto attn_start = Clock::now();

  const std::int64_t batch = xq.batch, dk = m.d_k;
  const ConstTensor qv = head_view(b.q, batch, xq.seq, heads, dk, b.q_ld);
  const ConstTensor kvw = head_view(b.kv, batch, xkv.seq, m.h_kv, dk, b.kv_ld);
  const ConstTensor vv = head_view(b.kv + m.kv_width, batch, xkv.seq, m.h_kv, dk, b.kv_ld);
  // The heads' outputs land directly in [B, S, H·d_v] order (concatenated), or in out itself
  // when there is no output projection.
  float* const heads_out = m.config.output_projection ? b.concat : out.data;
  const std::int64_t heads_ld = m.config.output_projection ? d_model : out.stride();
  const Tensor ov{heads_out, {batch, heads, xq.seq, dk}, {xq.seq * heads_ld, dk, heads_ld, 1}};
  // On tiles the layer is bf16 throughout: q, k and v are rounded as a bf16 module's would be.
  const Fp32Precision precision =
      path != detail::ComputePath::kFp32 ? Fp32Precision::kBf16 : m.config.fp32_precision;
  const AttentionPlan& plan = m.plan_for(detail::shape_of(qv, kvw, vv, ov), mask.causal, precision);
  // The mask's key lengths, keep mask and bias, and the weights, as views: nothing is copied.
  RunArgs args = detail::run_args(mask);
  args.weights = weights;
  // The plan's workspace where its q/k/v runs take one (every variant on any path, with
  // the copies fp32_precision rounds, and the weights pass's scratch when weights are asked
  // for): held by the layer like the projections' buffers.
  const std::optional<std::size_t> attention_bytes =
      plan.qkv_workspace_bytes({.weights = weights.has_value()});
  if (attention_bytes) args.workspace = m.attention_workspace.get(*attention_bytes);
  record.attention = plan.run(qv, kvw, vv, ov, args);
  const auto attn_stop = Clock::now();

  if (m.config.output_projection) m.project_output(path, b, out);
  const auto out_proj_stop = Clock::now();
  if (m.config.output_projection && m.config.bias) {
    add_bias(out.data, b.rows_q, d_model, out.stride(), m.b_o.data(), m.threads());
  }
  record.projection_path = std::string(detail::to_string(path));
  const double in = static_cast<double>(d_model);
  record.projection_flops =
      2.0 * in *
      (static_cast<double>(b.rows_q) * d_model + static_cast<double>(b.rows_kv) * 2.0 * m.kv_width);
  if (m.config.output_projection) record.projection_flops += 2.0 * in * b.rows_q * d_model;
  record.projection_seconds =
      seconds_between(proj_start, proj_stop) + seconds_between(attn_stop, out_proj_stop);
  record.attention_seconds = seconds_between(attn_start, attn_stop);
  record.total_seconds = seconds_between(start, Clock::now());
  return record;
}

}  // namespace seqattn
