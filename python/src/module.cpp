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

void register_errors(py::module_& m) {
  // seqattn::Error's message names the argument, the expected and the actual value; the
  // Python exception carries it unchanged. Unsupported option combinations and bad values
  // are ValueError, declared-but-unbuilt features NotImplementedError, I/O failures OSError.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      PyObject* type = PyExc_ValueError;
      if (e.kind() == ErrorKind::kNotImplemented) type = PyExc_NotImplementedError;
      if (e.kind() == ErrorKind::kIo) type = PyExc_OSError;
      PyErr_SetString(type, e.what());
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
}

}  // namespace seqattn::python

PYBIND11_MODULE(_seqattn, m) {
  m.doc() = "seqattn's compiled bindings; use the seqattn package, not this module.";
  seqattn::python::register_errors(m);
  seqattn::python::register_attention(m);
  seqattn::python::register_cache(m);
  seqattn::python::register_mha(m);
}
