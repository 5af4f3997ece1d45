// The library's access to a KvCache's packed storage (the public class hides it).
#pragma once

#include <cstdint>

#include "seqattn/kv_cache.hpp"
#include "variants/kv_cache/packed_kv.hpp"

namespace seqattn::detail {

struct KvCacheAccess {
  static PackedKv packed(const KvCache& cache);
  // Throws Error when sequence b cannot take n more tokens (linear mode).
  static void check_room(const KvCache& cache, std::int64_t b, std::int64_t n);
  // Packs validated k/v of sequences [first_batch, first_batch + batches) after their tokens.
  static void pack(KvCache& cache, const ConstTensor& k, const ConstTensor& v,
                   std::int64_t first_batch, std::int64_t batches);
};

}  // namespace seqattn::detail
