// Strided rank-4 views [batch, heads, seq, dim]. Views never own memory; the
// strides (in elements, not bytes) let one view type describe BHSD, BSHD and
// head slices of a projected [B, S, H*D] activation without copying.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "seqattn/half.hpp"

namespace seqattn {

template <class T>
struct TensorView {
  T* data = nullptr;
  std::array<std::int64_t, 4> shape{};    // batch, heads, seq, dim
  std::array<std::int64_t, 4> strides{};  // elements between neighbours along each axis

  std::int64_t batch() const { return shape[0]; }
  std::int64_t heads() const { return shape[1]; }
  std::int64_t seq() const { return shape[2]; }
  std::int64_t dim() const { return shape[3]; }

  T* ptr(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d = 0) const {
    return data + b * strides[0] + h * strides[1] + s * strides[2] + d * strides[3];
  }
  T& at(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) const {
    return *ptr(b, h, s, d);
  }
  // A view of the same memory with read-only elements.
  operator TensorView<const T>() const { return {data, shape, strides}; }
};

using Tensor = TensorView<float>;
using ConstTensor = TensorView<const float>;

// A read-only view of any element type (float, bfloat16, float16): what the entry points take,
// so any TensorView converts to it implicitly.
struct AnyConstTensor {
  DType dtype = DType::kF32;
  const void* data = nullptr;
  std::array<std::int64_t, 4> shape{};
  std::array<std::int64_t, 4> strides{};

  AnyConstTensor() = default;
  template <class T>
  requires Element<std::remove_const_t<T>> AnyConstTensor(
      const TensorView<T>& v)  // NOLINT(google-explicit-constructor)
      : dtype(dtype_of<std::remove_const_t<T>>()),
        data(v.data),
        shape(v.shape),
        strides(v.strides) {}

  // The typed view (T must be the view's dtype).
  template <Element T>
  TensorView<const T> as() const {
    return {static_cast<const T*>(data), shape, strides};
  }
};

// A writable view of any element type.
struct AnyTensor {
  DType dtype = DType::kF32;
  void* data = nullptr;
  std::array<std::int64_t, 4> shape{};
  std::array<std::int64_t, 4> strides{};

  AnyTensor() = default;
  template <Element T>
  AnyTensor(const TensorView<T>& v)  // NOLINT(google-explicit-constructor)
      : dtype(dtype_of<T>()), data(v.data), shape(v.shape), strides(v.strides) {}

  template <Element T>
  TensorView<T> as() const {
    return {static_cast<T*>(data), shape, strides};
  }
  operator AnyConstTensor() const {  // NOLINT(google-explicit-constructor)
    AnyConstTensor c;
    c.dtype = dtype;
    c.data = data;
    c.shape = shape;
    c.strides = strides;
    return c;
  }
};

// Contiguous [B, H, S, D] memory (PyTorch's layout after transpose(1, 2).contiguous()).
template <class T>
TensorView<T> bhsd(T* data, std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d) {
  return {data, {b, h, s, d}, {h * s * d, s * d, d, 1}};
}

// Contiguous [B, S, H, D] memory (a projected [B, S, d_model] activation split into heads).
// Arguments follow the memory order; the view is still indexed [b, h, s, d].
template <class T>
TensorView<T> bshd(T* data, std::int64_t b, std::int64_t s, std::int64_t h, std::int64_t d) {
  return {data, {b, h, s, d}, {s * h * d, d, h * d, 1}};
}

// A single contiguous [S, D] matrix as a [1, 1, S, D] view.
template <class T>
TensorView<T> matrix(T* data, std::int64_t s, std::int64_t d) {
  return bhsd(data, 1, 1, s, d);
}

// Row-major 2-D view used for projection matrices (Linformer's E and F, FAVOR+'s W).
template <class T>
struct MatrixView {
  T* data = nullptr;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t row_stride = 0;  // elements between rows; >= cols

  T* row(std::int64_t r) const { return data + r * row_stride; }
  operator MatrixView<const T>() const { return {data, rows, cols, row_stride}; }
  // Given by the caller: a pointer or an extent set (the variant checks the view then). A view
  // with neither is unset, and the variant draws the matrix from its seed.
  bool given() const { return data != nullptr || rows != 0 || cols != 0; }
};

}  // namespace seqattn
