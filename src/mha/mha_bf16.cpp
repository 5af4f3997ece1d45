// MultiHeadAttention over bfloat16 activations: x widened exactly into a contiguous fp32 copy,
// the layer run as a bf16 layer (on a tile path its GEMMs and attention in bf16, mha_tiles.cpp;
// otherwise the fp32 layer, its attention by config.fp32_precision), and out rounded to nearest
// even once, from an fp32 result that is complete: an Error writes nothing.
#include <string>
#include <vector>

#include "seqattn/mha.hpp"
#include "src/mha/mha_impl.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/staging.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

// A sequence view as a [B, 1, S, features] tensor view (rows `stride` apart), so the staging
// helpers of src/runtime/staging.hpp widen and narrow it.
template <class T>
TensorView<T> as_tensor(const SequenceView<T>& s) {
  return {s.data, {s.batch, 1, s.seq, s.features}, {s.seq * s.stride(), 0, s.stride(), 1}};
}

// The B·S rows of a checked bf16 view widened into `copy` (contiguous fp32, the layer's).
SequenceView<const float> widened(const SequenceView<const bfloat16>& s, std::vector<float>& copy) {
  float* const rows =
      detail::grown(copy, detail::checked_product({s.batch, s.seq, s.features}, "x (fp32 staging)"),
                    "x (fp32 staging)");
  detail::widen_to(as_tensor(s), rows);
  return {rows, s.batch, s.seq, s.features, 0};
}

// The fp32 rows a bf16 out is staged in (contiguous, the layer's `copy`).
SequenceView<float> staged(const SequenceView<bfloat16>& out, std::vector<float>& copy) {
  float* const rows = detail::grown(
      copy, detail::checked_product({out.batch, out.seq, out.features}, "out (fp32 staging)"),
      "out (fp32 staging)");
  return {rows, out.batch, out.seq, out.features, 0};
}

// out (bf16, any row stride) = the staged fp32 rows, rounded to nearest even.
void narrow_into(const SequenceView<float>& rows, const SequenceView<bfloat16>& out) {
  detail::narrow_into(
      as_tensor(SequenceView<const float>{rows.data, rows.batch, rows.seq, rows.features, 0}),
      as_tensor(out));
}

}  // namespace

MhaRecord MultiHeadAttention::forward(const SequenceView<const bfloat16>& x,
                                      const SequenceView<bfloat16>& out, const Mask& mask,
                                      const std::optional<Tensor>& weights) {
  const std::int64_t d_model = impl_->config.d_model;
  detail::check_sequence("x", x, d_model);
  detail::check_sequence("out", out, d_model);
  Impl& m = *impl_;
  const SequenceView<const float> rows = widened(x, m.widened_q);
  const SequenceView<float> out32 = staged(out, m.staged_out);
  const MhaRecord record = forward_rows(rows, rows, true, out32, mask, weights, true);
  narrow_into(out32, out);
  return record;
}

MhaRecord MultiHeadAttention::forward(const SequenceView<const bfloat16>& x_q,
                                      const SequenceView<const bfloat16>& x_kv,
                                      const SequenceView<bfloat16>& out, const Mask& mask,
                                      const std::optional<Tensor>& weights) {
  const std::int64_t d_model = impl_->config.d_model;
  detail::check_sequence("x_q", x_q, d_model);
  detail::check_sequence("x_kv", x_kv, d_model);
  detail::check_sequence("out", out, d_model);
  Impl& m = *impl_;
  const SequenceView<const float> q32 = widened(x_q, m.widened_q);
  const SequenceView<const float> kv32 = widened(x_kv, m.widened_kv);
  const SequenceView<float> out32 = staged(out, m.staged_out);
  const MhaRecord record = forward_rows(q32, kv32, false, out32, mask, weights, true);
  narrow_into(out32, out);
  return record;
}

}  // namespace seqattn
