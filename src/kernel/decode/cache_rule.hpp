// What a row of the variant table tells the decode kernel about which cached keys a new query
// sees (VariantRow::over_cache): the kernel knows the causal rule and the stored range, and
// takes a band and global tokens from here. Positions are absolute in a cache.
#pragma once

#include <cstdint>
#include <vector>

namespace seqattn::detail {

struct CacheRule {
  // Keys within [pos - left, pos + right] only (a global query row sees every stored key).
  bool banded = false;
  std::int64_t left = 0, right = 0;   // clamped to 2^40, so pos ± reach cannot overflow
  std::vector<std::int64_t> globals;  // sorted, unique: rows and columns seen by all
};

}  // namespace seqattn::detail
