// PagedKvCache: the block pool, the sequences' block tables with reference counts and
// copy-on-write, and appends into the decode kernel's block layout (src/kernel/decode/
// packed_kv.hpp), here indexed through a table instead of by position.
#include "seqattn/paged_kv_cache.hpp"

#include <hwy/aligned_allocator.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "src/api/kv_pack.hpp"
#include "src/api/paged_kv_cache_access.hpp"
#include "src/runtime/huge_pages.hpp"
#include "src/runtime/int8_rows.hpp"
#include "src/runtime/parallel_for.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {

namespace {

using detail::fail;
using detail::kKvBlock;
static_assert(kPagedBlockTokens == kKvBlock, "a pool block is a decode kernel block");

using detail::str;

}  // namespace

struct PagedKvCache::Impl {
  struct Sequence {
    std::int64_t length = 0;
    std::vector<std::int64_t> blocks;  // the table: block p / 64 holds position p
    std::int64_t dropped = 0;          // leading entries released by drop_front (kDropped)
  };
  static constexpr std::int64_t kDropped = -1;  // a table entry drop_front released

  PagedKvCacheShape shape;
  std::int64_t dv_pad = 0;
  std::int64_t key_rows = 0;  // rows of a key block (detail::key_rows_of)
  std::size_t elem_bytes = 4;
  // Elements of a pool block over every kv head (for the pool's size): K H_kv·key_rows·64,
  // V H_kv·64·dv_pad, scales H_kv·64 (i8). The pool is stored head-major, [H_kv][blocks][...]
  // (i8 interleaves K and V, src/kernel/decode/packed_kv.hpp), so a sequence whose blocks were
  // taken in order is one run per head.
  std::int64_t k_block = 0, v_block = 0, scale_block = 0;
  std::int64_t k_sub = 0, v_sub = 0;  // elements of one kv head's part of a block
  // Where kv head hk's part of pool block b is, in k_sub / v_sub / kKvBlock units.
  std::int64_t sub_block(std::int64_t b, std::int64_t hk) const { return hk * shape.blocks + b; }
  // The bytes of sub-block s's keys and values (k_sub, v_sub elements of elem_bytes).
  std::uint8_t* key_part(std::int64_t s) const { return k.get() + s * k_sub * elem_bytes; }
  std::uint8_t* value_part(std::int64_t s) const { return v.get() + s * v_sub * elem_bytes; }
  // Sub-block s's kKvBlock int8 scales of K and of V.
  float* key_scales(std::int64_t s) const { return k_scale.get() + s * kKvBlock; }
  float* value_scales(std::int64_t s) const { return v_scale.get() + s * kKvBlock; }
  hwy::AlignedFreeUniquePtr<std::uint8_t[]> k, v;
  hwy::AlignedFreeUniquePtr<float[]> k_scale, v_scale;
  std::vector<std::int32_t> refs;       // sequences holding each block
  std::vector<std::int64_t> free_list;  // blocks no sequence holds (taken from the back)
  std::unordered_map<SequenceId, Sequence> live;
  SequenceId next_id = 0;
  std::optional<detail::RopeTables> rope;
  // An append's scratch, kept so that a steady decode loop allocates nothing: one widened row
  // per kv head (3·max(D, D_v) floats each, sized by the constructor: a large append writes
  // the heads in parallel) and, for i8, every new token's scales (grown to the largest append
  // so far: 8·H_kv bytes a token, 6.4 MB after a 100k-token prompt at H_kv 8, kept for the
  // pool's life).
  std::vector<float> rows;
  std::int64_t row_floats = 0;
  std::vector<float> scales;

  float* row_of(std::int64_t hk) { return rows.data() + hk * row_floats; }
  // Whether an append of n tokens writes its kv heads in parallel (as KvCache::append).
  bool parallel(std::int64_t n) const {
    return detail::parallel_append(static_cast<double>(n * shape.heads_kv) *
                                   static_cast<double>(shape.dim + shape.dim_v));
  }

  Sequence& find(SequenceId id, const char* argument) {
    auto it = live.find(id);
    if (it == live.end()) {
      fail(argument, "a live sequence (from add() or fork(), not freed)",
           "id " + str(id) + (id >= 0 && id < next_id ? " (freed)" : " (unknown)"));
    }
    return it->second;
  }
  // A block from the pool, zeroed (stale values, possibly non-finite, never meet the kernel's
  // padded lanes), held once.
  std::int64_t take() {
    const std::int64_t b = free_list.back();
    free_list.pop_back();
    refs[static_cast<std::size_t>(b)] = 1;
    for (std::int64_t hk = 0; hk < shape.heads_kv; ++hk) {
      const std::int64_t s = sub_block(b, hk);
      std::memset(key_part(s), 0, k_sub * elem_bytes);
      std::memset(value_part(s), 0, v_sub * elem_bytes);
      if (scale_block != 0) {
        std::fill_n(key_scales(s), kKvBlock, 0.0f);
        std::fill_n(value_scales(s), kKvBlock, 0.0f);
      }
    }
    return b;
  }
  void release(std::int64_t block) {
    if (--refs[static_cast<std::size_t>(block)] == 0) free_list.push_back(block);
  }
  // A private copy of a shared block (copy-on-write).
  std::int64_t copy_of(std::int64_t block) {
    const std::int64_t b = take();
    for (std::int64_t hk = 0; hk < shape.heads_kv; ++hk) {
      const std::int64_t to = sub_block(b, hk), from = sub_block(block, hk);
      std::memcpy(key_part(to), key_part(from), k_sub * elem_bytes);
      std::memcpy(value_part(to), value_part(from), v_sub * elem_bytes);
      if (scale_block != 0) {
        std::copy_n(key_scales(from), kKvBlock, key_scales(to));
        std::copy_n(value_scales(from), kKvBlock, value_scales(to));
      }
    }
    release(block);
    return b;
  }
  // Writes the tokens through the rows, with (i8) the scales int8_scales left in `scales`.
  template <class Src>
  void write(const Sequence& s, const TensorView<const Src>& kt, const TensorView<const Src>& vt);
  // (i8) Every token's key and value scales into `scales`, checked before anything is written.
  template <class Src>
  void int8_scales(const Sequence& s, const TensorView<const Src>& kt,
                   const TensorView<const Src>& vt);
};

// (i8) Every token's key and value scales, before anything is written: [hk][t][k, v].
template <class Src>
void PagedKvCache::Impl::int8_scales(const Sequence& s, const TensorView<const Src>& kt,
                                     const TensorView<const Src>& vt) {
  const std::int64_t n = kt.shape[2], heads = shape.heads_kv;
  scales.resize(static_cast<std::size_t>(heads * n * 2));  // allocates only to grow
  const detail::RopeTables* r = rope ? &*rope : nullptr;
  detail::for_each_index(heads, parallel(n), [&](std::int64_t hk) {
    float* row = row_of(hk);
    for (std::int64_t t = 0; t < n; ++t) {
      float* sc = scales.data() + (hk * n + t) * 2;
      detail::widen_key_row(kt.ptr(0, hk, t), kt.strides[3], shape.dim, r, s.length + t, row);
      sc[0] = detail::int8_row_scale(row, shape.dim);
      detail::widen_row(vt.ptr(0, hk, t), vt.strides[3], shape.dim_v, row);
      sc[1] = detail::int8_row_scale(row, shape.dim_v);
    }
  });
  // Checked after the loop, on this thread (nothing may throw inside OpenMP): the first
  // non-finite row in (kv head, token) order is named.
  for (std::int64_t i = 0; i < heads * n * 2; ++i) {
    if (std::isfinite(scales[static_cast<std::size_t>(i)])) continue;
    const std::int64_t hk = i / 2 / n, t = i / 2 % n;
    detail::fail_non_finite_row(static_cast<int>(i % 2), "kv head " + str(hk) + ", token " + str(t),
                                rope.has_value());
  }
}

// Token t goes to position length + t: slot (length + t) % 64 of table block (length + t) / 64.
template <class Src>
void PagedKvCache::Impl::write(const Sequence& s, const TensorView<const Src>& kt,
                               const TensorView<const Src>& vt) {
  const std::int64_t n = kt.shape[2], heads = shape.heads_kv, dim = shape.dim;
  const detail::RopeTables* r = rope ? &*rope : nullptr;
  detail::visit_cache_element(shape.dtype, [&](auto elem) {
    using Dst = decltype(elem);
    // Each kv head writes its own sub-blocks and scales: the heads are independent.
    detail::for_each_index(heads, parallel(n), [&](std::int64_t hk) {
      float* buf = row_of(hk);
      for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t pos = s.length + t, slot = pos % kKvBlock;
        const std::int64_t block = s.blocks[static_cast<std::size_t>(pos / kKvBlock)];
        const std::int64_t sub = sub_block(block, hk);
        Dst* key_block = reinterpret_cast<Dst*>(key_part(sub));
        Dst* value_block = reinterpret_cast<Dst*>(value_part(sub));
        detail::widen_key_row(kt.ptr(0, hk, t), kt.strides[3], dim, r, pos, buf);
        if constexpr (std::is_same_v<Dst, std::int8_t>) {
          const float* sc = scales.data() + (hk * n + t) * 2;
          detail::quantize_int8_key(buf, dim, sc[0], key_block, slot, kKvBlock);
          detail::widen_row(vt.ptr(0, hk, t), vt.strides[3], shape.dim_v, buf);
          detail::quantize_int8_value(buf, shape.dim_v, sc[1], value_block, slot, dv_pad);
          key_scales(sub)[slot] = sc[0];
          value_scales(sub)[slot] = sc[1];
        } else {
          for (std::int64_t d = 0; d < dim; ++d)
            key_block[d * kKvBlock + slot] = detail::convert_element<Dst>(buf[d]);
          const Src* vs = vt.ptr(0, hk, t);
          for (std::int64_t d = 0; d < shape.dim_v; ++d)
            value_block[slot * dv_pad + d] = detail::convert_element<Dst>(vs[d * vt.strides[3]]);
        }
      }
    });
  });
}

PagedKvCache::PagedKvCache(const PagedKvCacheShape& shape) : impl_(std::make_unique<Impl>()) {
  constexpr std::int64_t kMax = std::int64_t{1} << 40;
  const std::pair<const char*, std::int64_t> extents[] = {{"shape.heads_kv", shape.heads_kv},
                                                          {"shape.dim", shape.dim},
                                                          {"shape.dim_v", shape.dim_v},
                                                          {"shape.blocks", shape.blocks}};
  for (const auto& [name, value] : extents) {
    if (value < 1) fail(name, ">= 1", str(value));
    if (value > kMax) fail(name, "<= 2^40", str(value));
  }
  detail::check_cache_dtype(shape.dtype, shape.dim);
  Impl& m = *impl_;
  m.shape = shape;
  m.elem_bytes = dtype_size(shape.dtype);
  m.dv_pad =
      (shape.dim_v + detail::kKvColumnAlign - 1) / detail::kKvColumnAlign * detail::kKvColumnAlign;
  m.key_rows = detail::key_rows_of(shape.dtype, shape.dim);
  m.k_block = detail::checked_product({shape.heads_kv, m.key_rows, kKvBlock}, "shape (K block)");
  m.v_block = detail::checked_product({shape.heads_kv, kKvBlock, m.dv_pad}, "shape (V block)");
  m.k_sub = m.key_rows * kKvBlock;
  m.v_sub = kKvBlock * m.dv_pad;
  const std::int64_t k_total = detail::checked_product({shape.blocks, m.k_block}, "shape (K)");
  const std::int64_t v_total = detail::checked_product({shape.blocks, m.v_block}, "shape (V)");
  if (k_total > kMax || v_total > kMax) {
    fail("shape.blocks", "a pool of at most 2^40 elements for K and for V", str(shape.blocks));
  }
  m.k = hwy::AllocateAligned<std::uint8_t>(static_cast<std::size_t>(k_total) * m.elem_bytes);
  m.v = hwy::AllocateAligned<std::uint8_t>(static_cast<std::size_t>(v_total) * m.elem_bytes);
  detail::advise_huge_pages(m.k.get(), static_cast<std::size_t>(k_total) * m.elem_bytes);
  detail::advise_huge_pages(m.v.get(), static_cast<std::size_t>(v_total) * m.elem_bytes);
  bool ok = m.k && m.v;
  if (shape.dtype == DType::kI8) {
    m.scale_block = shape.heads_kv * kKvBlock;
    m.k_scale = hwy::AllocateAligned<float>(static_cast<std::size_t>(shape.blocks * m.scale_block));
    m.v_scale = hwy::AllocateAligned<float>(static_cast<std::size_t>(shape.blocks * m.scale_block));
    ok = ok && m.k_scale && m.v_scale;
  }
  if (!ok) {
    throw Error(ErrorKind::kInvalidArgument, "shape.blocks", "a pool that fits in memory",
                str(shape.blocks) + " blocks", "use fewer blocks, or store bf16, f16 or i8");
  }
  if (shape.rope) {
    m.rope.emplace();
    detail::init_cache_rope(*m.rope, *shape.rope, shape.dim);
  }
  m.row_floats = 3 * std::max(shape.dim, shape.dim_v);
  m.rows.resize(static_cast<std::size_t>(shape.heads_kv * m.row_floats));
  m.refs.assign(static_cast<std::size_t>(shape.blocks), 0);
  m.free_list.resize(static_cast<std::size_t>(shape.blocks));
  for (std::int64_t b = 0; b < shape.blocks; ++b) {
    m.free_list[static_cast<std::size_t>(b)] = shape.blocks - 1 - b;  // block 0 taken first
  }
}

PagedKvCache::~PagedKvCache() = default;
PagedKvCache::PagedKvCache(PagedKvCache&&) noexcept = default;
PagedKvCache& PagedKvCache::operator=(PagedKvCache&&) noexcept = default;

PagedKvCache::SequenceId PagedKvCache::add() {
  impl_->live.emplace(impl_->next_id, Impl::Sequence{});
  return impl_->next_id++;
}

PagedKvCache::SequenceId PagedKvCache::fork(SequenceId parent) {
  const Impl::Sequence& source = impl_->find(parent, "parent");
  Impl::Sequence copy = source;
  copy.blocks.reserve(source.blocks.capacity());  // the parent's reservation
  // The new entry first: if it throws (bad_alloc), no count has changed.
  const Impl::Sequence& child = impl_->live.emplace(impl_->next_id, std::move(copy)).first->second;
  for (std::size_t i = static_cast<std::size_t>(child.dropped); i < child.blocks.size(); ++i) {
    ++impl_->refs[static_cast<std::size_t>(child.blocks[i])];
  }
  return impl_->next_id++;
}

void PagedKvCache::reserve(SequenceId sequence, std::int64_t tokens) {
  Impl::Sequence& s = impl_->find(sequence, "sequence");
  if (tokens < 0 || tokens > impl_->shape.blocks * kKvBlock) {
    fail("tokens", "0 .. the pool's " + str(impl_->shape.blocks * kKvBlock) + " token slots",
         str(tokens), "reserve() sizes a block table; it cannot outgrow the pool");
  }
  s.blocks.reserve(static_cast<std::size_t>((tokens + kKvBlock - 1) / kKvBlock));
}

void PagedKvCache::free(SequenceId sequence) {
  Impl::Sequence& s = impl_->find(sequence, "sequence");
  for (std::size_t i = static_cast<std::size_t>(s.dropped); i < s.blocks.size(); ++i) {
    impl_->release(s.blocks[i]);
  }
  impl_->live.erase(sequence);
}

void PagedKvCache::drop_front(SequenceId sequence, std::int64_t position) {
  Impl::Sequence& s = impl_->find(sequence, "sequence");
  if (position < 0 || position > s.length) {
    fail("position", "in [0, length = " + str(s.length) + "]", str(position),
         "drop_front releases the blocks wholly before a position the sequence has reached");
  }
  const std::int64_t whole = position / kKvBlock;  // blocks wholly before `position`
  for (std::int64_t i = s.dropped; i < whole; ++i) {
    std::int64_t& entry = s.blocks[static_cast<std::size_t>(i)];
    impl_->release(entry);
    entry = Impl::kDropped;
  }
  s.dropped = std::max(s.dropped, whole);
}

std::int64_t PagedKvCache::first_stored(SequenceId sequence) const {
  return impl_->find(sequence, "sequence").dropped * kKvBlock;
}

void PagedKvCache::append(SequenceId sequence, const AnyConstTensor& k, const AnyConstTensor& v) {
  Impl& m = *impl_;
  Impl::Sequence& s = m.find(sequence, "sequence");
  const std::int64_t n =
      detail::check_cache_tokens(m.shape.heads_kv, m.shape.dim, m.shape.dim_v, 1, k, v);
  if (n > (std::int64_t{1} << 40) - s.length) {
    fail("k.shape[2] (new tokens)", "a length below 2^40", str(s.length) + " + " + str(n));
  }
  // Blocks the tokens need: new ones past the table, and a copy of a shared partial last block.
  const auto held = static_cast<std::int64_t>(s.blocks.size());
  const std::int64_t fresh = (s.length + n + kKvBlock - 1) / kKvBlock - held;
  const bool copy =
      n > 0 && s.length % kKvBlock != 0 && m.refs[static_cast<std::size_t>(s.blocks.back())] > 1;
  const std::int64_t needed = fresh + (copy ? 1 : 0);
  const auto free_now = static_cast<std::int64_t>(m.free_list.size());
  if (needed > free_now) {
    fail("k.shape[2] (new tokens)",
         "tokens that fit in the pool's " + str(free_now) + " free blocks of 64",
         str(n) + " (" + str(needed) + " blocks)",
         "free finished sequences, or make the pool larger (PagedKvCacheShape::blocks)");
  }
  detail::visit_element(k.dtype, [&](auto src) {
    using Src = decltype(src);
    const TensorView<const Src> kt = k.as<Src>(), vt = v.as<Src>();
    if (m.shape.dtype == DType::kI8) m.int8_scales(s, kt, vt);
    // Every allocation before the first change to the pool: past this point nothing throws.
    // The table grows geometrically (reserve() sizes it up front).
    const auto entries = static_cast<std::size_t>(held + fresh);
    if (s.blocks.capacity() < entries) {
      const auto pool = static_cast<std::size_t>(m.shape.blocks);
      s.blocks.reserve(std::max(entries, std::min(2 * s.blocks.size(), pool)));
    }
    if (copy) s.blocks.back() = m.copy_of(s.blocks.back());
    for (std::int64_t i = 0; i < fresh; ++i) s.blocks.push_back(m.take());
    m.write(s, kt, vt);
  });
  s.length += n;
}

std::int64_t PagedKvCache::length(SequenceId sequence) const {
  return impl_->find(sequence, "sequence").length;
}
std::int64_t PagedKvCache::free_blocks() const {
  return static_cast<std::int64_t>(impl_->free_list.size());
}
std::int64_t PagedKvCache::sequences() const {
  return static_cast<std::int64_t>(impl_->live.size());
}
std::int64_t PagedKvCache::bytes() const {
  const Impl& m = *impl_;
  return m.shape.blocks * (static_cast<std::int64_t>(m.elem_bytes) * (m.k_block + m.v_block) +
                           2 * 4 * m.scale_block);
}
const PagedKvCacheShape& PagedKvCache::shape() const { return impl_->shape; }

namespace detail {

PagedView PagedKvCacheAccess::view(const PagedKvCache& cache,
                                   std::span<const PagedKvCache::SequenceId> sequences,
                                   std::int64_t max_length, std::span<std::int64_t> storage) {
  PagedKvCache::Impl& m = *cache.impl_;
  // No sequence can outgrow the pool: a larger S_k would only size the tables and the split.
  if (max_length > m.shape.blocks * kKvBlock) {
    fail(
        "S_k (the plan's max_length)",
        "<= the pool's " + str(m.shape.blocks) + " blocks x 64 = " + str(m.shape.blocks * kKvBlock),
        str(max_length), "plan with paged_shape(..., max_length) no larger than the pool");
  }
  PagedView out;
  const std::int64_t table_width = (max_length + kKvBlock - 1) / kKvBlock;
  const std::size_t batch = sequences.size();
  const std::size_t entries = batch * static_cast<std::size_t>(1 + table_width);
  if (storage.size() < entries) {  // no caller storage (or not this batch's): allocate
    out.owned.resize(entries);
    storage = out.owned;
  }
  std::int64_t* lengths = storage.data();
  std::int64_t* tables = lengths + batch;
  std::fill(tables, tables + batch * static_cast<std::size_t>(table_width), 0);
  for (std::size_t b = 0; b < batch; ++b) {
    const auto name = [&] { return "sequences[" + str(static_cast<std::int64_t>(b)) + "]"; };
    const auto it = m.live.find(sequences[b]);
    if (it == m.live.end()) (void)m.find(sequences[b], name().c_str());  // throws, naming it
    const PagedKvCache::Impl::Sequence& s = it->second;
    if (s.length > max_length) {
      fail(name(), "a sequence of at most " + str(max_length) + " tokens (the plan's S_k)",
           str(s.length) + " tokens", "plan with a larger maximum length");
    }
    lengths[b] = s.length;
    // Dropped entries name block 0, like the padding past a sequence's table: memory the
    // kernel may compute an address in, never keys it reads (check_paged_run refuses a run
    // whose rule reaches a dropped position).
    std::int64_t* row = tables + static_cast<std::ptrdiff_t>(b) * table_width;
    std::copy(s.blocks.begin() + s.dropped, s.blocks.end(), row + s.dropped);
  }
  PackedKv& p = out.packed;
  p.k = m.k.get();
  p.v = m.v.get();
  p.dtype = m.shape.dtype;
  p.lengths = lengths;
  p.batch = static_cast<std::int64_t>(sequences.size());
  p.heads_kv = m.shape.heads_kv;
  p.dim = m.shape.dim;
  p.dim_v = m.shape.dim_v;
  p.dv_pad = m.dv_pad;
  p.capacity = max_length;
  p.block_table = tables;
  p.table_width = table_width;
  p.pool_blocks = m.shape.blocks;
  p.k_scale = m.k_scale.get();
  p.v_scale = m.v_scale.get();
  return out;
}

}  // namespace detail
}  // namespace seqattn
