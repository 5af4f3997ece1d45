#include "array_ref.hpp"

#include <pybind11/numpy.h>

#include <sstream>

namespace seqattn::python {
namespace {

std::size_t element_size(ElementKind k) {
  switch (k) {
    case ElementKind::kF32:
      return 4;
    case ElementKind::kBF16:
    case ElementKind::kF16:
      return 2;
    case ElementKind::kByte:
      return 1;
  }
  return 1;
}

const char* kind_name(ElementKind k) {
  switch (k) {
    case ElementKind::kF32:
      return "float32";
    case ElementKind::kBF16:
      return "bfloat16";
    case ElementKind::kF16:
      return "float16";
    case ElementKind::kByte:
      return "bool";
  }
  return "?";
}

const char* kSupported = "float32, float16 or bfloat16 (or bool/uint8 for a mask)";

void check_rank(int ndim, const std::string& name) {
  if (ndim > 4) value_fail(name, "at most 4 axes", std::to_string(ndim) + " axes");
}

ArrayRef from_numpy(const py::array& a, const std::string& name) {
  ArrayRef r;
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = static_cast<std::size_t>(dt.itemsize());
  if (kind == 'f' && size == 4)
    r.kind = ElementKind::kF32;
  else if (kind == 'f' && size == 2)
    r.kind = ElementKind::kF16;
  else if (kind == 'b' || (kind == 'u' && size == 1))
    r.kind = ElementKind::kByte;
  else
    type_fail(name, std::string("a numpy array of ") + kSupported,
              "dtype " + py::str(static_cast<py::handle>(dt)).cast<std::string>() +
                  " (convert it with .astype(numpy.float32))");
  if (dt.attr("byteorder").cast<std::string>() == ">")
    type_fail(name, "native byte order", "a big-endian dtype (use .astype(its native form))");
  r.ndim = static_cast<int>(a.ndim());
  check_rank(r.ndim, name);
  for (int i = 0; i < r.ndim; ++i) {
    r.shape[i] = a.shape(i);
    const auto stride = static_cast<std::int64_t>(a.strides(i));
    if (stride % static_cast<std::int64_t>(size) != 0)
      value_fail(name + ".strides[" + std::to_string(i) + "]",
                 "a multiple of the element size " + std::to_string(size) + " bytes",
                 std::to_string(stride) + " bytes");
    r.strides[i] = stride / static_cast<std::int64_t>(size);
  }
  r.data = const_cast<void*>(a.data());
  r.writable = a.writeable();
  return r;
}

ArrayRef from_torch(py::handle t, const std::string& name) {
  const std::string layout = py::str(t.attr("layout")).cast<std::string>();
  if (layout != "torch.strided")
    type_fail(name, "a strided (dense) torch.Tensor", "layout " + layout + " (call .to_dense())");
  const std::string device = py::str(t.attr("device")).cast<std::string>();
  if (device != "cpu")
    type_fail(name, "a CPU tensor", "device " + device + " (move it with .cpu())");
  const std::string dtype = py::str(t.attr("dtype")).cast<std::string>();
  ArrayRef r;
  if (dtype == "torch.float32")
    r.kind = ElementKind::kF32;
  else if (dtype == "torch.bfloat16")
    r.kind = ElementKind::kBF16;
  else if (dtype == "torch.float16")
    r.kind = ElementKind::kF16;
  else if (dtype == "torch.bool" || dtype == "torch.uint8")
    r.kind = ElementKind::kByte;
  else
    type_fail(name, std::string("a torch.Tensor of ") + kSupported,
              dtype + " (convert it with .float())");
  const py::tuple shape = t.attr("shape");
  const py::tuple strides = t.attr("stride")();
  r.ndim = static_cast<int>(shape.size());
  check_rank(r.ndim, name);
  for (int i = 0; i < r.ndim; ++i) {
    r.shape[i] = shape[i].cast<std::int64_t>();
    r.strides[i] = strides[i].cast<std::int64_t>();
  }
  r.data = reinterpret_cast<void*>(t.attr("data_ptr")().cast<std::uintptr_t>());
  r.writable = true;
  return r;
}

bool is_torch_tensor(py::handle obj) {
  const py::handle type = reinterpret_cast<PyObject*>(Py_TYPE(obj.ptr()));
  for (py::handle base : type.attr("__mro__")) {
    if (py::str(base.attr("__module__")).cast<std::string>() == "torch" &&
        py::str(base.attr("__name__")).cast<std::string>() == "Tensor")
      return true;
  }
  return false;
}

std::string shape_text(const std::array<std::int64_t, 4>& s, int ndim) {
  std::ostringstream o;
  o << '[';
  for (int i = 0; i < ndim; ++i) o << (i ? ", " : "") << s[i];
  o << ']';
  return o.str();
}

void require(const ArrayRef& a, const std::string& name, ElementKind kind, int ndim) {
  if (a.kind != kind) type_fail(name, std::string(kind_name(kind)), std::string(kind_name(a.kind)));
  if (a.ndim != ndim) value_fail(name, std::to_string(ndim) + " axes", describe(a));
}

void require_float(const ArrayRef& a, const std::string& name) {
  if (a.kind == ElementKind::kByte)
    type_fail(name, "float32, float16 or bfloat16", "a boolean/uint8 array");
  if (a.ndim != 4) value_fail(name, "4 axes", describe(a));
}

DType dtype_of_kind(ElementKind k) {
  return k == ElementKind::kF32    ? DType::kF32
         : k == ElementKind::kBF16 ? DType::kBF16
                                   : DType::kF16;
}

// The array's [B, H, S, D] shape and strides, from its own axis order.
void reorder(const ArrayRef& a, Layout layout, std::array<std::int64_t, 4>& shape,
             std::array<std::int64_t, 4>& strides) {
  const std::array<int, 4> axes =
      layout == Layout::kBhsd ? std::array<int, 4>{0, 1, 2, 3} : std::array<int, 4>{0, 2, 1, 3};
  for (int i = 0; i < 4; ++i) {
    shape[i] = a.shape[axes[i]];
    strides[i] = a.strides[axes[i]];
  }
}

template <class View>
void broadcast(const ArrayRef& a, const std::string& name,
               const std::array<std::int64_t, 4>& scores, View& v) {
  for (int i = 0; i < 4; ++i) {
    v.shape[i] = a.shape[i];
    v.strides[i] = a.strides[i];
    if (a.shape[i] == scores[i]) continue;
    if (a.shape[i] != 1)
      value_fail(name + ".shape", "broadcastable to the scores " + shape_text(scores, 4),
                 describe(a));
    v.shape[i] = scores[i];
    v.strides[i] = 0;
  }
}

}  // namespace

ArrayRef inspect(py::handle obj, const std::string& name) {
  ArrayRef r;
  if (py::isinstance<py::array>(obj)) {
    r = from_numpy(py::reinterpret_borrow<py::array>(obj), name);
  } else if (is_torch_tensor(obj)) {
    r = from_torch(obj, name);
  } else {
    type_fail(name, "a numpy.ndarray or a torch.Tensor",
              py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>());
  }
  const auto size = element_size(r.kind);
  if (reinterpret_cast<std::uintptr_t>(r.data) % size != 0)
    value_fail(name + ".data", "aligned to its " + std::to_string(size) + "-byte elements",
               "an unaligned address");
  return r;
}

Layout parse_layout(const std::string& layout) {
  if (layout == "bhsd") return Layout::kBhsd;
  if (layout == "bshd") return Layout::kBshd;
  value_fail("layout", "'bhsd' or 'bshd'", "'" + layout + "'");
}

AnyConstTensor input_view(const ArrayRef& a, const std::string& name, Layout layout) {
  require_float(a, name);
  AnyConstTensor v;
  v.dtype = dtype_of_kind(a.kind);
  v.data = a.data;
  reorder(a, layout, v.shape, v.strides);
  return v;
}

AnyTensor output_view(const ArrayRef& a, const std::string& name, Layout layout) {
  require_float(a, name);
  if (!a.writable) value_fail(name, "a writable array", "a read-only one");
  AnyTensor v;
  v.dtype = dtype_of_kind(a.kind);
  v.data = a.data;
  reorder(a, layout, v.shape, v.strides);
  return v;
}

TensorView<const std::uint8_t> keep_view(const ArrayRef& a, const std::string& name,
                                         const std::array<std::int64_t, 4>& scores) {
  require(a, name, ElementKind::kByte, 4);
  TensorView<const std::uint8_t> v;
  v.data = static_cast<const std::uint8_t*>(a.data);
  broadcast(a, name, scores, v);
  return v;
}

ConstTensor bias_view(const ArrayRef& a, const std::string& name,
                      const std::array<std::int64_t, 4>& scores) {
  require(a, name, ElementKind::kF32, 4);
  ConstTensor v;
  v.data = static_cast<const float*>(a.data);
  broadcast(a, name, scores, v);
  return v;
}

Tensor lse_view(const ArrayRef& a, const std::string& name) {
  require(a, name, ElementKind::kF32, 3);
  if (!a.writable) value_fail(name, "a writable array", "a read-only one");
  return {static_cast<float*>(a.data),
          {a.shape[0], a.shape[1], a.shape[2], 1},
          {a.strides[0], a.strides[1], a.strides[2], 1}};
}

Tensor weights_view(const ArrayRef& a, const std::string& name) {
  require(a, name, ElementKind::kF32, 4);
  if (!a.writable) value_fail(name, "a writable array", "a read-only one");
  return {static_cast<float*>(a.data), a.shape, a.strides};
}

std::string describe(const ArrayRef& a) {
  return std::string(kind_name(a.kind)) + " " + shape_text(a.shape, a.ndim);
}

}  // namespace seqattn::python
