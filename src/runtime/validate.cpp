#include "src/runtime/validate.hpp"

#include "src/runtime/positional.hpp"
#include "src/runtime/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace seqattn::detail {
namespace {

// Axis labels in messages: masks, biases and weights are [B, H, S_q, S_k]; every other
// tensor is [B, H, S, D].
const char* axis_label(const std::string& name, int axis) {
  static constexpr const char* kTensor[4] = {"batch", "heads", "seq", "dim"};
  static constexpr const char* kScores[4] = {"batch", "heads", "S_q", "S_k"};
  const bool scores = name.rfind("mask.", 0) == 0 || name == "weights";
  return (scores ? kScores : kTensor)[axis];
}

void expect_extent(const std::string& name, int axis, std::int64_t actual, std::int64_t expected,
                   const std::string& why) {
  if (actual != expected) {
    fail(name + ".shape[" + str(axis) + "] (" + axis_label(name, axis) + ")",
         str(expected) + " (" + why + ")", str(actual));
  }
}

// A mask or bias is [B or 1, H_q or 1, S_q, S_k]; size-1 batch/head axes broadcast.
template <class T>
ByteRange check_mask_like(const std::string& name, const TensorView<const T>& m, const Problem& p) {
  ByteRange range = check_view(name, m.data, m.shape, m.strides, sizeof(T));
  if (m.shape[0] != 1 && m.shape[0] != p.batch()) {
    fail(name + ".shape[0] (batch)", "1 or " + str(p.batch()), str(m.shape[0]));
  }
  if (m.shape[1] != 1 && m.shape[1] != p.heads_q()) {
    fail(name + ".shape[1] (heads)", "1 or H_q = " + str(p.heads_q()), str(m.shape[1]));
  }
  expect_extent(name, 2, m.shape[2], p.seq_q(), "S_q");
  expect_extent(name, 3, m.shape[3], p.seq_k(), "S_k");
  return range;
}

}  // namespace

void fail(const std::string& argument, const std::string& expected, const std::string& actual,
          const std::string& hint) {
  throw Error(ErrorKind::kInvalidArgument, argument, expected, actual, hint);
}

void refuse_option(const std::string& variant, const std::string& option, const std::string& why,
                   const std::string& instead) {
  throw Error(ErrorKind::kUnsupported, option, "an option variant '" + variant + "' can honour",
              option + " is set",
              "variant '" + variant + "' cannot honour option '" + option + "': " + why +
                  "; use variant=" + instead);
}

void NamedRanges::add(const char* name, const ByteRange& range) {
  if (size_ == items_.size()) throw std::logic_error("NamedRanges: more than 8 views in a call");
  items_[size_++] = {name, range};
}

void add_mask_ranges(NamedRanges& ranges, const std::optional<TensorView<const std::uint8_t>>& keep,
                     const std::optional<ConstTensor>& bias) {
  if (keep)
    ranges.add("mask.keep", check_view("mask.keep", keep->data, keep->shape, keep->strides, 1));
  if (bias) {
    ranges.add("mask.bias",
               check_view("mask.bias", bias->data, bias->shape, bias->strides, sizeof(float)));
  }
}

void check_output_disjoint(const std::string& name, const ByteRange& range,
                           const NamedRanges& others) {
  for (const auto& [other, r] : others) {
    if (range.overlaps(r)) {
      fail(name, "memory disjoint from '" + std::string(other) + "'", "overlapping address ranges",
           "attention reads every input row for every output row, so it cannot run in place");
    }
  }
}

void check_scale(float scale, const std::string& name) {
  if (!std::isfinite(scale) || !(scale > 0.0f)) {
    fail(name, "a finite number > 0", std::to_string(scale),
         "leave it unset for the default (1/sqrt(D); linear elu1/relu: unscaled)");
  }
}

std::string shape_text(const std::array<std::int64_t, 4>& shape) {
  std::ostringstream s;
  s << '[' << shape[0] << ", " << shape[1] << ", " << shape[2] << ", " << shape[3] << ']';
  return s.str();
}

void check_tensor_dtype(const std::string& name, DType dtype) {
  if (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16) return;
  fail(name + ".dtype", "DType::kF32, kBF16 or kF16",
       dtype == DType::kI8 ? "DType::kI8 (a KvCache storage type, not a tensor's)"
                           : std::to_string(static_cast<int>(dtype)) + " (not a DType)");
}

ByteRange check_view(const std::string& name, const void* data,
                     const std::array<std::int64_t, 4>& shape,
                     const std::array<std::int64_t, 4>& strides, std::size_t element_size) {
  // Extents first: an empty tensor (PyTorch gives it a null data pointer) is named by its
  // zero-size axis, not by the pointer.
  for (int a = 0; a < 4; ++a) {
    if (shape[a] < 1)
      fail(name + ".shape[" + str(a) + "] (" + axis_label(name, a) + ")", ">= 1", str(shape[a]));
  }
  if (data == nullptr) fail(name + ".data", "a non-null pointer", "nullptr");
  std::int64_t last_offset = 0;  // element offset of the last element
  std::int64_t count = 1;
  for (int a = 0; a < 4; ++a) {
    if (strides[a] < 0) {
      fail(name + ".strides[" + str(a) + "]", ">= 0", str(strides[a]),
           "negative strides are not supported; pass a view over the reversed data instead");
    }
    std::int64_t span = 0;
    if (__builtin_mul_overflow(shape[a] - 1, strides[a], &span) ||
        __builtin_add_overflow(last_offset, span, &last_offset) ||
        __builtin_mul_overflow(count, shape[a], &count)) {
      fail(name + ".shape", "a view whose size fits in 63 bits", shape_text(shape));
    }
  }
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(last_offset + 1, static_cast<std::int64_t>(element_size), &bytes) ||
      __builtin_mul_overflow(count, static_cast<std::int64_t>(element_size), &count)) {
    fail(name + ".shape", "a view whose size in bytes fits in 63 bits", shape_text(shape));
  }
  auto first = reinterpret_cast<std::uintptr_t>(data);
  return {first, first + static_cast<std::uintptr_t>(bytes)};
}

void check_no_self_overlap(const std::string& name, const std::array<std::int64_t, 4>& shape,
                           const std::array<std::int64_t, 4>& strides) {
  // Sorted by stride, each axis must step past everything the smaller axes span.
  std::array<int, 4> order{0, 1, 2, 3};
  std::sort(order.begin(), order.end(), [&](int a, int b) { return strides[a] < strides[b]; });
  std::int64_t span = 1;  // elements covered by the axes seen so far
  for (int a : order) {
    if (shape[a] == 1) continue;
    if (strides[a] < span) {
      fail(name + ".strides[" + str(a) + "]",
           ">= " + str(span) + " so that output elements do not alias", str(strides[a]));
    }
    span = strides[a] * shape[a];
  }
}

AttentionShape shape_of(const AnyConstTensor& q, const AnyConstTensor& k, const AnyConstTensor& v,
                        const AnyTensor& out) {
  check_view("q", q.data, q.shape, q.strides, dtype_size(q.dtype));
  check_view("k", k.data, k.shape, k.strides, dtype_size(k.dtype));
  check_view("v", v.data, v.shape, v.strides, dtype_size(v.dtype));
  check_view("out", out.data, out.shape, out.strides, dtype_size(out.dtype));
  expect_extent("k", 0, k.shape[0], q.shape[0], "q's batch");
  expect_extent("v", 0, v.shape[0], q.shape[0], "q's batch");
  if (q.shape[1] % k.shape[1] != 0) {
    fail("k.shape[1] (heads)", "a divisor of H_q = " + str(q.shape[1]), str(k.shape[1]),
         "grouped-query attention needs H_q to be a multiple of H_kv");
  }
  expect_extent("v", 1, v.shape[1], k.shape[1], "k's heads");
  expect_extent("v", 2, v.shape[2], k.shape[2], "k's seq");
  expect_extent("k", 3, k.shape[3], q.shape[3], "q's head dim D");
  const std::array<std::int64_t, 4> out_shape{q.shape[0], q.shape[1], q.shape[2], v.shape[3]};
  if (out.shape != out_shape) {
    fail("out.shape", shape_text(out_shape) + " = [B, H_q, S_q, D_v]", shape_text(out.shape));
  }
  return {q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3], v.shape[3]};
}

void check_shape(const AttentionShape& s) {
  const std::pair<const char*, std::int64_t> extents[] = {
      {"shape.batch", s.batch}, {"shape.heads_q", s.heads_q}, {"shape.heads_kv", s.heads_kv},
      {"shape.seq_q", s.seq_q}, {"shape.seq_k", s.seq_k},     {"shape.dim", s.dim},
      {"shape.dim_v", s.dim_v}};
  for (const auto& [name, value] : extents) {
    if (value < 1) fail(name, ">= 1", str(value));
  }
  if (s.heads_q % s.heads_kv != 0) {
    fail("shape.heads_kv", "a divisor of heads_q = " + str(s.heads_q), str(s.heads_kv),
         "grouped-query attention needs H_q to be a multiple of H_kv");
  }
  // Every tensor of the problem (and the S_q x S_k weights) must be addressable.
  const std::int64_t widest = std::max({s.dim, s.dim_v, s.seq_k});
  const std::int64_t longest = std::max(s.seq_q, s.seq_k);
  std::int64_t count = 0;
  if (__builtin_mul_overflow(s.batch, s.heads_q, &count) ||
      __builtin_mul_overflow(count, longest, &count) ||
      __builtin_mul_overflow(count, widest, &count) ||
      __builtin_mul_overflow(count, std::int64_t{8}, &count)) {
    fail("shape", "extents whose tensors fit in 63 bits of bytes",
         shape_text({s.batch, s.heads_q, longest, widest}));
  }
}

namespace {

// Fails for a per-call part set in options given to make_plan.
void refuse_per_call(const char* argument, bool set, const char* run_arg) {
  if (!set) return;
  fail(argument, "unset when planning", "set",
       std::string("a plan serves many calls: pass it to AttentionPlan::run as RunArgs::") +
           run_arg + " (attend() does this itself)");
}

}  // namespace

Problem plan_problem(const AttentionShape& shape, const AttentionOptions& options) {
  check_shape(shape);
  refuse_per_call("options.mask.key_lengths", !options.mask.key_lengths.empty(), "key_lengths");
  refuse_per_call("options.mask.keep", options.mask.keep.has_value(), "keep");
  refuse_per_call("options.mask.bias", options.mask.bias.has_value(), "bias");
  refuse_per_call("options.weights", options.weights.has_value(), "weights");
  refuse_per_call("options.lse", options.lse.has_value(), "lse");
  Problem p;
  p.q.shape = {shape.batch, shape.heads_q, shape.seq_q, shape.dim};
  p.k.shape = {shape.batch, shape.heads_kv, shape.seq_k, shape.dim};
  p.v.shape = {shape.batch, shape.heads_kv, shape.seq_k, shape.dim_v};
  p.out.shape = {shape.batch, shape.heads_q, shape.seq_q, shape.dim_v};
  p.mask.causal = options.mask.causal;

  if (options.scale) {
    check_scale(*options.scale);
    p.scale = *options.scale;
    p.scale_given = true;
  } else {
    p.scale = 1.0f / std::sqrt(static_cast<float>(p.dim()));
  }
  p.threads = resolve_threads(options.threads, "threads");
  if (options.fp32_precision != Fp32Precision::kIeee &&
      options.fp32_precision != Fp32Precision::kBf16) {
    fail("fp32_precision", "Fp32Precision::kIeee or ::kBf16",
         "the value " + str(static_cast<std::int64_t>(options.fp32_precision)));
  }
  p.positional = make_positional(options, p);
  return p;
}

ByteRange bind_view(const std::string& name, const ConstTensor& view,
                    const std::array<std::int64_t, 4>& planned) {
  const ByteRange range = check_view(name, view.data, view.shape, view.strides, sizeof(float));
  if (view.shape != planned) {
    fail(name + ".shape", shape_text(planned) + " (as planned)", shape_text(view.shape),
         "make a plan for this shape");
  }
  return range;
}

AttentionOptions plan_options(const AttentionOptions& options) {
  AttentionOptions planned = options;
  planned.mask.key_lengths.clear();
  planned.mask.keep.reset();
  planned.mask.bias.reset();
  planned.lse.reset();
  planned.weights.reset();
  return planned;
}

RunArgs run_args(const Mask& mask) {
  RunArgs args;
  args.key_lengths = mask.key_lengths;
  args.keep = mask.keep;
  args.bias = mask.bias;
  return args;
}

RunArgs run_args(const AttentionOptions& options) {
  RunArgs args = run_args(options.mask);
  args.lse = options.lse;
  args.weights = options.weights;
  return args;
}

void bind_mask(Problem& p, const RunArgs& args) {
  const std::span<const std::int64_t> lengths = args.key_lengths;
  if (!lengths.empty()) {
    if (static_cast<std::int64_t>(lengths.size()) != p.batch()) {
      fail("mask.key_lengths.size()", str(p.batch()) + " (one per batch)",
           str(static_cast<std::int64_t>(lengths.size())));
    }
    for (std::size_t b = 0; b < lengths.size(); ++b) {
      if (lengths[b] < 0 || lengths[b] > p.seq_k()) {
        fail("mask.key_lengths[" + std::to_string(b) + "]", "in [0, S_k = " + str(p.seq_k()) + "]",
             str(lengths[b]));
      }
    }
  }
  if (args.keep) check_mask_like("mask.keep", *args.keep, p);
  if (args.bias) check_mask_like("mask.bias", *args.bias, p);
  p.mask.key_lengths = lengths;
  p.mask.keep = args.keep;
  p.mask.bias = args.bias;
}

Problem bind_outputs(const Problem& bound_inputs, const Tensor& out, const RunArgs& args,
                     NamedRanges inputs) {
  Problem p = bound_inputs;
  const ByteRange ro = bind_view("out", out, p.out.shape);
  check_no_self_overlap("out", out.shape, out.strides);
  add_mask_ranges(inputs, p.mask.keep, p.mask.bias);
  check_output_disjoint("out", ro, inputs);
  inputs.add("out", ro);
  p.out = out;
  if (args.weights) {
    const Tensor& w = *args.weights;
    ByteRange rw = check_view("weights", w.data, w.shape, w.strides, sizeof(float));
    const std::array<std::int64_t, 4> want{p.batch(), p.heads_q(), p.seq_q(), p.seq_k()};
    if (w.shape != want)
      fail("weights.shape", shape_text(want) + " = [B, H_q, S_q, S_k]", shape_text(w.shape));
    check_no_self_overlap("weights", w.shape, w.strides);
    check_output_disjoint("weights", rw, inputs);
    inputs.add("weights", rw);
    p.weights = w;
  }
  if (args.lse) {
    const Tensor& l = *args.lse;
    ByteRange rl = check_view("lse", l.data, l.shape, l.strides, sizeof(float));
    const std::array<std::int64_t, 4> want{p.batch(), p.heads_q(), p.seq_q(), 1};
    if (l.shape != want)
      fail("lse.shape", shape_text(want) + " = [B, H_q, S_q, 1]", shape_text(l.shape));
    check_no_self_overlap("lse", l.shape, l.strides);
    check_output_disjoint("lse", rl, inputs);
    p.lse = l;
  }
  return p;
}

Problem bind_problem(const Problem& planned, const ConstTensor& q, const ConstTensor& k,
                     const ConstTensor& v, const Tensor& out, const RunArgs& args) {
  Problem p = planned;
  bind_mask(p, args);
  const NamedRanges inputs{{"q", bind_view("q", q, planned.q.shape)},
                           {"k", bind_view("k", k, planned.k.shape)},
                           {"v", bind_view("v", v, planned.v.shape)}};
  p.q = q;
  p.k = k;
  p.v = v;
  return bind_outputs(p, out, args, inputs);
}

Problem validate_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                         const Tensor& out, const AttentionOptions& options) {
  const Problem p = plan_problem(shape_of(q, k, v, out), plan_options(options));
  return bind_problem(p, q, k, v, out, run_args(options));
}

}  // namespace seqattn::detail
