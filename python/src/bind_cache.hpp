// The KvCache as Python holds it: appends take the lock exclusively, plan runs share it, so
// Python threads may decode from one cache while another appends (with the GIL released).
#pragma once
#include <shared_mutex>

#include "seqattn/kv_cache.hpp"
#include "seqattn/paged_kv_cache.hpp"

namespace seqattn::python {

struct PyKvCache {
  explicit PyKvCache(const KvCacheShape& shape, KvCacheMode mode) : cache(shape, mode) {}
  KvCache cache;
  mutable std::shared_mutex mutex;
};

// The same lock discipline for a PagedKvCache (add, fork, free and append take it exclusively).
struct PyPagedKvCache {
  explicit PyPagedKvCache(const PagedKvCacheShape& shape) : cache(shape) {}
  PagedKvCache cache;
  mutable std::shared_mutex mutex;
};

}  // namespace seqattn::python
