// KvCache: validation and packing of appended tokens into the kernel's block layout
// (src/kernel/decode/packed_kv.hpp), quantised to int8 for a kI8 cache. Appends pack only the
// new tokens.
#include "seqattn/kv_cache.hpp"

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "src/api/kv_cache_access.hpp"
#include "src/api/kv_pack.hpp"
#include "src/runtime/element_types.hpp"
#include "src/runtime/huge_pages.hpp"
#include "src/runtime/int8_rows.hpp"
#include "src/runtime/parallel_for.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {

struct KvCache::Impl {
  KvCacheShape shape;
  KvCacheMode mode = KvCacheMode::kLinear;
  std::int64_t blocks = 0, dv_pad = 0;
  std::int64_t key_rows = 0;              // rows of a key block (detail::key_rows_of)
  std::int64_t k_elems = 0, v_elems = 0;  // per (batch, kv head)
  std::size_t elem_bytes = 4;             // of shape.dtype
  hwy::AlignedFreeUniquePtr<std::uint8_t[]> k, v;
  // kI8 only: one scale per token slot of each (batch, kv head), for K and for V, laid out like
  // the slots ([blocks][64] per pair).
  hwy::AlignedFreeUniquePtr<float[]> k_scale, v_scale;
  std::int64_t scale_elems = 0;  // per pair: blocks·64 (0 unless kI8)
  std::vector<std::int64_t> lengths;
  std::optional<detail::RopeTables> rope;  // frequencies only (shape.rope, validated)
  // An append's fp32 rows (one per (batch, kv head) pair: pairs pack in parallel) and int8
  // scales. Kept between appends, so a steady decode loop's appends allocate nothing after the
  // first; released after an append that needed more than kKeptScratch floats (a long prefill's
  // int8 scales), so one large append does not hold its scratch for the cache's life.
  // Appends are not concurrent (KvCache::append is not const).
  static constexpr std::size_t kKeptScratch = std::size_t{1} << 20;  // 4 MiB
  std::vector<float> scratch;
  float* scratch_floats(std::size_t floats) {
    if (scratch.size() < floats) scratch.resize(floats);
    return scratch.data();
  }
  void trim_scratch() {
    if (scratch.size() > kKeptScratch) std::vector<float>().swap(scratch);
  }

  template <class T>
  T* k_pair(std::int64_t b, std::int64_t hk) const {
    return reinterpret_cast<T*>(k.get()) + (b * shape.heads_kv + hk) * k_elems;
  }
  template <class T>
  T* v_pair(std::int64_t b, std::int64_t hk) const {
    return reinterpret_cast<T*>(v.get()) + (b * shape.heads_kv + hk) * v_elems;
  }
  // All-zero bits are +0 in every dtype.
  void zero(std::int64_t b) {
    const auto bytes = [&](std::int64_t elems) {
      return static_cast<std::size_t>(shape.heads_kv * elems) * elem_bytes;
    };
    std::memset(k.get() + static_cast<std::size_t>(b) * bytes(k_elems), 0, bytes(k_elems));
    std::memset(v.get() + static_cast<std::size_t>(b) * bytes(v_elems), 0, bytes(v_elems));
    if (scale_elems == 0) return;
    const std::int64_t per_batch = shape.heads_kv * scale_elems;
    std::fill_n(k_scale.get() + b * per_batch, per_batch, 0.0f);
    std::fill_n(v_scale.get() + b * per_batch, per_batch, 0.0f);
  }
  // Throws Error when sequence b cannot take n more tokens.
  void check_room(std::int64_t b, std::int64_t n) const;
  // Packs validated k/v of sequences [first_batch, first_batch + batches) after their tokens.
  void pack(const AnyConstTensor& k, const AnyConstTensor& v, std::int64_t first_batch,
            std::int64_t batches);
  template <class Src, class Dst>
  void pack_typed(const TensorView<const Src>& k, const TensorView<const Src>& v,
                  std::int64_t first_batch, std::int64_t batches);
  // kI8: every token's scales first, an Error naming k or v for a
  // non-finite row before anything is written; then the quantised rows.
  template <class Src>
  void pack_int8(const TensorView<const Src>& k, const TensorView<const Src>& v,
                 std::int64_t first_batch, std::int64_t batches);
  // Token `index` of key row src (stride `step`) widened, rotated at its position with rope,
  // into row[0, D); row holds 3·D floats of scratch.
  template <class Src>
  void widen_key(const Src* src, std::int64_t step, std::int64_t index, float* row) const {
    detail::widen_key_row(src, step, shape.dim, rope ? &*rope : nullptr, index, row);
  }
  // Key src (stride `step`) rotated at index `index` into a transposed block column dst;
  // row: 3·D floats of scratch.
  template <class Src, class Dst>
  void rotate_key(const Src* src, std::int64_t step, std::int64_t index, float* row,
                  Dst* dst) const {
    widen_key(src, step, index, row);
    for (std::int64_t d = 0; d < shape.dim; ++d)
      dst[d * detail::kKvBlock] = detail::convert_element<Dst>(row[d]);
  }
};

namespace {

using detail::fail;
using detail::kKvBlock;

// The most elements of K (and of V) one cache holds: 4 TiB of fp32.
constexpr std::int64_t kMaxCacheElements = std::int64_t{1} << 40;

using detail::str;

void check_batch_index(const KvCacheShape& s, std::int64_t b) {
  if (b < 0 || b >= s.batch) fail("batch", "in [0, B = " + str(s.batch) + ")", str(b));
}

}  // namespace

void KvCache::Impl::check_room(std::int64_t b, std::int64_t n) const {
  const std::int64_t used = lengths[static_cast<size_t>(b)];
  if (mode == KvCacheMode::kLinear && n > shape.capacity - used) {
    fail("k.shape[2] (new tokens)",
         "<= capacity - length(" + str(b) + ") = " + str(shape.capacity) + " - " + str(used),
         str(n), "the cache is full: make it larger, clear() it, or use KvCacheMode::kRing");
  }
  if (mode == KvCacheMode::kRing && used > (std::int64_t{1} << 62) - n) {
    fail("k.shape[2] (new tokens)", "a position that fits in 62 bits", str(used) + " + " + str(n));
  }
}

void KvCache::Impl::pack(const AnyConstTensor& k, const AnyConstTensor& v, std::int64_t first_batch,
                         std::int64_t batches) {
  if (shape.dtype == DType::kI8) {
    detail::visit_element(k.dtype, [&](auto src) {
      using Src = decltype(src);
      pack_int8<Src>(k.as<Src>(), v.as<Src>(), first_batch, batches);
    });
    trim_scratch();
    return;
  }
  detail::visit_element(k.dtype, [&](auto src) {
    using Src = decltype(src);
    detail::visit_element(shape.dtype, [&](auto dst) {
      pack_typed<Src, decltype(dst)>(k.as<Src>(), v.as<Src>(), first_batch, batches);
    });
  });
  trim_scratch();
}

// Token t of the input goes to position length(b) + t. A ring stores only the last
// blocks·64 of them (earlier ones would be overwritten within this very append).
template <class Src, class Dst>
void KvCache::Impl::pack_typed(const TensorView<const Src>& k, const TensorView<const Src>& v,
                               std::int64_t first_batch, std::int64_t batches) {
  const std::int64_t n = k.shape[2], heads = shape.heads_kv;
  const std::int64_t slots = blocks * kKvBlock;
  const std::int64_t skip = mode == KvCacheMode::kRing ? std::max<std::int64_t>(n - slots, 0) : 0;
  const std::int64_t pairs = batches * heads;
  const double floats = static_cast<double>(pairs * (n - skip) * (shape.dim + shape.dim_v));
  const std::int64_t row_floats = rope ? 3 * shape.dim : 0;
  float* rows = scratch_floats(static_cast<std::size_t>(pairs * row_floats));
  detail::for_each_index(pairs, detail::parallel_append(floats), [&](std::int64_t pair) {
    float* row = rows + pair * row_floats;
    const std::int64_t lb = pair / heads, hk = pair % heads, b = first_batch + lb;
    Dst* k_dst = k_pair<Dst>(b, hk);
    Dst* v_dst = v_pair<Dst>(b, hk);
    const std::int64_t start = lengths[static_cast<size_t>(b)];
    for (std::int64_t t = skip; t < n; ++t) {
      const std::int64_t slot = (start + t) % slots;
      Dst* kb = k_dst + slot / kKvBlock * kKvBlock * shape.dim + slot % kKvBlock;
      Dst* vb = v_dst + slot * dv_pad;
      const Src* ks = k.ptr(lb, hk, t);
      const Src* vs = v.ptr(lb, hk, t);
      if (rope) {  // rotated once here, in fp32, then stored in the cache's dtype
        rotate_key(ks, k.strides[3], start + t, row, kb);
      } else {
        for (std::int64_t d = 0; d < shape.dim; ++d)
          kb[d * kKvBlock] = detail::convert_element<Dst>(ks[d * k.strides[3]]);
      }
      for (std::int64_t d = 0; d < shape.dim_v; ++d)
        vb[d] = detail::convert_element<Dst>(vs[d * v.strides[3]]);
    }
  });
  for (std::int64_t lb = 0; lb < batches; ++lb) lengths[static_cast<size_t>(first_batch + lb)] += n;
}

// int8: per token and kv head, scale = max|x| / 127 of the (rotated) key row and of the value
// row (src/runtime/int8_rows.hpp). All scales are computed before any write, so a non-finite
// row (which int8 cannot hold) is an Error that leaves the cache as it was.
template <class Src>
void KvCache::Impl::pack_int8(const TensorView<const Src>& k, const TensorView<const Src>& v,
                              std::int64_t first_batch, std::int64_t batches) {
  const std::int64_t n = k.shape[2], heads = shape.heads_kv, dim = shape.dim;
  const std::int64_t slots = blocks * kKvBlock;
  const std::int64_t skip = mode == KvCacheMode::kRing ? std::max<std::int64_t>(n - slots, 0) : 0;
  const std::int64_t pairs = batches * heads;
  const std::int64_t row_floats = 3 * std::max(dim, shape.dim_v);
  // [pair][t][k, v] scales, then one row per pair.
  float* scales = scratch_floats(static_cast<std::size_t>(pairs * (n * 2 + row_floats)));
  float* rows = scales + pairs * n * 2;
  auto for_pairs = [&](auto&& body) {
    const double floats = static_cast<double>(pairs * (n - skip) * (dim + shape.dim_v));
    detail::for_each_index(pairs, detail::parallel_append(floats), [&](std::int64_t pair) {
      float* row = rows + pair * row_floats;
      const std::int64_t lb = pair / heads, hk = pair % heads;
      const std::int64_t start = lengths[static_cast<size_t>(first_batch + lb)];
      for (std::int64_t t = skip; t < n; ++t) {
        body(pair, lb, hk, start, t, row, scales + (pair * n + t) * 2);
      }
    });
  };
  auto widen_value = [&](const Src* src, float* row) {
    for (std::int64_t d = 0; d < shape.dim_v; ++d)
      row[d] = detail::convert_element<float>(src[d * v.strides[3]]);
  };
  for_pairs([&](std::int64_t, std::int64_t lb, std::int64_t hk, std::int64_t start, std::int64_t t,
                float* row, float* scale) {
    widen_key(k.ptr(lb, hk, t), k.strides[3], start + t, row);
    scale[0] = detail::int8_row_scale(row, dim);
    widen_value(v.ptr(lb, hk, t), row);
    scale[1] = detail::int8_row_scale(row, shape.dim_v);
  });
  for (std::int64_t pair = 0; pair < pairs; ++pair) {
    for (std::int64_t t = skip; t < n; ++t) {
      for (int which = 0; which < 2; ++which) {
        if (std::isfinite(scales[(pair * n + t) * 2 + which])) continue;
        detail::fail_non_finite_row(
            which,
            "batch " + str(pair / heads) + ", kv head " + str(pair % heads) + ", token " + str(t),
            rope.has_value());
      }
    }
  }
  for_pairs([&](std::int64_t, std::int64_t lb, std::int64_t hk, std::int64_t start, std::int64_t t,
                float* row, const float* scale) {
    const std::int64_t b = first_batch + lb, slot = (start + t) % slots;
    const std::int64_t pair_index = b * heads + hk;
    auto* kb = k_pair<std::int8_t>(b, hk) + slot / kKvBlock * kKvBlock * key_rows;
    widen_key(k.ptr(lb, hk, t), k.strides[3], start + t, row);
    detail::quantize_int8_key(row, dim, scale[0], kb, slot % kKvBlock, kKvBlock);
    widen_value(v.ptr(lb, hk, t), row);
    detail::quantize_int8_value(row, shape.dim_v, scale[1],
                                v_pair<std::int8_t>(b, hk) + slot / kKvBlock * kKvBlock * dv_pad,
                                slot % kKvBlock, dv_pad);
    k_scale[static_cast<std::size_t>(pair_index * scale_elems + slot)] = scale[0];
    v_scale[static_cast<std::size_t>(pair_index * scale_elems + slot)] = scale[1];
  });
  for (std::int64_t lb = 0; lb < batches; ++lb) lengths[static_cast<size_t>(first_batch + lb)] += n;
}

KvCache::KvCache(const KvCacheShape& shape, KvCacheMode mode) : impl_(std::make_unique<Impl>()) {
  const std::pair<const char*, std::int64_t> extents[] = {{"shape.batch", shape.batch},
                                                          {"shape.heads_kv", shape.heads_kv},
                                                          {"shape.capacity", shape.capacity},
                                                          {"shape.dim", shape.dim},
                                                          {"shape.dim_v", shape.dim_v}};
  for (const auto& [name, value] : extents) {
    if (value < 1) fail(name, ">= 1", str(value));
    // Also keeps the rounding below from overflowing (found by fuzz_attend: dim_v near 2^63).
    if (value > kMaxCacheElements) {
      fail(name, "<= 2^40 (a cache holds at most 2^40 elements of K and of V)", str(value));
    }
  }
  Impl& m = *impl_;
  m.shape = shape;
  m.mode = mode;
  // Rounded up without forming capacity + 63, which overflows for a capacity near 2^63.
  m.blocks = shape.capacity / kKvBlock + (shape.capacity % kKvBlock != 0 ? 1 : 0);
  detail::check_cache_dtype(shape.dtype, shape.dim);
  m.elem_bytes = dtype_size(shape.dtype);
  m.dv_pad = shape.dim_v / detail::kKvColumnAlign * detail::kKvColumnAlign +
             (shape.dim_v % detail::kKvColumnAlign != 0 ? detail::kKvColumnAlign : 0);
  const std::int64_t pairs = detail::checked_product({shape.batch, shape.heads_kv}, "shape");
  m.key_rows = detail::key_rows_of(shape.dtype, shape.dim);
  m.k_elems = detail::checked_product({m.blocks, kKvBlock, m.key_rows}, "shape (K per sequence)");
  m.v_elems = detail::checked_product({m.blocks, kKvBlock, m.dv_pad}, "shape (V per sequence)");
  const std::int64_t k_total = detail::checked_product({pairs, m.k_elems}, "shape (K)");
  const std::int64_t v_total = detail::checked_product({pairs, m.v_elems}, "shape (V)");
  if (k_total > kMaxCacheElements || v_total > kMaxCacheElements) {
    fail("shape", "a cache of at most 2^40 elements for K and for V",
         detail::shape_text(
             {shape.batch, shape.heads_kv, shape.capacity, std::max(shape.dim, shape.dim_v)}));
  }
  const auto bytes_of = [&](std::int64_t elems) {
    return static_cast<size_t>(elems) * m.elem_bytes;
  };
  m.k = hwy::AllocateAligned<std::uint8_t>(bytes_of(k_total));
  m.v = hwy::AllocateAligned<std::uint8_t>(bytes_of(v_total));
  detail::advise_huge_pages(m.k.get(), bytes_of(k_total));
  detail::advise_huge_pages(m.v.get(), bytes_of(v_total));
  bool scales_ok = true;
  if (shape.dtype == DType::kI8) {
    m.scale_elems = m.blocks * kKvBlock;
    const auto scales = static_cast<std::size_t>(pairs * m.scale_elems);
    m.k_scale = hwy::AllocateAligned<float>(scales);
    m.v_scale = hwy::AllocateAligned<float>(scales);
    scales_ok = m.k_scale && m.v_scale;
  }
  if (!m.k || !m.v || !scales_ok) {
    throw Error(ErrorKind::kInvalidArgument, "shape", "a cache that fits in memory",
                str(static_cast<std::int64_t>(bytes_of(k_total + v_total))) + " bytes",
                "lower the capacity or the batch, or store bf16/f16");
  }
  if (shape.rope) {
    m.rope.emplace();
    detail::init_cache_rope(*m.rope, *shape.rope, shape.dim);
  }
  // Zero padding keeps padded lanes finite (0 · NaN would poison the P·V sums).
  m.lengths.assign(static_cast<size_t>(shape.batch), 0);
  for (std::int64_t b = 0; b < shape.batch; ++b) m.zero(b);
}

KvCache::~KvCache() = default;
KvCache::KvCache(KvCache&&) noexcept = default;
KvCache& KvCache::operator=(KvCache&&) noexcept = default;

void KvCache::append(const AnyConstTensor& k, const AnyConstTensor& v) {
  const Impl& m = *impl_;
  const std::int64_t n =
      detail::check_cache_tokens(m.shape.heads_kv, m.shape.dim, m.shape.dim_v, m.shape.batch, k, v);
  for (std::int64_t b = 0; b < m.shape.batch; ++b) m.check_room(b, n);
  impl_->pack(k, v, 0, m.shape.batch);
}

void KvCache::append(std::int64_t batch, const AnyConstTensor& k, const AnyConstTensor& v) {
  check_batch_index(impl_->shape, batch);
  const std::int64_t n = detail::check_cache_tokens(impl_->shape.heads_kv, impl_->shape.dim,
                                                    impl_->shape.dim_v, 1, k, v);
  impl_->check_room(batch, n);
  impl_->pack(k, v, batch, 1);
}

std::int64_t KvCache::length(std::int64_t batch) const {
  check_batch_index(impl_->shape, batch);
  return impl_->lengths[static_cast<size_t>(batch)];
}

std::int64_t KvCache::stored(std::int64_t batch) const {
  return std::min(length(batch), impl_->shape.capacity);
}

void KvCache::clear() {
  for (std::int64_t b = 0; b < impl_->shape.batch; ++b) clear(b);
}

// Stale tokens are zeroed, not only forgotten: a later shorter sequence shares their blocks.
void KvCache::clear(std::int64_t batch) {
  check_batch_index(impl_->shape, batch);
  impl_->zero(batch);
  impl_->lengths[static_cast<size_t>(batch)] = 0;
}

const KvCacheShape& KvCache::shape() const { return impl_->shape; }
KvCacheMode KvCache::mode() const { return impl_->mode; }
std::int64_t KvCache::bytes() const {
  const Impl& m = *impl_;
  const std::int64_t per_pair =
      static_cast<std::int64_t>(m.elem_bytes) * (m.k_elems + m.v_elems) + 2 * 4 * m.scale_elems;
  return per_pair * m.shape.batch * m.shape.heads_kv;
}

namespace detail {

void check_cache_dtype(DType dtype, std::int64_t dim) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16 &&
      dtype != DType::kI8) {
    fail("shape.dtype", "DType::kF32, kBF16, kF16 or kI8",
         std::to_string(static_cast<int>(dtype)) + " (not a DType)");
  }
  // An int8 cache's Q·Kᵀ sums D products of at most 127·127, and the VNNI kernel adds
  // 128·Σq: both stay exact in int32 only up to D ≈ 132000.
  if (dtype == DType::kI8 && dim > kMaxInt8Dim) {
    fail("shape.dim", "<= " + std::to_string(kMaxInt8Dim) + " for an int8 cache",
         std::to_string(dim), "store keys this long as f32, bf16 or f16");
  }
}

void fail_non_finite_row(int which, const std::string& where, bool rotated) {
  fail(which == 0 ? "k" : "v", "finite values (an int8 cache stores max|row| / 127 per token)",
       "a non-finite value in " + where + (which == 0 && rotated ? " (after RoPE)" : ""),
       "store this cache as f32, bf16 or f16 to keep non-finite values");
}

std::int64_t check_cache_tokens(std::int64_t heads_kv, std::int64_t dim, std::int64_t dim_v,
                                std::int64_t batches, const AnyConstTensor& k,
                                const AnyConstTensor& v) {
  check_tensor_dtype("k", k.dtype);  // before dtype_size sizes the views by it
  check_tensor_dtype("v", v.dtype);
  check_view("k", k.data, k.shape, k.strides, dtype_size(k.dtype));
  check_view("v", v.data, v.shape, v.strides, dtype_size(v.dtype));
  if (v.dtype != k.dtype) {
    fail("v.dtype", "k's dtype " + std::string(to_string(k.dtype)),
         std::string(to_string(v.dtype)));
  }
  const std::int64_t n = k.shape[2];
  const std::array<std::int64_t, 4> want_k{batches, heads_kv, n, dim};
  const std::array<std::int64_t, 4> want_v{batches, heads_kv, n, dim_v};
  if (k.shape != want_k) {
    fail("k.shape", shape_text(want_k) + " = [B, H_kv, n, D] of the cache", shape_text(k.shape));
  }
  if (v.shape != want_v) {
    fail("v.shape", shape_text(want_v) + " = [B, H_kv, n, D_v] of the cache", shape_text(v.shape));
  }
  return n;
}

detail::PackedKv KvCacheAccess::packed(const KvCache& cache) {
  const KvCache::Impl& m = *cache.impl_;
  PackedKv p;
  p.k = m.k.get();
  p.v = m.v.get();
  p.dtype = m.shape.dtype;
  p.lengths = m.lengths.data();
  p.batch = m.shape.batch;
  p.heads_kv = m.shape.heads_kv;
  p.dim = m.shape.dim;
  p.dim_v = m.shape.dim_v;
  p.dv_pad = m.dv_pad;
  p.capacity = m.shape.capacity;
  p.blocks = m.blocks;
  p.ring = m.mode == KvCacheMode::kRing;
  p.k_scale = m.k_scale.get();
  p.v_scale = m.v_scale.get();
  return p;
}

}  // namespace detail
}  // namespace seqattn
