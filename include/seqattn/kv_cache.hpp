// KvCache: the keys and values of past tokens, kept in the layout the attention kernel reads,
// so that decoding one token packs only that token and attention never repacks the cache.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "seqattn/positional.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn {

namespace detail {
struct KvCacheAccess;  // the library's view of the packed storage
}

struct KvCacheShape {
  std::int64_t batch = 1;
  std::int64_t heads_kv = 1;
  std::int64_t capacity = 4096;  // tokens kept per sequence
  std::int64_t dim = 64;         // D of the keys (and of the queries that attend to them)
  std::int64_t dim_v = 64;       // D_v of the values (and of the output)
  // Element type of the stored keys and values: f32, or bf16/f16 (half the bytes a decode
  // step reads; appended tokens are rounded to nearest even, the kernel widens exactly), or i8
  // (a quarter, plus one fp32 scale per token and kv head for K and for V: max|row| / 127,
  // values rounded to nearest on that grid; docs/architecture.md, "int8 KV"). Another value
  // is an Error naming shape.dtype.
  DType dtype = DType::kF32;
  // RoPE on the keys: each appended key is rotated once, at position offset + its index
  // (length(b) + t for token t of an append; in ring mode positions keep counting). Explicit
  // positions are refused. A plan run over the cache must carry the same rope options (its
  // queries are rotated at offset + L - S_q + i); one without rope is refused, and so is a
  // plan with rope over a cache without.
  std::optional<RotaryEmbedding> rope{};
};

enum class KvCacheMode {
  // Tokens occupy positions 0, 1, …; appending past `capacity` is an error.
  kLinear,
  // A ring of the last `capacity` tokens for sliding-window models: positions keep counting,
  // the oldest token is overwritten. Attention over it must be a sliding window whose left
  // reach plus the new queries fits the ring (checked), and then equals the sliding-window
  // variant over the whole sequence.
  kRing,
};

// Layout (for readers of docs/architecture.md, not an API promise): per (batch, kv head),
// blocks of 64 tokens; a block's keys are stored transposed [D][64] and its values row-major
// [64][D_v rounded up to 16], both 64-byte aligned (in the cache's dtype), so the kernel's Q·Kᵀ
// micro-kernel reads whole vectors of keys and its P·V micro-kernel whole vectors of value columns.
// An int8 cache interleaves them for its integer dot products: keys [ceil(D/4)][64][4] (4
// consecutive d of a key together, D padded to a multiple of 4), values [32][D_v padded][2]
// (2 consecutive tokens of a column together).
class KvCache {
 public:
  // Throws Error for a non-positive extent or a size that does not fit in memory.
  explicit KvCache(const KvCacheShape& shape, KvCacheMode mode = KvCacheMode::kLinear);
  ~KvCache();
  KvCache(KvCache&&) noexcept;
  KvCache& operator=(KvCache&&) noexcept;

  // Appends n tokens to every sequence: k [B, H_kv, n, D], v [B, H_kv, n, D_v], any strides.
  // Throws Error (and changes nothing) on a shape mismatch, a dtype outside f32/bf16/f16, in
  // linear mode when a sequence would exceed the capacity, and for an i8 cache when a stored
  // token's K or V row holds a non-finite value (tokens a ring drops within the same append
  // are neither stored nor checked).
  // k and v may be float, bfloat16 or float16 (converted to the cache's dtype).
  void append(const AnyConstTensor& k, const AnyConstTensor& v);
  // Appends n tokens to sequence `batch` only: k [1, H_kv, n, D], v [1, H_kv, n, D_v].
  void append(std::int64_t batch, const AnyConstTensor& k, const AnyConstTensor& v);

  // Tokens appended to sequence b since construction or clear() (in ring mode this keeps
  // counting past the capacity: it is the position of the next token).
  std::int64_t length(std::int64_t batch) const;
  // Tokens still stored for sequence b: min(length, capacity).
  std::int64_t stored(std::int64_t batch) const;
  void clear();                    // every sequence
  void clear(std::int64_t batch);  // one sequence

  const KvCacheShape& shape() const;
  KvCacheMode mode() const;
  // Memory held for K and V: 4, 2 or 1 byte an element (f32, bf16/f16, i8; an i8 cache's key
  // rows padded to a multiple of 4 elements), plus an i8 cache's scales (8 bytes a token slot
  // and kv head).
  std::int64_t bytes() const;

 private:
  friend struct detail::KvCacheAccess;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqattn
