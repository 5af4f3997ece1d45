// The C++ element type of a DType, and the one element conversion every path uses (the
// staging of half arguments, KvCache packing, the CLI): widening is exact, narrowing rounds to
// nearest even (half.hpp).
#pragma once

#include <type_traits>

#include "seqattn/half.hpp"

namespace seqattn::detail {

// Calls f(T{}) with T the element type of `dtype` (float, bfloat16 or float16) and returns its
// result.
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
