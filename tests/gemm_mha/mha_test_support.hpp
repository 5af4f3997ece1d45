// Building a MultiHeadAttention from reference weights and running it on owned buffers.
#pragma once

#include <cstdint>
#include <vector>

#include "mha_layer_reference.hpp"
#include "seqattn/mha.hpp"

namespace seqattn::testing {

inline MultiHeadAttention make_layer(const MhaConfig& config, const LayerWeights& w) {
  MultiHeadAttention layer(config);
  const std::int64_t d = w.d_model, kv = w.kv_width;
  layer.set_weights(Projection::kQuery, w.wq.data(), d, d);
  layer.set_weights(Projection::kKey, w.wk.data(), d, kv);
  layer.set_weights(Projection::kValue, w.wv.data(), d, kv);
  if (config.output_projection) layer.set_weights(Projection::kOutput, w.wo.data(), d, d);
  if (config.bias) {
    layer.set_bias(Projection::kQuery, w.bq.data(), d);
    layer.set_bias(Projection::kKey, w.bk.data(), kv);
    layer.set_bias(Projection::kValue, w.bv.data(), kv);
    layer.set_bias(Projection::kOutput, w.bo.data(), d);
  }
  return layer;
}

inline SequenceView<const float> sequence(const std::vector<float>& x, std::int64_t batch,
                                          std::int64_t seq, std::int64_t features) {
  return {x.data(), batch, seq, features, 0};
}

inline SequenceView<float> sequence(std::vector<float>& x, std::int64_t batch, std::int64_t seq,
                                    std::int64_t features) {
  return {x.data(), batch, seq, features, 0};
}

}  // namespace seqattn::testing
