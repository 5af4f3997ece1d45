// Visibility as the flash kernel sees it: each query row's contiguous key range [lo, hi)
// (key length, causal limit, band) drives tile skipping; the element path (diagonal, band
// edges, key-length edges, keep masks, bias, global columns) applies the exact rule of
// ElementMask plus the KeyPattern to one row of a score tile. Scores are in log2 units.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>

#include "src/core/problem.hpp"
#include "src/kernel/element_mask.hpp"
#include "src/kernel/key_pattern.hpp"

namespace seqattn::detail {

struct KeyRange {
  std::int64_t lo = 0, hi = 0;  // [lo, hi); empty when hi <= lo
  bool empty() const { return hi <= lo; }
};

class TileVisibility {
 public:
  TileVisibility(const Problem& p, const KeyPattern& pattern)
      : p_(p), pattern_(pattern), mask_(p), offset_(p.seq_k() - p.seq_q()) {}

  // True when every visited tile needs the element path (keep mask or bias present).
  bool elementwise() const { return p_.mask->keep.has_value() || mask_.has_bias(); }

  // Keys row i may see through the contiguous rules; global columns come on top.
  KeyRange row_range(std::int64_t i, std::int64_t key_length) const {
    KeyRange r{0, key_length};
    if (p_.mask->causal) r.hi = std::min(r.hi, mask_.causal_limit(i) + 1);
    if (pattern_.explicit_rows()) {
      r.lo = std::max(r.lo, pattern_.row_lo[static_cast<size_t>(i)]);
      r.hi = std::min(r.hi, pattern_.row_hi[static_cast<size_t>(i)]);
    } else if (pattern_.banded && !pattern_.is_global_query(i)) {
      r.lo = std::max(r.lo, i + offset_ - pattern_.left);
      r.hi = std::min(r.hi, i + offset_ + pattern_.right + 1);
    }
    return r;
  }

  // Applies the exact rule to scores s[0, keys) of row i for keys j0 + [0, keys); keys past S_k
  // (tile padding) are hidden. `log2e` converts the natural-units bias.
  void mask_row(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j0, std::int64_t keys,
                std::int64_t key_length, KeyRange range, float log2e, float* s) const {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (std::int64_t t = 0; t < keys; ++t) {
      const std::int64_t j = j0 + t;
      bool visible = j >= range.lo && j < range.hi;
      if (!visible && pattern_.banded && j < key_length && pattern_.is_global_key(j)) {
        visible = !p_.mask->causal || j <= mask_.causal_limit(i);
      }
      if (visible && p_.mask->keep) visible = mask_.visible(b, h, i, j, key_length);
      if (!visible) {
        s[t] = kNegInf;
      } else if (mask_.has_bias()) {
        s[t] += mask_.bias(b, h, i, j) * log2e;
      }
    }
  }

 private:
  const Problem& p_;
  const KeyPattern& pattern_;
  ElementMask mask_;
  std::int64_t offset_;
};

}  // namespace seqattn::detail
