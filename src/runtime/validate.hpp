// Argument validation shared by attend() and the variants: every failure is a seqattn::Error
// that names the argument, the expected and the actual value.
#pragma once

#include <cstdint>
#include <string>

#include "seqattn/error.hpp"
#include "seqattn/tensor.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

[[noreturn]] void fail(const std::string& argument, const std::string& expected,
                       const std::string& actual, const std::string& hint = {});

std::string shape_text(const std::array<std::int64_t, 4>& shape);

// Address range [first, last) in bytes spanned by a view; views must have non-negative strides.
struct ByteRange {
  std::uintptr_t first = 0;
  std::uintptr_t last = 0;
  bool overlaps(const ByteRange& o) const { return first < o.last && o.first < last; }
};

// Checks data != nullptr, every extent >= 1, strides >= 0, no size overflow; returns the range.
ByteRange check_view(const std::string& name, const void* data,
                     const std::array<std::int64_t, 4>& shape,
                     const std::array<std::int64_t, 4>& strides, std::size_t element_size);

// Checks that no two distinct elements of a view share an address (outputs only).
void check_no_self_overlap(const std::string& name, const std::array<std::int64_t, 4>& shape,
                           const std::array<std::int64_t, 4>& strides);

// Validates q/k/v/out and the options' mask, bias, scale, weights, lse and threads; returns
// the problem every variant runs on. Throws before anything is written.
Problem validate_problem(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                         const Tensor& out, const AttentionOptions& options);

}  // namespace seqattn::detail
