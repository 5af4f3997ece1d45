// PagedKvCache: the keys and values of many sequences in one pool of fixed-size blocks, as a
// serving engine keeps them. A sequence holds a table of blocks, not reserved token storage;
// sequences join (add, fork) and leave (free) while others continue; a fork shares its parent's
// blocks and copies the partially filled last one only when one of them appends to it.
// Attention runs over a batch of sequences, each with its own length (AttentionPlan::run).
// add, fork, reserve, append, drop_front and free change shared state (the free list, the append
// scratch): one caller at a time, and not during a run; runs and the const accessors may share a
// pool.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>

#include "seqattn/positional.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

namespace detail {
struct PagedKvCacheAccess;
}

// Tokens per block: the decode kernel's block (a key tile of every SIMD target divides it).
inline constexpr std::int64_t kPagedBlockTokens = 64;

struct PagedKvCacheShape {
  std::int64_t heads_kv = 1;
  std::int64_t dim = 64;       // D of the keys
  std::int64_t dim_v = 64;     // D_v of the values
  std::int64_t blocks = 1024;  // the pool: blocks of kPagedBlockTokens tokens, shared by all
  DType dtype = DType::kF32;   // f32, bf16, f16 or i8, as KvCacheShape::dtype
  std::optional<RotaryEmbedding> rope{};  // as KvCacheShape::rope (keys rotated on append)
};

class PagedKvCache {
 public:
  using SequenceId = std::int64_t;

  // Throws Error for a non-positive extent, a bad dtype or a pool that does not fit in memory.
  explicit PagedKvCache(const PagedKvCacheShape& shape);
  ~PagedKvCache();
  PagedKvCache(PagedKvCache&&) noexcept;
  PagedKvCache& operator=(PagedKvCache&&) noexcept;

  // A new empty sequence (it takes blocks as it grows). Ids are never reused.
  SequenceId add();
  // A new sequence holding `parent`'s tokens: its full blocks are shared (reference counted);
  // the partially filled last block is shared too until the parent or the child appends to it,
  // which then copies it first (copy-on-write). A child of a sequence that dropped its front
  // (drop_front) starts at the same first_stored and shares only the blocks still held. Error
  // for an unknown or freed parent.
  SequenceId fork(SequenceId parent);
  // Sizes `sequence`'s block table for `tokens` tokens in all (blocks are still taken only as
  // it grows), so that appends up to that length allocate nothing on the heap (an i8 pool also
  // keeps its scale scratch at the longest append so far): a serving loop that reserves each
  // sequence's budget when it admits it decodes without allocating. A fork inherits its
  // parent's reservation. The table otherwise grows geometrically. Error for an unknown or
  // freed sequence, or for tokens outside 0 .. the pool's token slots (blocks · 64).
  void reserve(SequenceId sequence, std::int64_t tokens);
  // Ends a sequence: its blocks return to the pool once no other sequence shares them.
  void free(SequenceId sequence);
  // Releases the blocks holding only positions before `position` (in [0, length]), as a
  // serving engine does for a sliding-window model once every later query's window starts past
  // them: the sequence keeps its length and positions, and a run whose rule still reaches a
  // dropped position is an Error naming sequences[b] (dense attention over it always is).
  // Error for an unknown or freed sequence or a position outside [0, length], changing nothing.
  void drop_front(SequenceId sequence, std::int64_t position);

  // Appends n tokens: k [1, H_kv, n, D], v [1, H_kv, n, D_v] (float, bfloat16 or float16, any
  // strides). Throws Error, changing nothing, for an unknown sequence, a shape mismatch, a pool
  // without the blocks the tokens need, or (i8) a non-finite value.
  void append(SequenceId sequence, const AnyConstTensor& k, const AnyConstTensor& v);

  std::int64_t length(SequenceId sequence) const;  // tokens appended
  // The first position still stored: a multiple of 64 (0 unless drop_front released blocks).
  std::int64_t first_stored(SequenceId sequence) const;
  std::int64_t free_blocks() const;  // blocks no sequence holds
  std::int64_t sequences() const;    // live sequences
  std::int64_t bytes() const;        // the pool's memory for K and V (and scales)
  const PagedKvCacheShape& shape() const;

 private:
  friend struct detail::PagedKvCacheAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqattn
