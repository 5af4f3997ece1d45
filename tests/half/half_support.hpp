// Half-precision copies of test tensors: the same layout and strides, every element rounded
// to bf16/f16, and the exact fp32 widening of those rounded values (the reference's input).
#pragma once

#include <cstdint>
#include <vector>

#include "seqattn/half.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {

template <class T>
struct OwnedHalf {
  std::vector<T> storage;
  TensorView<T> view;

  TensorView<const T> cview() const { return view; }
};

// t rounded to T element by element (padding included), same shape and strides.
template <class T>
OwnedHalf<T> rounded(const OwnedTensor& t) {
  OwnedHalf<T> h;
  h.storage.reserve(t.storage.size());
  for (const float x : t.storage) h.storage.push_back(T(x));
  h.view = {h.storage.data(), t.view.shape, t.view.strides};
  return h;
}

// The fp32 values of a half tensor (exact), same shape and strides.
template <class T>
OwnedTensor widened(const OwnedHalf<T>& h) {
  OwnedTensor t;
  t.storage.reserve(h.storage.size());
  for (const T x : h.storage) t.storage.push_back(static_cast<float>(x));
  t.view = {t.storage.data(), h.view.shape, h.view.strides};
  return t;
}

// t's elements replaced by their T-rounded values (so fp32 and T runs see the same inputs).
template <class T>
void round_in_place(OwnedTensor& t) {
  for (float& x : t.storage) x = static_cast<float>(T(x));
}

}  // namespace seqattn::testing
