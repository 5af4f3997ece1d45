// Argument validation shared by attend() and the variants: every failure is a seqattn::Error
// that names the argument, the expected and the actual value.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/tensor.hpp"
#include "src/core/problem.hpp"
#include "src/runtime/checked_size.hpp"

namespace seqattn::detail {

[[noreturn]] void fail(const std::string& argument, const std::string& expected,
                       const std::string& actual, const std::string& hint = {});

// Throws Error(kUnsupported) naming `option`, which variant `variant` cannot honour: why, and
// which variants can (`instead`, e.g. "dense or sliding-window").
[[noreturn]] void refuse_option(const std::string& variant, const std::string& option,
                                const std::string& why, const std::string& instead);

// An integer in an error message.
inline std::string str(std::int64_t x) { return std::to_string(x); }

std::string shape_text(const std::array<std::int64_t, 4>& shape);

// Address range [first, last) in bytes spanned by a view; views must have non-negative strides.
struct ByteRange {
  std::uintptr_t first = 0;
  std::uintptr_t last = 0;
  bool overlaps(const ByteRange& o) const { return first < o.last && o.first < last; }
};

// Fails (naming `name`.dtype) unless dtype is one a tensor may have: kF32, kBF16 or kF16. A
// value outside the enum would otherwise be sized as one type and read as another.
void check_tensor_dtype(const std::string& name, DType dtype);

// Checks data != nullptr, every extent >= 1, strides >= 0, no size overflow; returns the range.
ByteRange check_view(const std::string& name, const void* data,
                     const std::array<std::int64_t, 4>& shape,
                     const std::array<std::int64_t, 4>& strides, std::size_t element_size);

// The byte ranges of a call's inputs, by name, for the overlap checks: q, k, v, mask.keep,
// mask.bias, out, weights at most. A fixed array, so binding a run allocates nothing; names
// are string literals.
class NamedRanges {
 public:
  NamedRanges() = default;
  NamedRanges(std::initializer_list<std::pair<const char*, ByteRange>> items) {
    for (const auto& [name, range] : items) add(name, range);
  }
  void add(const char* name, const ByteRange& range);
  const std::pair<const char*, ByteRange>* begin() const { return items_.data(); }
  const std::pair<const char*, ByteRange>* end() const { return items_.data() + size_; }

 private:
  std::array<std::pair<const char*, ByteRange>, 8> items_{};
  std::size_t size_ = 0;
};

// Adds the byte ranges of a run's keep mask and bias (checked views) to `ranges`.
void add_mask_ranges(NamedRanges& ranges, const std::optional<TensorView<const std::uint8_t>>& keep,
                     const std::optional<ConstTensor>& bias);

// Fails when `range` (of output `name`) overlaps any of `others`.
void check_output_disjoint(const std::string& name, const ByteRange& range,
                           const NamedRanges& others);

// Checks that no two distinct elements of a view share an address (outputs only).
void check_no_self_overlap(const std::string& name, const std::array<std::int64_t, 4>& shape,
                           const std::array<std::int64_t, 4>& strides);

// The extents of q, k, v and out, checked for consistency (the messages name the tensor).
AttentionShape shape_of(const AnyConstTensor& q, const AnyConstTensor& k, const AnyConstTensor& v,
                        const AnyTensor& out);

// A caller's softmax or feature scale: finite and > 0 (a negative one would flip which keys a
// query prefers, and zero makes every score equal).
void check_scale(float scale, const std::string& name = "scale");

// Extents >= 1, H_q a multiple of H_kv, sizes that fit.
void check_shape(const AttentionShape& shape);

// Every check that needs no tensor data: the shape, scale, threads, positional encodings; and
// that the per-call parts of the options (key lengths, keep, bias, weights, lse) are unset.
// The problem's q/k/v/out carry shapes only (null data); its mask holds the causal flag only.
Problem plan_problem(const AttentionShape& shape, const AttentionOptions& options);

// A one-shot call's options split in two: what it plans with (the per-call parts cleared) and
// its run arguments (views of options' key lengths, masks and outputs: keep options alive).
AttentionOptions plan_options(const AttentionOptions& options);
RunArgs run_args(const AttentionOptions& options);
// The mask's per-call parts (key lengths, keep, bias) as run arguments: views, nothing copied.
RunArgs run_args(const Mask& mask);

// Binds the run's key lengths, keep mask and bias to a planned problem, checked against its
// extents (B lengths in [0, S_k]; [B or 1, H_q or 1, S_q, S_k] views).
void bind_mask(Problem& p, const RunArgs& args);

// check_view of one tensor plus its shape against the planned one; returns its byte range.
ByteRange bind_view(const std::string& name, const ConstTensor& view,
                    const std::array<std::int64_t, 4>& planned);

// Binds out and the per-call outputs to a problem whose inputs (and mask) are bound: shapes as
// planned, pointers, strides, no self-overlap, and no output overlapping `inputs` or the
// problem's mask.keep/bias.
Problem bind_outputs(const Problem& bound_inputs, const Tensor& out, const RunArgs& args,
                     NamedRanges inputs);

// Binds q, k, v, out and the run arguments to a planned problem (bind_mask, bind_outputs).
Problem bind_problem(const Problem& planned, const ConstTensor& q, const ConstTensor& k,
                     const ConstTensor& v, const Tensor& out, const RunArgs& args);

// shape_of + plan_problem + bind_problem in one call (for one-shot entry points). The problem's
// mask views options' key lengths and masks: options must outlive it.
Problem validate_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                         const Tensor& out, const AttentionOptions& options);

}  // namespace seqattn::detail
