#include "bind_cache.hpp"

#include <pybind11/stl.h>

#include <mutex>
#include <optional>
#include <string>

#include "array_ref.hpp"
#include "bindings.hpp"

namespace seqattn::python {
namespace {

DType parse_dtype(const std::string& name) {
  if (name == "float32" || name == "f32") return DType::kF32;
  if (name == "bfloat16" || name == "bf16") return DType::kBF16;
  if (name == "float16" || name == "f16") return DType::kF16;
  if (name == "int8" || name == "i8") return DType::kI8;
  value_fail("dtype", "'float32', 'bfloat16', 'float16' or 'int8'", "'" + name + "'");
}

KvCacheMode parse_mode(const std::string& name) {
  if (name == "linear") return KvCacheMode::kLinear;
  if (name == "ring") return KvCacheMode::kRing;
  value_fail("mode", "'linear' or 'ring'", "'" + name + "'");
}

void append(PyKvCache& c, py::handle k, py::handle v, std::optional<std::int64_t> batch,
            const std::string& layout) {
  const Layout l = parse_layout(layout);
  const AnyConstTensor kv = input_view(inspect(k, "k"), "k", l);
  const AnyConstTensor vv = input_view(inspect(v, "v"), "v", l);
  py::gil_scoped_release unlocked;
  std::unique_lock writing(c.mutex);
  if (batch) {
    c.cache.append(*batch, kv, vv);
  } else {
    c.cache.append(kv, vv);
  }
}

void clear(PyKvCache& c, std::optional<std::int64_t> batch) {
  py::gil_scoped_release unlocked;
  std::unique_lock writing(c.mutex);
  if (batch) {
    c.cache.clear(*batch);
  } else {
    c.cache.clear();
  }
}

void register_paged(py::module_& m) {
  using Id = PagedKvCache::SequenceId;
  py::class_<PyPagedKvCache>(m, "PagedKvCache")
      .def(py::init([](std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                       std::int64_t blocks, const std::string& dtype, py::handle rope) {
             return std::make_unique<PyPagedKvCache>(PagedKvCacheShape{
                 heads_kv, dim, dim_v, blocks, parse_dtype(dtype), parse_rope(rope)});
           }),
           py::arg("heads_kv"), py::arg("dim"), py::arg("dim_v"), py::arg("blocks"),
           py::arg("dtype"), py::arg("rope"))
      .def("add",
           [](PyPagedKvCache& c) {
             std::unique_lock writing(c.mutex);
             return c.cache.add();
           })
      .def(
          "fork",
          [](PyPagedKvCache& c, Id parent) {
            std::unique_lock writing(c.mutex);
            return c.cache.fork(parent);
          },
          py::arg("parent"))
      .def(
          "reserve",
          [](PyPagedKvCache& c, Id id, std::int64_t tokens) {
            std::unique_lock writing(c.mutex);
            c.cache.reserve(id, tokens);
          },
          py::arg("sequence"), py::arg("tokens"))
      .def(
          "drop_front",
          [](PyPagedKvCache& c, Id id, std::int64_t position) {
            std::unique_lock writing(c.mutex);
            c.cache.drop_front(id, position);
          },
          py::arg("sequence"), py::arg("position"))
      .def(
          "first_stored",
          [](const PyPagedKvCache& c, Id id) {
            std::shared_lock reading(c.mutex);
            return c.cache.first_stored(id);
          },
          py::arg("sequence"))
      .def(
          "free",
          [](PyPagedKvCache& c, Id id) {
            std::unique_lock writing(c.mutex);
            c.cache.free(id);
          },
          py::arg("sequence"))
      .def(
          "append",
          [](PyPagedKvCache& c, Id id, py::handle k, py::handle v, const std::string& layout) {
            const Layout l = parse_layout(layout);
            const AnyConstTensor kv = input_view(inspect(k, "k"), "k", l);
            const AnyConstTensor vv = input_view(inspect(v, "v"), "v", l);
            py::gil_scoped_release unlocked;
            std::unique_lock writing(c.mutex);
            c.cache.append(id, kv, vv);
          },
          py::arg("sequence"), py::arg("k"), py::arg("v"), py::arg("layout"))
      .def("length",
           [](const PyPagedKvCache& c, Id id) {
             std::shared_lock reading(c.mutex);
             return c.cache.length(id);
           })
      .def_property_readonly("free_blocks",
                             [](const PyPagedKvCache& c) {
                               std::shared_lock reading(c.mutex);
                               return c.cache.free_blocks();
                             })
      .def_property_readonly("sequences",
                             [](const PyPagedKvCache& c) {
                               std::shared_lock reading(c.mutex);
                               return c.cache.sequences();
                             })
      .def_property_readonly("nbytes", [](const PyPagedKvCache& c) { return c.cache.bytes(); });
}

}  // namespace

void register_cache(py::module_& m) {
  register_paged(m);
  py::class_<PyKvCache>(m, "KvCache")
      .def(py::init([](std::int64_t batch, std::int64_t heads_kv, std::int64_t capacity,
                       std::int64_t dim, std::int64_t dim_v, const std::string& dtype,
                       const std::string& mode, py::handle rope) {
             return std::make_unique<PyKvCache>(KvCacheShape{batch, heads_kv, capacity, dim, dim_v,
                                                             parse_dtype(dtype), parse_rope(rope)},
                                                parse_mode(mode));
           }),
           py::arg("batch"), py::arg("heads_kv"), py::arg("capacity"), py::arg("dim"),
           py::arg("dim_v"), py::arg("dtype"), py::arg("mode"), py::arg("rope"))
      .def("append", &append, py::arg("k"), py::arg("v"), py::arg("batch"), py::arg("layout"))
      .def("clear", &clear, py::arg("batch"))
      .def("length",
           [](const PyKvCache& c, std::int64_t b) {
             std::shared_lock reading(c.mutex);
             return c.cache.length(b);
           })
      .def("stored",
           [](const PyKvCache& c, std::int64_t b) {
             std::shared_lock reading(c.mutex);
             return c.cache.stored(b);
           })
      .def_property_readonly("nbytes", [](const PyKvCache& c) { return c.cache.bytes(); })
      .def_property_readonly("shape", [](const PyKvCache& c) {
        const KvCacheShape& s = c.cache.shape();
        py::dict d;
        d["batch"] = s.batch;
        d["heads_kv"] = s.heads_kv;
        d["capacity"] = s.capacity;
        d["dim"] = s.dim;
        d["dim_v"] = s.dim_v;
        d["dtype"] = std::string(s.dtype == DType::kF32    ? "float32"
                                 : s.dtype == DType::kBF16 ? "bfloat16"
                                 : s.dtype == DType::kI8   ? "int8"
                                                           : "float16");
        d["mode"] = std::string(c.cache.mode() == KvCacheMode::kLinear ? "linear" : "ring");
        return d;
      });
}

}  // namespace seqattn::python
