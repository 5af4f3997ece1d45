// A double-precision reference of the whole MultiHeadAttention layer, written independently of
// the library: projections in double, attention by the scalar oracle (tests/reference) of the
// chosen variant per head, concatenation, output projection in double.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <stdexcept>
#include <variant>
#include <vector>

#include "seqattn/attention.hpp"
#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"
#include "tests/reference/reference.hpp"

namespace seqattn::testing {

// Weights in the documents' [in, out] layout (Q = X·W_Q), contiguous.
struct LayerWeights {
  std::int64_t d_model = 0, kv_width = 0;
  std::vector<float> wq, wk, wv, wo;  // [d_model, d_model | kv_width | kv_width | d_model]
  std::vector<float> bq, bk, bv, bo;  // empty when the layer has no bias
};

inline std::vector<float> uniform(std::size_t n, std::uint32_t seed, float scale) {
  std::vector<float> x(n);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (float& v : x) v = dist(gen);
  return x;
}

// Entries of scale 1/√d_model keep the projections O(1), like nn.Linear's default init.
inline LayerWeights random_weights(std::int64_t d_model, std::int64_t kv_width, bool bias,
                                   std::uint32_t seed) {
  LayerWeights w;
  w.d_model = d_model;
  w.kv_width = kv_width;
  const float s = 1.0f / std::sqrt(static_cast<float>(d_model));
  const auto n = [&](std::int64_t cols) { return static_cast<std::size_t>(d_model * cols); };
  w.wq = uniform(n(d_model), seed, s);
  w.wk = uniform(n(kv_width), seed + 1, s);
  w.wv = uniform(n(kv_width), seed + 2, s);
  w.wo = uniform(n(d_model), seed + 3, s);
  if (bias) {
    w.bq = uniform(static_cast<std::size_t>(d_model), seed + 4, 0.5f);
    w.bk = uniform(static_cast<std::size_t>(kv_width), seed + 5, 0.5f);
    w.bv = uniform(static_cast<std::size_t>(kv_width), seed + 6, 0.5f);
    w.bo = uniform(static_cast<std::size_t>(d_model), seed + 7, 0.5f);
  }
  return w;
}

// y[rows, cols] = x[rows, in] · w[in, cols] + bias, in double.
inline std::vector<double> project(const std::vector<float>& x, std::int64_t rows, std::int64_t in,
                                   const std::vector<float>& w, std::int64_t cols,
                                   const std::vector<float>& bias) {
  std::vector<double> y(static_cast<std::size_t>(rows * cols));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t c = 0; c < cols; ++c) {
      double acc = bias.empty() ? 0.0 : bias[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < in; ++i) {
        acc += static_cast<double>(x[static_cast<std::size_t>(r * in + i)]) *
               w[static_cast<std::size_t>(i * cols + c)];
      }
      y[static_cast<std::size_t>(r * cols + c)] = acc;
    }
  }
  return y;
}

inline std::vector<float> to_float(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

// The attention oracle of the variant `spec` names (reference::variant, one per row of the
// variant table).
inline reference::Result attention_reference(const VariantSpec& spec, const ConstTensor& q,
                                             const ConstTensor& k, const ConstTensor& v,
                                             const Mask& mask, double scale) {
  const std::optional<ConcreteSpec> concrete = as_concrete_spec(spec);
  if (!concrete) {
    throw std::logic_error("attention_reference: resolve auto to the variant it picks first");
  }
  // The layer sets no scale: linear takes its feature map's default, softmax variants 1/√D.
  const bool linear = std::holds_alternative<LinearSpec>(*concrete);
  return reference::variant(q, k, v, *concrete, mask,
                            linear ? std::nullopt : std::optional<double>(scale));
}

struct LayerShape {
  std::int64_t batch = 1, seq_q = 1, seq_k = 1, d_model = 0, heads = 1, kv_heads = 1;
  bool output_projection = true;
};

struct LayerResult {
  std::vector<double> out;  // [B, S_q, d_model]
  reference::Result attention;
};

// x_q [B·S_q, d_model] and x_kv [B·S_k, d_model], contiguous.
inline LayerResult layer_reference(const LayerShape& s, const LayerWeights& w,
                                   const std::vector<float>& x_q, const std::vector<float>& x_kv,
                                   const Mask& mask, const VariantSpec& spec) {
  const std::int64_t dk = s.d_model / s.heads;
  const std::vector<float> q =
      to_float(project(x_q, s.batch * s.seq_q, s.d_model, w.wq, s.d_model, w.bq));
  const std::vector<float> k =
      to_float(project(x_kv, s.batch * s.seq_k, s.d_model, w.wk, w.kv_width, w.bk));
  const std::vector<float> v =
      to_float(project(x_kv, s.batch * s.seq_k, s.d_model, w.wv, w.kv_width, w.bv));
  LayerResult r;
  r.attention = attention_reference(spec, bshd(q.data(), s.batch, s.seq_q, s.heads, dk),
                                    bshd(k.data(), s.batch, s.seq_k, s.kv_heads, dk),
                                    bshd(v.data(), s.batch, s.seq_k, s.kv_heads, dk), mask,
                                    1.0 / std::sqrt(static_cast<double>(dk)));
  std::vector<double> concat(static_cast<std::size_t>(s.batch * s.seq_q * s.d_model));
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t i = 0; i < s.seq_q; ++i)
      for (std::int64_t h = 0; h < s.heads; ++h)
        for (std::int64_t d = 0; d < dk; ++d) {
          concat[static_cast<std::size_t>((b * s.seq_q + i) * s.d_model + h * dk + d)] =
              r.attention.out_at(b, h, i, d);
        }
  if (!s.output_projection) {
    r.out = concat;
    return r;
  }
  r.out.assign(concat.size(), 0.0);
  const std::int64_t rows = s.batch * s.seq_q;
  for (std::int64_t row = 0; row < rows; ++row) {
    for (std::int64_t c = 0; c < s.d_model; ++c) {
      double acc = w.bo.empty() ? 0.0 : w.bo[static_cast<std::size_t>(c)];
      for (std::int64_t i = 0; i < s.d_model; ++i) {
        acc += concat[static_cast<std::size_t>(row * s.d_model + i)] *
               w.wo[static_cast<std::size_t>(i * s.d_model + c)];
      }
      r.out[static_cast<std::size_t>(row * s.d_model + c)] = acc;
    }
  }
  return r;
}

}  // namespace seqattn::testing
