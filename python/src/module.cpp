// _seqattn: the compiled half of the seqattn Python package (the package's __init__.py gives
// the PyTorch-style API on top of it).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <vector>

#include "array_ref.hpp"
#include "bindings.hpp"
#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"

namespace seqattn::python {

namespace {

const char* kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument:
      return "invalid_argument";
    case ErrorKind::kUnsupported:
      return "unsupported";
    case ErrorKind::kNotImplemented:
      return "not_implemented";
    case ErrorKind::kIo:
      return "io";
  }
  return "invalid_argument";
}

// Raises the seqattn.Error subclass python/seqattn/_errors.py builds for these fields.
void raise_error(const char* kind, bool wrong_type, const std::string& argument,
                 const std::string& expected, const std::string& actual, const char* message) {
  const py::object error =
      py::module_::import("seqattn._errors")
          .attr("from_library")(kind, argument, expected, actual, message, wrong_type);
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())), error.ptr());
}

}  // namespace

void register_errors(py::module_& m) {
  // seqattn::Error (and the bindings' own BindingError) become the seqattn.Error classes,
  // which keep the kind, the argument, the expected and the actual value and derive from the
  // built-in exceptions the package raised before: bad values and unsupported options
  // ValueError, wrong Python types TypeError, unbuilt features NotImplementedError, I/O
  // failures OSError. The message is seqattn's, unchanged.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      raise_error(kind_name(e.kind()), false, e.argument(), e.expected(), e.actual(), e.what());
    } catch (const BindingError& e) {
      raise_error("invalid_argument", e.wrong_type(), e.argument(), e.expected(), e.actual(),
                  e.what());
    }
  });
  // What the bindings read of an array, for tests that prove nothing is copied.
  m.def("inspect", [](py::handle obj) {
    const ArrayRef a = inspect(obj, "array");
    py::dict d;
    d["data"] = reinterpret_cast<std::uintptr_t>(a.data);
    d["shape"] =
        py::tuple(py::cast(std::vector<std::int64_t>(a.shape.begin(), a.shape.begin() + a.ndim)));
    d["strides"] = py::tuple(
        py::cast(std::vector<std::int64_t>(a.strides.begin(), a.strides.begin() + a.ndim)));
    d["writable"] = a.writable;
    return d;
  });
  m.def("simd_target", &simd_target,
        "The SIMD target the kernels dispatch to on this CPU, e.g. 'highway:AVX3'.");
  m.def("bf16_compute_path", [] {
    const ComputePathChoice c = bf16_compute_path();
    return py::make_tuple(c.path, c.reason);
  });
}

}  // namespace seqattn::python

PYBIND11_MODULE(_seqattn, m) {
  m.doc() = "seqattn's compiled bindings; use the seqattn package, not this module.";
  m.attr("__version__") = SEQATTN_VERSION;  // CMake's project version
  seqattn::python::register_errors(m);
  seqattn::python::register_attention(m);
  seqattn::python::register_cache(m);
  seqattn::python::register_mha(m);
}
