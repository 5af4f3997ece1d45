// The one checked helper for sizes: every product of extents that sizes a buffer or an offset
// in an entry point (attend, plans, caches, MHA, the GEMM, the random matrices, the CLI) goes
// through checked_product, and every allocation sized from one through checked_vector, so a
// bad size is a seqattn::Error, never signed overflow, std::bad_alloc or std::length_error.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace seqattn::detail {

// The product of non-negative factors if it fits in 2^62 (so byte counts of it still fit), else
// an Error naming `argument` with the factors: every size product of an entry point goes here.
// `argument` is a view, so a product that fits allocates nothing (runs in a steady loop call it).
std::int64_t checked_product(std::initializer_list<std::int64_t> factors,
                             std::string_view argument);
// The same naming `argument` followed by `suffix` (joined only to throw: a name built for
// every call, as "x_q" + " (batch x seq x row stride)", would allocate in a steady loop).
std::int64_t checked_product(std::initializer_list<std::int64_t> factors, std::string_view argument,
                             std::string_view suffix);

// Throws the Error for an allocation of `bytes` that failed (kInvalidArgument, naming `argument`).
[[noreturn]] void fail_allocation(const std::string& argument, double bytes);

// `count` value-initialised elements, or an Error naming `argument` when they do not fit in
// memory: std::bad_alloc and std::length_error never leave the library. Sizes come from
// checked_product.
template <class T>
std::vector<T> checked_vector(std::int64_t count, const std::string& argument) {
  try {
    return std::vector<T>(static_cast<std::size_t>(count));
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  fail_allocation(argument, static_cast<double>(count) * sizeof(T));
}

}  // namespace seqattn::detail
