// What the bindings know of a numpy array or a torch tensor: its memory, read without copying.
// Only the binding layer sees Python objects; the library sees the TensorViews made from these.
#pragma once
#include <pybind11/pybind11.h>

#include <array>
#include <cstdint>
#include <string>

#include "errors.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn::python {

namespace py = pybind11;

// Element types the bindings accept: the library's three, and one-byte booleans (or uint8, nonzero
// = true) for masks.
enum class ElementKind { kF32, kBF16, kF16, kByte };  // kByte: bool or uint8

struct ArrayRef {
  ElementKind kind = ElementKind::kF32;
  void* data = nullptr;
  int ndim = 0;
  std::array<std::int64_t, 4> shape{};    // the array's own axis order
  std::array<std::int64_t, 4> strides{};  // in elements
  bool writable = false;
};

// The array or tensor behind `obj`. Throws a BindingError (TypeError) naming `name` for anything
// but a numpy.ndarray or a strided CPU torch.Tensor of a supported dtype, and for more than 4 axes;
// a BindingError (ValueError) for strides that are not whole elements, or unaligned data.
ArrayRef inspect(py::handle obj, const std::string& name);

// "bhsd": the array is indexed [B, H, S, D]; "bshd": [B, S, H, D]. Throws a BindingError
// (ValueError).
enum class Layout { kBhsd, kBshd };
Layout parse_layout(const std::string& layout);

// A rank-4 tensor operand (q, k, v, out) as the library's view, axes reordered from `layout`.
// Requires ndim == 4 (the Python layer adds axes) and a float element type.
AnyConstTensor input_view(const ArrayRef& a, const std::string& name, Layout layout);
AnyTensor output_view(const ArrayRef& a, const std::string& name, Layout layout);

// A mask or bias [B or 1, H or 1, S_q or 1, S_k or 1] broadcast to `scores` (= [B, H_q, S_q,
// S_k]): a size-1 axis gets stride 0. Requires ndim == 4; bool/uint8 for keep, float32 for bias.
TensorView<const std::uint8_t> keep_view(const ArrayRef& a, const std::string& name,
                                         const std::array<std::int64_t, 4>& scores);
ConstTensor bias_view(const ArrayRef& a, const std::string& name,
                      const std::array<std::int64_t, 4>& scores);

// A float32 [B, H, S, 1] lse output given as a [B, H, S] array, or a [B, H, S_q, S_k] weights
// output.
Tensor lse_view(const ArrayRef& a, const std::string& name);
Tensor weights_view(const ArrayRef& a, const std::string& name);

std::string describe(const ArrayRef& a);  // e.g. "float32 [2, 8, 128, 64]"

}  // namespace seqattn::python
