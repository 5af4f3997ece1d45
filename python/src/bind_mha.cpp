// MultiHeadAttention for Python: weights copied in once (PyTorch's [out, in] nn.Linear layout),
// forward() on [B, S, d_model] float32 or bfloat16 arrays (a bf16 layer) with the GIL released. The
// C++ layer reuses one workspace, so a mutex serialises forward() calls on one object (taken
// without the GIL).
#include <mutex>
#include <optional>
#include <type_traits>

#include "array_ref.hpp"
#include "bindings.hpp"
#include "seqattn/half.hpp"
#include "seqattn/mha.hpp"

namespace seqattn::python {
namespace {

struct PyMha {
  explicit PyMha(const MhaConfig& config) : layer(config) {}
  MultiHeadAttention layer;
  std::mutex mutex;
};

Projection parse_projection(const std::string& name) {
  if (name == "q") return Projection::kQuery;
  if (name == "k") return Projection::kKey;
  if (name == "v") return Projection::kValue;
  if (name == "o") return Projection::kOutput;
  value_fail("projection", "'q', 'k', 'v' or 'o'", "'" + name + "'");
}

template <class T>
SequenceView<T> sequence_view(const ArrayRef& a, const std::string& name) {
  constexpr bool kFloat = std::is_same_v<std::remove_const_t<T>, float>;
  const ElementKind want = kFloat ? ElementKind::kF32 : ElementKind::kBF16;
  if (a.kind != want) type_fail(name, kFloat ? "float32" : "bfloat16, as x is", describe(a));
  if (a.ndim != 3) value_fail(name, "[B, S, d_model]", describe(a));
  const std::int64_t row = a.shape[1] == 1 ? a.shape[2] : a.strides[1];
  const bool rows_ok = a.strides[2] == 1 || a.shape[2] == 1;
  const bool batches_ok = a.shape[0] == 1 || a.strides[0] == a.shape[1] * row;
  if (!rows_ok || !batches_ok || row < a.shape[2]) {
    value_fail(name,
               "rows of contiguous features, batches one after the other (strides [S·r, r, 1] "
               "with r >= d_model)",
               "strides [" + std::to_string(a.strides[0]) + ", " + std::to_string(a.strides[1]) +
                   ", " + std::to_string(a.strides[2]) + "]");
  }
  return {static_cast<T*>(a.data), a.shape[0], a.shape[1], a.shape[2], row};
}

void set_weight(PyMha& m, const std::string& which, py::handle w) {
  const ArrayRef a = inspect(w, "weight");
  if (a.kind != ElementKind::kF32 || a.ndim != 2)
    type_fail("weight", "a float32 [out, in] matrix", describe(a));
  if (a.strides[1] != 1 || a.strides[0] != a.shape[1])
    value_fail("weight", "a contiguous [out, in] matrix (call .contiguous())", describe(a));
  std::lock_guard locked(m.mutex);
  m.layer.set_weights_pytorch(parse_projection(which), static_cast<const float*>(a.data),
                              a.shape[0], a.shape[1]);
}

void set_bias(PyMha& m, const std::string& which, py::handle b) {
  const ArrayRef a = inspect(b, "bias");
  if (a.kind != ElementKind::kF32 || a.ndim != 1 || (a.shape[0] > 1 && a.strides[0] != 1))
    type_fail("bias", "a contiguous float32 vector", describe(a));
  std::lock_guard locked(m.mutex);
  m.layer.set_bias(parse_projection(which), static_cast<const float*>(a.data), a.shape[0]);
}

// E: float, or bfloat16 for a bf16 layer (x, x_kv and out all bf16).
template <class E>
MhaRecord forward_as(PyMha& m, const ArrayRef& x, py::handle x_kv, const ArrayRef& out,
                     const AttentionOptions& options, py::handle keep, py::handle bias,
                     py::handle weights) {
  const SequenceView<const E> xq = sequence_view<const E>(x, "x");
  const bool self = x_kv.is_none();
  const SequenceView<const E> xk =
      self ? xq : sequence_view<const E>(inspect(x_kv, "x_kv"), "x_kv");
  const SequenceView<E> ov = sequence_view<E>(out, "out");
  const std::array<std::int64_t, 4> scores{xq.batch, m.layer.config().num_heads, xq.seq, xk.seq};
  const AttentionOptions bound = with_masks(options, keep, bias, scores);
  std::optional<Tensor> w;
  if (!weights.is_none()) w = weights_view(inspect(weights, "weights"), "weights");
  py::gil_scoped_release unlocked;
  std::lock_guard locked(m.mutex);
  return self ? m.layer.forward(xq, ov, bound.mask, w) : m.layer.forward(xq, xk, ov, bound.mask, w);
}

MhaRecord forward(PyMha& m, py::handle x, py::handle x_kv, py::handle out,
                  const AttentionOptions& options, py::handle keep, py::handle bias,
                  py::handle weights) {
  const ArrayRef xa = inspect(x, "x");
  const ArrayRef o = inspect(out, "out");
  if (!o.writable) value_fail("out", "a writable array", "a read-only one");
  if (xa.kind == ElementKind::kBF16) {
    return forward_as<bfloat16>(m, xa, x_kv, o, options, keep, bias, weights);
  }
  return forward_as<float>(m, xa, x_kv, o, options, keep, bias, weights);
}

}  // namespace

void register_mha(py::module_& m) {
  py::class_<MhaRecord>(m, "MhaRecord")
      .def_readonly("attention", &MhaRecord::attention)
      .def_readonly("projection_seconds", &MhaRecord::projection_seconds)
      .def_readonly("attention_seconds", &MhaRecord::attention_seconds)
      .def_readonly("total_seconds", &MhaRecord::total_seconds)
      .def_readonly("projection_flops", &MhaRecord::projection_flops)
      .def_readonly("projection_path", &MhaRecord::projection_path);
  py::class_<PyMha>(m, "MultiHeadAttention")
      .def(py::init([](std::int64_t d_model, std::int64_t num_heads, std::int64_t num_kv_heads,
                       bool bias, bool output_projection, bool sinusoidal_positions,
                       const AttentionOptions& options) {
             // The layer scales by 1/√d_k as nn.MultiheadAttention does: a scale would be lost.
             if (options.scale) {
               throw BindingError(
                   false, "scale", "no scale", std::to_string(*options.scale),
                   "scale: MultiHeadAttention scales scores by 1/sqrt(d_k) as "
                   "torch.nn.MultiheadAttention does; expected no scale, got " +
                       std::to_string(*options.scale) +
                       " (use seqattn.attention on your own projections for another scale)");
             }
             MhaConfig c;
             c.d_model = d_model;
             c.num_heads = num_heads;
             c.num_kv_heads = num_kv_heads;
             c.bias = bias;
             c.output_projection = output_projection;
             c.variant = options.variant;
             c.threads = options.threads;
             c.sinusoidal_positions = sinusoidal_positions;
             c.rope = options.rope;
             c.alibi = options.alibi;
             c.fp32_precision = options.fp32_precision;
             return std::make_unique<PyMha>(c);
           }),
           py::arg("d_model"), py::arg("num_heads"), py::arg("num_kv_heads"), py::arg("bias"),
           py::arg("output_projection"), py::arg("sinusoidal_positions"), py::arg("options"))
      .def("set_weight", &set_weight, py::arg("which"), py::arg("weight"))
      .def("set_bias", &set_bias, py::arg("which"), py::arg("bias"))
      .def("out_features",
           [](PyMha& m, const std::string& which) {
             return m.layer.out_features(parse_projection(which));
           })
      .def("forward", &forward, py::arg("x"), py::arg("x_kv"), py::arg("out"), py::arg("options"),
           py::arg("mask"), py::arg("bias"), py::arg("weights"));
}

}  // namespace seqattn::python
