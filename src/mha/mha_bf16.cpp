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

// A contiguous fp32 copy of the B·S rows of a checked bf16 view.
std::vector<float> widened(const SequenceView<const bfloat16>& s) {
  std::vector<float> copy = detail::checked_vector<float>(
      detail::checked_product({s.batch, s.seq, s.features}, "x (fp32 staging)"),
      "x (fp32 staging)");
  detail::widen_to(as_tensor(s), copy.data());
  return copy;
}

// out (bf16, any row stride) = the contiguous fp32 rows of `result`, rounded to nearest even.
void narrow_into(const std::vector<float>& result, const SequenceView<bfloat16>& out) {
  const SequenceView<const float> rows{result.data(), out.batch, out.seq, out.features, 0};
  detail::narrow_into(as_tensor(rows), as_tensor(out));
}

std::vector<float> staged_out(const SequenceView<bfloat16>& out) {
  return detail::checked_vector<float>(
      detail::checked_product({out.batch, out.seq, out.features}, "out (fp32 staging)"),
      "out (fp32 staging)");
}

}  // namespace

MhaRecord MultiHeadAttention::forward(const SequenceView<const bfloat16>& x,
                                      const SequenceView<bfloat16>& out, const Mask& mask,
                                      const std::optional<Tensor>& weights) {
  const std::int64_t d_model = impl_->config.d_model;
  detail::check_sequence("x", x, d_model);
  detail::check_sequence("out", out, d_model);
  const std::vector<float> x32 = widened(x);
  std::vector<float> out32 = staged_out(out);
  const SequenceView<const float> rows{x32.data(), x.batch, x.seq, d_model, 0};
  const MhaRecord record = forward_rows(
      rows, rows, true, SequenceView<float>{out32.data(), out.batch, out.seq, d_model, 0}, mask,
      weights, true);
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
  const std::vector<float> q32 = widened(x_q), kv32 = widened(x_kv);
  std::vector<float> out32 = staged_out(out);
  const MhaRecord record = forward_rows(
      SequenceView<const float>{q32.data(), x_q.batch, x_q.seq, d_model, 0},
      SequenceView<const float>{kv32.data(), x_kv.batch, x_kv.seq, d_model, 0}, false,
      SequenceView<float>{out32.data(), out.batch, out.seq, d_model, 0}, mask, weights, true);
  narrow_into(out32, out);
  return record;
}

}  // namespace seqattn
