// Options, RunRecord, attend() and AttentionPlan for Python. Every entry point inspects its
// arrays with the GIL held, then releases it for the whole computation.
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "array_ref.hpp"
#include "bind_cache.hpp"
#include "bindings.hpp"
#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/policy.hpp"
#include "seqattn/variant_params.hpp"
#include "seqattn/workspace.hpp"

namespace seqattn::python {
namespace {

// The variant's spec from its parameters by name (the variant table's rows read them, as for
// the CLI's flags): a parameter the variant does not take is an error naming it, never dropped.
VariantSpec variant_spec(const std::string& variant, const VariantParams& params,
                         const std::optional<std::string>& profile) {
  const Variant v = parse_variant(variant, "variant");
  if (v != Variant::kAuto) return as_variant_spec(make_spec(v, params));
  if (!params.empty()) {
    const auto& [name, value] = *params.begin();
    throw Error(ErrorKind::kUnsupported, name,
                "no variant parameter with variant 'auto' (the policy chooses the variant and "
                "its parameters)",
                name + "=" + value, "drop it, or name the variant it belongs to");
  }
  AutoSpec s;
  if (profile) s.policy = SelectionPolicy::load_json(*profile);
  return s;
}

// LSH attention's rotations R as a view of the caller's float32 array [hashes, D, M] or
// [hashes * D, M] (rows contiguous); the Options object keeps the array alive (keep_alive).
void set_rotations(VariantSpec& spec, py::handle rotations) {
  auto* lsh = std::get_if<LshSpec>(&spec);
  if (lsh == nullptr) {
    throw Error(ErrorKind::kUnsupported, "rotations", "variant 'lsh' (the only one taking it)",
                "variant '" + std::string(to_string(variant_of(spec))) + "'",
                "drop rotations or pass variant='lsh'");
  }
  const ArrayRef a = inspect(rotations, "rotations");
  const int last = a.ndim - 1;
  const bool rows_dense = a.ndim == 2 || (a.ndim == 3 && a.strides[0] == a.shape[1] * a.strides[1]);
  if (a.kind != ElementKind::kF32 || (a.ndim != 2 && a.ndim != 3) || a.strides[last] != 1 ||
      !rows_dense) {
    throw Error(ErrorKind::kInvalidArgument, "rotations",
                "a float32 array [hashes, D, buckets/2] or [hashes*D, buckets/2] with contiguous "
                "rows",
                describe(a), "pass numpy.ascontiguousarray(r, dtype=numpy.float32)");
  }
  if (a.ndim == 3 && a.shape[0] != lsh->hashes) {
    throw Error(ErrorKind::kInvalidArgument, "rotations",
                "shape[0] = hashes = " + std::to_string(lsh->hashes), describe(a),
                "pass hashes= the array's rounds, or a [hashes*D, buckets/2] array");
  }
  const std::int64_t rows = a.ndim == 3 ? a.shape[0] * a.shape[1] : a.shape[0];
  lsh->rotations = {static_cast<const float*>(a.data), rows, a.shape[last], a.strides[last - 1]};
}

AttentionOptions make_options(const std::string& variant, bool causal,
                              const std::vector<std::int64_t>& key_lengths,
                              std::optional<float> scale, const VariantParams& params, int threads,
                              const std::optional<std::string>& profile,
                              std::optional<double> max_error, py::handle rope, py::handle alibi,
                              py::handle rotations, const std::string& fp32_precision) {
  AttentionOptions o;
  o.variant = variant_spec(variant, params, profile);
  if (!rotations.is_none()) set_rotations(o.variant, rotations);
  o.mask.causal = causal;
  o.mask.key_lengths = key_lengths;
  o.scale = scale;
  o.threads = threads;
  if (auto* automatic = std::get_if<AutoSpec>(&o.variant)) automatic->max_error = max_error;
  o.rope = parse_rope(rope);
  o.alibi = parse_alibi(alibi);
  o.fp32_precision = parse_fp32_precision(fp32_precision);
  return o;
}

// [(variant, [(parameter, kind, help), ...]), ...] in the table's order: the keyword arguments
// the Python functions take and how they are typed.
using ParameterRows = std::vector<std::tuple<std::string, std::string, std::string>>;
std::vector<std::pair<std::string, ParameterRows>> variant_parameters() {
  std::vector<std::pair<std::string, ParameterRows>> table;
  for (const Variant v : concrete_variants()) {
    ParameterRows& rows = table.emplace_back(std::string(to_string(v)), ParameterRows{}).second;
    for (const ParameterInfo& p : parameters_of(v))
      rows.emplace_back(p.name, std::string(to_string(p.kind)), p.help);
  }
  return table;
}

// The scores' extents [B, H_q, S_q, S_k] of q and k (in the library's axis order).
std::array<std::int64_t, 4> scores_of(const AnyConstTensor& q, std::int64_t seq_k) {
  return {q.shape[0], q.shape[1], q.shape[2], seq_k};
}

RunArgs outputs_of(py::handle lse, py::handle weights) {
  RunArgs r;
  if (!lse.is_none()) r.lse = lse_view(inspect(lse, "lse"), "lse");
  if (!weights.is_none()) r.weights = weights_view(inspect(weights, "weights"), "weights");
  return r;
}

// q, k, v and out of one call, as the library's views.
struct Operands {
  AnyConstTensor q, k, v;
  AnyTensor out;
};

Operands operands(py::handle q, py::handle k, py::handle v, py::handle out, Layout l) {
  return {input_view(inspect(q, "q"), "q", l), input_view(inspect(k, "k"), "k", l),
          input_view(inspect(v, "v"), "v", l), output_view(inspect(out, "out"), "out", l)};
}

RunRecord attend_arrays(py::handle q, py::handle k, py::handle v, py::handle out,
                        const AttentionOptions& options, py::handle keep, py::handle bias,
                        py::handle lse, py::handle weights, const std::string& layout) {
  const Operands a = operands(q, k, v, out, parse_layout(layout));
  AttentionOptions o = with_masks(options, keep, bias, scores_of(a.q, a.k.shape[2]));
  const RunArgs extra = outputs_of(lse, weights);
  o.lse = extra.lse;
  o.weights = extra.weights;
  py::gil_scoped_release unlocked;
  return attend(a.q, a.k, a.v, a.out, o);
}

// The workspace a plan's runs reuse (RunArgs::workspace), as MultiHeadAttention keeps one: a
// run that finds it free holds it for the call (try_lock, after the GIL is released); a run
// that finds it taken (another Python thread's run of the same plan) passes none, and the
// library allocates that run's scratch as it does without a workspace.
struct HeldWorkspace {
  std::mutex mutex;
  WorkspaceBuffer buffer;            // under mutex
  std::atomic<std::size_t> held{0};  // buffer.capacity(), readable without the mutex
};

struct PyPlan {
  std::optional<AttentionPlan> plan;
  std::shared_ptr<HeldWorkspace> held = std::make_shared<HeldWorkspace>();
};

// run(args) with `bytes` of the plan's held workspace in args.workspace when it is free and
// the run takes one (bytes set).
template <class Run>
RunRecord with_held_workspace(const PyPlan& p, std::optional<std::size_t> bytes, RunArgs args,
                              const Run& run) {
  std::unique_lock lock(p.held->mutex, std::defer_lock);
  if (bytes && lock.try_lock()) {
    args.workspace = p.held->buffer.get(*bytes);
    p.held->held = p.held->buffer.capacity();
  }
  return run(args);
}

// The plan's workspace bytes for a q/k/v run with these views (the fp32 copies of half arrays
// and the weights pass's scratch included) on the compute path the run takes, or none for
// weights from a variant that writes none (the run then refuses them).
std::optional<std::size_t> qkv_bytes(const AttentionPlan& plan, const Operands& a,
                                     const RunArgs& args) {
  return plan.qkv_workspace_bytes(
      {a.q.dtype, a.k.dtype, a.v.dtype, a.out.dtype, args.weights.has_value()});
}

PyPlan make_py_plan(const AttentionShape& shape, const AttentionOptions& options) {
  return PyPlan{make_plan(shape, options)};
}

// A q/k/v run: the per-call key lengths, keep mask, bias and outputs bound as RunArgs (the
// arrays stay referenced by the caller for the call's duration).
RunRecord run_plan(const PyPlan& p, py::handle q, py::handle k, py::handle v, py::handle out,
                   const std::optional<std::vector<std::int64_t>>& key_lengths, py::handle keep,
                   py::handle bias, py::handle lse, py::handle weights, const std::string& layout) {
  const Operands a = operands(q, k, v, out, parse_layout(layout));
  const AttentionShape& s = p.plan->shape();
  const std::array<std::int64_t, 4> scores{s.batch, s.heads_q, s.seq_q, s.seq_k};
  RunArgs args = outputs_of(lse, weights);
  if (key_lengths) args.key_lengths = *key_lengths;
  if (!keep.is_none()) args.keep = keep_view(inspect(keep, "mask"), "mask", scores);
  if (!bias.is_none()) args.bias = bias_view(inspect(bias, "bias"), "bias", scores);
  const std::optional<std::size_t> bytes = qkv_bytes(*p.plan, a, args);
  py::gil_scoped_release unlocked;
  return with_held_workspace(
      p, bytes, args, [&](const RunArgs& held) { return p.plan->run(a.q, a.k, a.v, a.out, held); });
}

// Frees the plan's held workspace, after a run holding it (another thread's) ends; returns the
// bytes freed. The GIL is released while it waits, so that run can finish.
std::size_t release_workspace(const PyPlan& p) {
  py::gil_scoped_release unlocked;
  const std::lock_guard lock(p.held->mutex);
  const std::size_t freed = p.held->buffer.release();
  p.held->held = 0;
  return freed;
}

// q, out, lse and query lengths of a run over a cache, and the lock that keeps appends out
// while it reads.
template <class Cache, class Run>
RunRecord run_over(Cache& cache, py::handle q, py::handle out, py::handle lse,
                   const std::optional<std::vector<std::int64_t>>& query_lengths,
                   const std::string& layout, const Run& run) {
  const Layout l = parse_layout(layout);
  const AnyConstTensor qv = input_view(inspect(q, "q"), "q", l);
  const AnyTensor ov = output_view(inspect(out, "out"), "out", l);
  RunArgs extra = outputs_of(lse, py::none());
  if (query_lengths) extra.query_lengths = *query_lengths;
  py::gil_scoped_release unlocked;
  std::shared_lock reading(cache.mutex);  // appends wait; concurrent runs do not
  return run(qv, ov, extra);
}

RunRecord run_plan_cache(const PyPlan& p, py::handle q, PyKvCache& cache, py::handle out,
                         py::handle lse,
                         const std::optional<std::vector<std::int64_t>>& query_lengths,
                         const std::string& layout) {
  return run_over(cache, q, out, lse, query_lengths, layout, [&](auto& qv, auto& ov, auto& extra) {
    return with_held_workspace(p, p.plan->workspace_bytes(), extra, [&](const RunArgs& held) {
      return p.plan->run(qv, cache.cache, ov, held);
    });
  });
}

RunRecord run_plan_paged(const PyPlan& p, py::handle q, PyPagedKvCache& cache,
                         const std::vector<PagedKvCache::SequenceId>& sequences, py::handle out,
                         py::handle lse,
                         const std::optional<std::vector<std::int64_t>>& query_lengths,
                         const std::string& layout) {
  return run_over(cache, q, out, lse, query_lengths, layout, [&](auto& qv, auto& ov, auto& extra) {
    return with_held_workspace(p, p.plan->workspace_bytes(), extra, [&](const RunArgs& held) {
      return p.plan->run(qv, cache.cache, sequences, ov, held);
    });
  });
}

py::dict shape_dict(const AttentionShape& s) {
  py::dict d;
  d["batch"] = s.batch;
  d["heads_q"] = s.heads_q;
  d["heads_kv"] = s.heads_kv;
  d["seq_q"] = s.seq_q;
  d["seq_k"] = s.seq_k;
  d["dim"] = s.dim;
  d["dim_v"] = s.dim_v;
  return d;
}

void register_record(py::module_& m) {
  py::class_<RunRecord>(m, "RunRecord", "What ran, what it cost and how long it took.")
      .def_property_readonly("variant",
                             [](const RunRecord& r) { return std::string(to_string(r.variant)); })
      .def_readonly("reason", &RunRecord::reason)
      .def_readonly("flops", &RunRecord::flops)
      .def_readonly("bytes", &RunRecord::bytes)
      .def_readonly("seconds", &RunRecord::seconds)
      .def_readonly("threads", &RunRecord::threads)
      .def_readonly("simd_target", &RunRecord::simd_target)
      .def_readonly("compute_path", &RunRecord::compute_path)
      // "l1", "l2" or e.g. "l2+near16+paced" over a KV cache, None for a run over q, k, v.
      .def_property_readonly("decode_prefetch",
                             [](const RunRecord& r) -> py::object {
                               if (r.decode_prefetch.empty()) return py::none();
                               return py::str(std::string(r.decode_prefetch));
                             })
      .def("__repr__", [](const RunRecord& r) {
        return "RunRecord(variant='" + std::string(to_string(r.variant)) +
               "', seconds=" + std::to_string(r.seconds) + ", flops=" + std::to_string(r.flops) +
               ", threads=" + std::to_string(r.threads) + ", compute_path='" +
               std::string(r.compute_path) + "', reason='" + std::string(r.reason) + "')";
      });
}

}  // namespace

AttentionOptions with_masks(const AttentionOptions& options, py::handle keep, py::handle bias,
                            const std::array<std::int64_t, 4>& scores) {
  AttentionOptions o = options;
  if (!keep.is_none()) o.mask.keep = keep_view(inspect(keep, "mask"), "mask", scores);
  if (!bias.is_none()) o.mask.bias = bias_view(inspect(bias, "bias"), "bias", scores);
  return o;
}

void register_attention(py::module_& m) {
  register_record(m);
  py::class_<AttentionOptions>(m, "Options", "What to compute (see seqattn.attention).");
  m.def("options", &make_options, py::arg("variant"), py::arg("causal"), py::arg("key_lengths"),
        py::arg("scale"), py::arg("params"), py::arg("threads"), py::arg("profile"),
        py::arg("max_error"), py::arg("rope"), py::arg("alibi"), py::arg("rotations"),
        py::arg("fp32_precision"), py::keep_alive<0, 11>());
  m.def("variant_parameters", &variant_parameters);
  m.def(
      "lsh_random_rotations",
      [](std::int64_t hashes, std::int64_t dim, std::int64_t buckets, std::uint64_t seed) {
        std::vector<float> r = lsh_random_rotations(hashes, dim, buckets, seed);
        py::array_t<float> a({hashes, dim, buckets / 2});
        std::copy(r.begin(), r.end(), a.mutable_data());
        return a;
      },
      py::arg("hashes"), py::arg("dim"), py::arg("buckets"), py::arg("seed"));
  m.def("attend", &attend_arrays, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
        py::arg("options"), py::arg("mask"), py::arg("bias"), py::arg("lse"), py::arg("weights"),
        py::arg("layout"));
  m.def(
      "select",
      [](std::int64_t seq, const std::optional<std::string>& profile) {
        const SelectionPolicy policy =
            profile ? SelectionPolicy::load_json(*profile) : SelectionPolicy{};
        const Selection s = select_variant(policy, seq);
        return std::make_pair(std::string(to_string(s.variant)), s.reason);
      },
      py::arg("seq"), py::arg("profile"));

  py::class_<AttentionShape>(m, "AttentionShape")
      .def(py::init([](std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t sq,
                       std::int64_t sk, std::int64_t d,
                       std::int64_t dv) { return AttentionShape{b, hq, hkv, sq, sk, d, dv}; }),
           py::arg("batch"), py::arg("heads_q"), py::arg("heads_kv"), py::arg("seq_q"),
           py::arg("seq_k"), py::arg("dim"), py::arg("dim_v"))
      .def("as_dict", &shape_dict);
  m.def("cache_shape", [](const PyKvCache& c, std::int64_t heads_q, std::int64_t seq_q) {
    return cache_shape(c.cache.shape(), heads_q, seq_q);
  });
  m.def("paged_shape", [](const PyPagedKvCache& c, std::int64_t batch, std::int64_t heads_q,
                          std::int64_t seq_q, std::int64_t max_length) {
    return paged_shape(c.cache.shape(), batch, heads_q, seq_q, max_length);
  });
  py::class_<PyPlan>(m, "Plan")
      .def(py::init(&make_py_plan), py::arg("shape"), py::arg("options"))
      .def("run", &run_plan, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("out"),
           py::arg("key_lengths"), py::arg("mask"), py::arg("bias"), py::arg("lse"),
           py::arg("weights"), py::arg("layout"))
      .def("run_cache", &run_plan_cache, py::arg("q"), py::arg("cache"), py::arg("out"),
           py::arg("lse"), py::arg("query_lengths"), py::arg("layout"))
      .def("release_workspace", &release_workspace)
      .def("run_paged", &run_plan_paged, py::arg("q"), py::arg("cache"), py::arg("sequences"),
           py::arg("out"), py::arg("lse"), py::arg("query_lengths"), py::arg("layout"))
      .def_property_readonly("shape", [](const PyPlan& p) { return shape_dict(p.plan->shape()); })
      .def_property_readonly(
          "variant", [](const PyPlan& p) { return std::string(to_string(p.plan->variant())); })
      .def_property_readonly("workspace_bytes",
                             [](const PyPlan& p) { return p.plan->workspace_bytes(); })
      .def_property_readonly("qkv_workspace_bytes",
                             [](const PyPlan& p) { return p.plan->qkv_workspace_bytes(); })
      .def_property_readonly("held_workspace_bytes",
                             [](const PyPlan& p) { return p.held->held.load(); });
}

}  // namespace seqattn::python
