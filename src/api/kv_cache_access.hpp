// The library's access to a KvCache's packed storage (the public class hides it).
#pragma once

#include <cstdint>

#include "seqattn/kv_cache.hpp"
#include "src/kernel/decode/packed_kv.hpp"

namespace seqattn::detail {

struct KvCacheAccess {
  static PackedKv packed(const KvCache& cache);
};

}  // namespace seqattn::detail
