// MultiHeadAttention: configuration checks and the weight/bias setters.
#include <algorithm>
#include <string>
#include <utility>

#include "seqattn/error.hpp"
#include "seqattn/mha.hpp"
#include "src/mha/mha_impl.hpp"
#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

using detail::str;

const char* weight_name(Projection which) {
  switch (which) {
    case Projection::kQuery:
      return "W_Q";
    case Projection::kKey:
      return "W_K";
    case Projection::kValue:
      return "W_V";
    case Projection::kOutput:
      return "W_O";
  }
  return "W";
}

const char* bias_name(Projection which) {
  switch (which) {
    case Projection::kQuery:
      return "b_Q";
    case Projection::kKey:
      return "b_K";
    case Projection::kValue:
      return "b_V";
    case Projection::kOutput:
      return "b_O";
  }
  return "b";
}

std::size_t index(Projection which) { return static_cast<std::size_t>(which); }

}  // namespace

MultiHeadAttention::MultiHeadAttention(const MhaConfig& config) : impl_(std::make_unique<Impl>()) {
  if (config.d_model < 1) detail::fail("config.d_model", ">= 1", str(config.d_model));
  if (config.num_heads < 1) detail::fail("config.num_heads", ">= 1", str(config.num_heads));
  if (config.d_model % config.num_heads != 0) {
    detail::fail("config.d_model", "a multiple of num_heads = " + str(config.num_heads),
                 str(config.d_model), "each head gets d_model / num_heads features");
  }
  if (config.num_kv_heads < 0) {
    detail::fail("config.num_kv_heads", ">= 0 (0 = num_heads)", str(config.num_kv_heads));
  }
  const std::int64_t h_kv = config.num_kv_heads == 0 ? config.num_heads : config.num_kv_heads;
  if (config.num_heads % h_kv != 0) {
    detail::fail("config.num_kv_heads", "a divisor of num_heads = " + str(config.num_heads),
                 str(config.num_kv_heads),
                 "grouped-query attention shares each K/V head among "
                 "num_heads / num_kv_heads query heads");
  }
  detail::resolve_threads(config.threads, "config.threads");  // negative: Error
  if (config.fp32_precision != Fp32Precision::kIeee &&
      config.fp32_precision != Fp32Precision::kBf16) {
    detail::fail("config.fp32_precision", "Fp32Precision::kIeee or ::kBf16",
                 "the value " + str(static_cast<std::int64_t>(config.fp32_precision)));
  }
  Impl& m = *impl_;
  m.config = config;
  m.d_k = config.d_model / config.num_heads;
  m.h_kv = h_kv;
  m.kv_width = h_kv * m.d_k;
  m.qkv_width = config.d_model + 2 * m.kv_width;
  m.w_qkv.assign(static_cast<std::size_t>(config.d_model * m.qkv_width), 0.0f);
  m.w_o.assign(static_cast<std::size_t>(config.d_model * config.d_model), 0.0f);
  if (config.bias) {
    m.b_qkv.assign(static_cast<std::size_t>(m.qkv_width), 0.0f);
    m.b_o.assign(static_cast<std::size_t>(config.d_model), 0.0f);
  }
}

MultiHeadAttention::~MultiHeadAttention() = default;
MultiHeadAttention::MultiHeadAttention(MultiHeadAttention&&) noexcept = default;
MultiHeadAttention& MultiHeadAttention::operator=(MultiHeadAttention&&) noexcept = default;

const MhaConfig& MultiHeadAttention::config() const { return impl_->config; }
std::int64_t MultiHeadAttention::head_dim() const { return impl_->d_k; }
std::int64_t MultiHeadAttention::kv_heads() const { return impl_->h_kv; }

std::int64_t MultiHeadAttention::out_features(Projection which) const {
  const bool kv = which == Projection::kKey || which == Projection::kValue;
  return kv ? impl_->kv_width : impl_->config.d_model;
}

// The setters over float or bfloat16 data (widened exactly as they are copied).
template <class T>
void MultiHeadAttention::copy_weights(Projection which, const T* data, std::int64_t rows,
                                      std::int64_t cols, std::int64_t row_stride) {
  Impl& m = *impl_;
  const std::string name = weight_name(which);
  const std::int64_t want_cols = out_features(which);
  const std::int64_t want_rows = m.config.d_model;
  if (rows != want_rows) {
    detail::fail(name + ".rows",
                 str(want_rows) + " (d_model, the input features; layout [in, out])", str(rows));
  }
  if (cols != want_cols) {
    detail::fail(name + ".cols", str(want_cols) + " (the output features; layout [in, out])",
                 str(cols));
  }
  const std::int64_t ld = row_stride == 0 ? cols : row_stride;
  if (ld < cols) detail::fail(name + ".row_stride", "0 or >= " + str(cols), str(row_stride));
  if (data == nullptr) detail::fail(name + ".data", "a non-null pointer", "nullptr");
  const bool fused = which != Projection::kOutput;
  float* dst = fused ? m.w_qkv.data() + m.column_offset(which) : m.w_o.data();
  const std::int64_t dst_ld = fused ? m.qkv_width : m.config.d_model;
  for (std::int64_t r = 0; r < rows; ++r) {
    std::copy(data + r * ld, data + r * ld + cols, dst + r * dst_ld);
  }
  m.weights_set[index(which)] = true;
  m.drop_tile_weights();  // the tile path packs the new values when it next runs
}

template <class T>
void MultiHeadAttention::copy_weights_pytorch(Projection which, const T* data,
                                              std::int64_t out_features_given,
                                              std::int64_t in_features) {
  Impl& m = *impl_;
  const std::string name = weight_name(which);
  const std::int64_t want_out = out_features(which);
  if (out_features_given != want_out) {
    detail::fail(name + ".out_features", str(want_out) + " (nn.Linear weight layout [out, in])",
                 str(out_features_given));
  }
  if (in_features != m.config.d_model) {
    detail::fail(name + ".in_features", str(m.config.d_model) + " (d_model)", str(in_features));
  }
  if (data == nullptr) detail::fail(name + ".data", "a non-null pointer", "nullptr");
  // [out, in] → [in, out]: element (o, i) goes to row i, column o.
  std::vector<float> transposed(static_cast<std::size_t>(in_features * want_out));
  for (std::int64_t o = 0; o < want_out; ++o) {
    for (std::int64_t i = 0; i < in_features; ++i) {
      transposed[static_cast<std::size_t>(i * want_out + o)] =
          static_cast<float>(data[o * in_features + i]);
    }
  }
  copy_weights(which, transposed.data(), in_features, want_out, 0);
}

template <class T>
void MultiHeadAttention::copy_bias(Projection which, const T* data, std::int64_t size) {
  Impl& m = *impl_;
  const std::string name = bias_name(which);
  if (!m.config.bias) {
    throw Error(ErrorKind::kUnsupported, name, "config.bias = true", "config.bias = false",
                "construct the layer with MhaConfig::bias = true to use biases");
  }
  const std::int64_t want = out_features(which);
  if (size != want) detail::fail(name + ".size", str(want) + " (the output features)", str(size));
  if (data == nullptr) detail::fail(name + ".data", "a non-null pointer", "nullptr");
  float* dst =
      which == Projection::kOutput ? m.b_o.data() : m.b_qkv.data() + m.column_offset(which);
  std::copy(data, data + size, dst);
  m.bias_set[index(which)] = true;
}

void MultiHeadAttention::set_weights(Projection which, const float* data, std::int64_t rows,
                                     std::int64_t cols, std::int64_t row_stride) {
  copy_weights(which, data, rows, cols, row_stride);
}
void MultiHeadAttention::set_weights(Projection which, const bfloat16* data, std::int64_t rows,
                                     std::int64_t cols, std::int64_t row_stride) {
  copy_weights(which, data, rows, cols, row_stride);
}
void MultiHeadAttention::set_weights_pytorch(Projection which, const float* data,
                                             std::int64_t out_features, std::int64_t in_features) {
  copy_weights_pytorch(which, data, out_features, in_features);
}
void MultiHeadAttention::set_weights_pytorch(Projection which, const bfloat16* data,
                                             std::int64_t out_features, std::int64_t in_features) {
  copy_weights_pytorch(which, data, out_features, in_features);
}
void MultiHeadAttention::set_bias(Projection which, const float* data, std::int64_t size) {
  copy_bias(which, data, size);
}
void MultiHeadAttention::set_bias(Projection which, const bfloat16* data, std::int64_t size) {
  copy_bias(which, data, size);
}

}  // namespace seqattn
