// The C++ element type of a DType, and the one element conversion every path uses (the
// staging of half arguments, KvCache packing, the CLI): widening is exact, narrowing rounds to
// nearest even (half.hpp).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include "seqattn/half.hpp"

namespace seqattn::detail {

// Calls f(T{}) with T the element type of `dtype` (float, bfloat16 or float16) and returns its
// result. For tensors: a kI8 view is refused before it gets here (check_tensor_dtype).
template <class F>
decltype(auto) visit_element(DType dtype, F&& f) {
  switch (dtype) {
    case DType::kBF16:
      return f(bfloat16{});
    case DType::kF16:
      return f(float16{});
    case DType::kF32:
    default:
      return f(float{});
  }
}

// visit_element for a cache's storage, which may also be int8 (DType::kI8 → std::int8_t).
template <class F>
decltype(auto) visit_cache_element(DType dtype, F&& f) {
  if (dtype == DType::kI8) return f(std::int8_t{});
  return visit_element(dtype, std::forward<F>(f));
}

// x as a Dst: through float, so every pair of element types converts the same way.
template <class Dst, class Src>
Dst convert_element(Src x) {
  if constexpr (std::is_same_v<Dst, float>) {
    return static_cast<float>(x);
  } else {
    return Dst(static_cast<float>(x));
  }
}

}  // namespace seqattn::detail
