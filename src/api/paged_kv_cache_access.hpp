// The library's view of a PagedKvCache for one run: the batch's lengths and block tables
// gathered (the kernel indexes blocks through them) and the packed pool.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "seqattn/paged_kv_cache.hpp"
#include "src/kernel/decode/packed_kv.hpp"

namespace seqattn::detail {

struct PagedView {
  // The batch's lengths [B] then block tables [B][table_width] (pool block of each 64
  // positions): in the caller's storage, or in `owned` when it gave none.
  std::vector<std::int64_t> owned;
  PackedKv packed;  // points into that storage
  PagedView() = default;
  PagedView(PagedView&&) = default;  // a vector move keeps its buffer (packed stays valid)
  PagedView(const PagedView&) = delete;
  PagedView& operator=(const PagedView&) = delete;
};

struct PagedKvCacheAccess {
  // Throws Error naming sequences[i] for a freed or unknown id, or one longer than max_length.
  // `storage` (B · (1 + ceil(max_length / 64)) entries or more) receives the gathered tables;
  // empty = allocate them.
  static PagedView view(const PagedKvCache& cache,
                        std::span<const PagedKvCache::SequenceId> sequences,
                        std::int64_t max_length, std::span<std::int64_t> storage = {});
};

}  // namespace seqattn::detail
