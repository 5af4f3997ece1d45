// Python's rope= and alibi= arguments → RotaryEmbedding / Alibi (seqattn/positional.hpp). The
// values themselves are checked by the library (Error naming options.rope.* / alibi.*).
#include <pybind11/stl.h>

#include <string>

#include "bindings.hpp"

namespace seqattn::python {
namespace {

[[noreturn]] void type_error(const std::string& name, const std::string& expected, py::handle got) {
  type_fail(name, expected, py::str(py::repr(got)).cast<std::string>());
}

template <class T>
T cast_field(const py::dict& d, const char* key, const std::string& name, const std::string& what) {
  try {
    return d[key].cast<T>();
  } catch (const py::cast_error&) {
    type_error(name + "['" + key + "']", what, d[key]);
  }
}

RopeLayout parse_layout(const std::string& text) {
  if (text == "halves") return RopeLayout::kHalves;
  if (text == "interleaved") return RopeLayout::kInterleaved;
  value_fail("rope['layout']", "'halves' or 'interleaved'", "'" + text + "'");
}

}  // namespace

std::optional<RotaryEmbedding> parse_rope(py::handle rope, const std::string& name) {
  if (rope.is_none()) return std::nullopt;
  RotaryEmbedding r;
  if (py::isinstance<py::float_>(rope) || py::isinstance<py::int_>(rope)) {
    if (py::isinstance<py::bool_>(rope)) type_error(name, "a theta or a dict", rope);
    r.theta = rope.cast<double>();
    return r;
  }
  if (!py::isinstance<py::dict>(rope)) type_error(name, "None, a theta (float) or a dict", rope);
  const py::dict d = rope.cast<py::dict>();
  for (const auto& [key, value] : d) {
    const std::string k = py::str(key).cast<std::string>();
    if (k == "theta") {
      r.theta = cast_field<double>(d, "theta", name, "a float");
    } else if (k == "dims") {
      r.dims = cast_field<std::int64_t>(d, "dims", name, "an integer");
    } else if (k == "layout") {
      r.layout = parse_layout(cast_field<std::string>(d, "layout", name, "a string"));
    } else if (k == "offset") {
      r.offset = cast_field<std::int64_t>(d, "offset", name, "an integer");
    } else if (k == "linear_scaling") {
      r.linear_scaling = cast_field<double>(d, "linear_scaling", name, "a float");
    } else if (k == "q_positions") {
      r.q_positions = cast_field<std::vector<std::int64_t>>(d, "q_positions", name, "integers");
    } else if (k == "k_positions") {
      r.k_positions = cast_field<std::vector<std::int64_t>>(d, "k_positions", name, "integers");
    } else {
      throw BindingError(false, name,
                         "keys theta, dims, layout, offset, linear_scaling, q_positions, "
                         "k_positions",
                         "'" + k + "'",
                         name + ": unknown key '" + k +
                             "' (theta, dims, layout, offset, linear_scaling, q_positions, "
                             "k_positions)");
    }
  }
  return r;
}

std::optional<Alibi> parse_alibi(py::handle alibi) {
  if (alibi.is_none() || (py::isinstance<py::bool_>(alibi) && !alibi.cast<bool>())) {
    return std::nullopt;
  }
  if (py::isinstance<py::bool_>(alibi)) return Alibi{};
  Alibi a;
  py::handle slopes = alibi;
  if (py::isinstance<py::dict>(alibi)) {
    const py::dict d = alibi.cast<py::dict>();
    for (const auto& [key, value] : d) {
      const std::string k = py::str(key).cast<std::string>();
      if (k != "slopes" && k != "form") {
        throw BindingError(false, "alibi", "keys slopes, form", "'" + k + "'",
                           "alibi: unknown key '" + k + "' (slopes, form)");
      }
    }
    if (d.contains("form")) {
      const std::string form = cast_field<std::string>(d, "form", "alibi", "a string");
      if (form != "causal" && form != "symmetric") {
        value_fail("alibi['form']", "'causal' or 'symmetric'", "'" + form + "'");
      }
      a.form = form == "causal" ? AlibiForm::kCausal : AlibiForm::kSymmetric;
    }
    slopes = d.contains("slopes") ? py::handle(d["slopes"]) : py::handle(py::none());
  }
  if (!slopes.is_none()) {
    try {
      a.slopes = slopes.cast<std::vector<float>>();
    } catch (const py::cast_error&) {
      type_error("alibi slopes", "a sequence of floats (one per query head)", slopes);
    }
  }
  return a;
}

}  // namespace seqattn::python
