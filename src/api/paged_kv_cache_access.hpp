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
  std::vector<std::int64_t> lengths;  // [B]
  std::vector<std::int64_t> tables;   // [B][table_width]: pool block of each 64 positions
  PackedKv packed;                    // points into the two vectors above
  PagedView() = default;
  PagedView(PagedView&&) = default;  // vector moves keep their buffers (packed stays valid)
  PagedView(const PagedView&) = delete;
  PagedView& operator=(const PagedView&) = delete;
};

struct PagedKvCacheAccess {
  // Throws Error naming sequences[i] for a freed or unknown id, or one longer than max_length.
  static PagedView view(const PagedKvCache& cache,
                        std::span<const PagedKvCache::SequenceId> sequences,
                        std::int64_t max_length);
};

}  // namespace seqattn::detail
