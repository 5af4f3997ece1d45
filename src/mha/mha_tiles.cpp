// MultiHeadAttention's projections on AMX tiles or their emulation (gemm_bf16_tiles.hpp): the
// choice of path and the packed weights. A layer runs in bf16 the way a PyTorch bf16 module
// does: every GEMM's operands are bf16 (the weights rounded once, when packed; the activations
// and the concatenated heads while packed), products accumulate in fp32, biases add in fp32,
// and the attention rounds the projected q, k, v to bf16 (fp32_precision = bf16).
#include "src/kernel/amx/tile_backend.hpp"
#include "src/kernel/compute_path.hpp"
#include "src/mha/mha_impl.hpp"

namespace seqattn {

detail::ComputePath MultiHeadAttention::Impl::projection_path(bool bf16_activations) const {
  if (!bf16_activations && config.fp32_precision != Fp32Precision::kBf16) {
    return detail::ComputePath::kFp32;
  }
  const detail::ComputePath path = detail::bf16_path_for_runs();
  const bool tiles =
      path == detail::ComputePath::kAmxBf16 || path == detail::ComputePath::kAmxEmulated;
  return tiles ? path : detail::ComputePath::kFp32;
}

void MultiHeadAttention::Impl::pack_tile_weights() {
  const std::int64_t d = config.d_model;
  if (!tile_q) tile_q.emplace(w_qkv.data(), qkv_width, d, d);
  if (!tile_kv) tile_kv.emplace(w_qkv.data() + d, qkv_width, d, 2 * kv_width);
  if (config.output_projection && !tile_o) tile_o.emplace(w_o.data(), d, d, d);
}

void MultiHeadAttention::Impl::drop_tile_weights() {
  tile_q.reset();
  tile_kv.reset();
  tile_o.reset();
}

void MultiHeadAttention::Impl::tile_pack(const float* x, std::int64_t ldx, std::int64_t rows) {
  tile_a.pack(x, ldx, rows, config.d_model, threads());
}

void MultiHeadAttention::Impl::tile_multiply(detail::ComputePath path, const detail::TilePackedB& w,
                                             float* c, std::int64_t ldc) const {
  const detail::amx::TileBackend& backend = path == detail::ComputePath::kAmxBf16
                                                ? detail::amx::amx_tile_backend()
                                                : detail::amx::emulated_tile_backend();
  detail::tile_gemm(backend, tile_a, w, c, ldc, threads());
}

}  // namespace seqattn
