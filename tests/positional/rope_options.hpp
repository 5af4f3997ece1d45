// The RoPE options the positional tests build: a layout, rotary dims (0 = all D) and θ.
#pragma once

#include <cstdint>

#include "seqattn/positional.hpp"

namespace seqattn::testing {

inline RotaryEmbedding rope(RopeLayout layout, std::int64_t dims = 0, double theta = 10000.0) {
  RotaryEmbedding r;
  r.layout = layout;
  r.dims = dims;
  r.theta = theta;
  return r;
}

}  // namespace seqattn::testing
