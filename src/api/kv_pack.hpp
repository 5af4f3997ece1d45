// The per-token conversions both caches (KvCache, PagedKvCache) apply on append: a key row
// widened to fp32 and rotated once at its position (RoPE), a value row widened, and the int8
// scale of each (src/runtime/int8_rows.hpp).
#pragma once

#include <cstdint>
#include <string>

#include "seqattn/tensor.hpp"
#include "src/runtime/element_types.hpp"
#include "src/runtime/positional.hpp"

namespace seqattn::detail {

// The longest key row an int8 cache stores (its integer Q·Kᵀ stays exact in int32).
inline constexpr std::int64_t kMaxInt8Dim = 65536;

// Whether an append that converts `elements` K and V elements writes its (batch,) kv heads in
// parallel: above 2^18 (a prompt). A decode step's append stays on the calling thread, out of
// OpenMP, and allocates nothing (detail::for_each_index).
inline bool parallel_append(double elements) { return elements > double(1 << 18); }

// Fails (naming shape.dtype) unless dtype is one a cache stores: f32, bf16, f16 or i8; and
// (naming shape.dim) for an int8 cache with dim > kMaxInt8Dim.
void check_cache_dtype(DType dtype, std::int64_t dim);

// The Error of an int8 append whose K (which = 0) or V (1) row is not finite: `where` names
// the row ("batch 0, kv head 1, token 2"); rotated: the key was rotated (RoPE) first.
[[noreturn]] void fail_non_finite_row(int which, const std::string& where, bool rotated);

// Checks appended tokens k [batches, H_kv, n, D] and v [batches, H_kv, n, D_v] (dtypes, views,
// shapes; Errors name k.*, v.*); returns n.
std::int64_t check_cache_tokens(std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                                std::int64_t batches, const AnyConstTensor& k,
                                const AnyConstTensor& v);

// row[0, n) = src[i·step] in fp32.
template <class Src>
void widen_row(const Src* src, std::int64_t step, std::int64_t n, float* row) {
  for (std::int64_t i = 0; i < n; ++i) row[i] = convert_element<float>(src[i * step]);
}

// row[0, D) = the key src (stride `step`) in fp32, rotated at `position` when rope is set;
// row holds 3·D floats of scratch.
template <class Src>
void widen_key_row(const Src* src, std::int64_t step, std::int64_t dim, const RopeTables* rope,
                   std::int64_t position, float* row) {
  if (rope == nullptr) {
    widen_row(src, step, dim, row);
    return;
  }
  float* wide = row + dim;
  float* cos = row + 2 * dim;
  widen_row(src, step, dim, wide);
  rope_angles(*rope, rope->options.offset + position, cos, cos + rope->half);
  rotate_row(wide, 1, dim, 1.0f, *rope, cos, cos + rope->half, row);
}

}  // namespace seqattn::detail
