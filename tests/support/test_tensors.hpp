// Random test tensors in either memory layout, optionally with padded (non-contiguous) rows.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "seqattn/tensor.hpp"

namespace seqattn::testing {

enum class Layout { kBHSD, kBSHD };

// Owns the memory behind a view. `pad` extra floats after each row make the view strided.
// Move-only: a copy would keep a view into the original's storage.
struct OwnedTensor {
  std::vector<float> storage;
  Tensor view;

  OwnedTensor() = default;
  OwnedTensor(OwnedTensor&&) = default;
  OwnedTensor& operator=(OwnedTensor&&) = default;
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;

  ConstTensor cview() const { return view; }
};

inline OwnedTensor make_tensor(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
                               Layout layout, std::uint32_t seed, std::int64_t pad = 0,
                               float lo = -1.0f, float hi = 1.0f) {
  OwnedTensor t;
  const std::int64_t row = d + pad;
  t.storage.resize(static_cast<size_t>(b * h * s * row));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  for (float& x : t.storage) x = dist(gen);
  if (layout == Layout::kBHSD) {
    t.view = {t.storage.data(), {b, h, s, d}, {h * s * row, s * row, row, 1}};
  } else {
    t.view = {t.storage.data(), {b, h, s, d}, {s * h * row, row, h * row, 1}};
  }
  return t;
}

inline OwnedTensor make_zeros(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d,
                              Layout layout = Layout::kBHSD, std::int64_t pad = 0) {
  OwnedTensor t = make_tensor(b, h, s, d, layout, 0, pad);
  std::fill(t.storage.begin(), t.storage.end(), 0.0f);
  return t;
}

}  // namespace seqattn::testing
