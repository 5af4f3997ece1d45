// Visibility as the flash kernel sees it: each query row's contiguous key range [lo, hi)
// (the structure's row range cut by the key length and the causal limit) drives tile
// classification; the element path (diagonal, range edges, key-length edges, keep masks,
// bias, key columns) applies the exact rule of ElementMask plus the KeyStructure to one row
// of a score tile. Scores are in log2 units.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <memory>

#include "src/core/problem.hpp"
#include "src/kernel/block_mask.hpp"
#include "src/kernel/element_mask.hpp"

namespace seqattn::detail {

class TileVisibility {
 public:
  // The kernel asks for the structure's rows per work item: an array read keeps a virtual call
  // out of that loop, so rows a structure does not store come from its row tables (built on
  // the structure's first run and kept, as are the key-column flags).
  TileVisibility(const Problem& p, const KeyStructure& keys)
      : p_(p),
        mask_(p),
        local_width_(keys.local_width()),
        tables_(keys.row_tables(p.seq_q(), p.seq_k())),
        rows_(keys.row_table()),
        slots_(p.mask.slots) {
    if (rows_ == nullptr) rows_ = tables_->rows.data();
    if (!tables_->column.empty()) column_ = tables_->column.data();
  }

  // True when every visited tile needs the element path (keep mask, bias or slot positions).
  bool elementwise() const {
    return p_.mask.keep.has_value() || mask_.has_bias() ||
           (slots_ != nullptr && slots_->query != nullptr);
  }

  // Whether some row has a key it never sees besides the rules above (SlotRule).
  bool excludes_keys() const { return slots_ != nullptr && slots_->excluded_offset >= 0; }
  // That key of row i (SlotRule::excluded_offset), or -1.
  std::int64_t excluded_key(std::int64_t i) const {
    return slots_ == nullptr || slots_->excluded_offset < 0 ? -1 : i + slots_->excluded_offset;
  }

  // Keys row i may see through the contiguous rules; key columns come on top.
  KeyRange row_range(std::int64_t i, std::int64_t key_length) const {
    const KeyRange own = rows_[i];
    KeyRange r{std::max<std::int64_t>(own.lo, 0), std::min(own.hi, key_length)};
    if (p_.mask.causal) r.hi = std::min(r.hi, mask_.causal_limit(i) + 1);
    return r;
  }

  // Row i's range holds more keys than the structure's local width (a global query row).
  bool wide(std::int64_t i) const {
    const KeyRange r = rows_[i];
    return local_width_ > 0 && r.hi - r.lo > local_width_;
  }

  bool is_column(std::int64_t j) const {
    return column_ != nullptr && column_[static_cast<size_t>(j)] != 0;
  }

  // Applies the exact rule to scores s[0, keys) of row i for keys j0 + [0, keys); keys past S_k
  // (tile padding) are hidden. `log2e` converts the natural-units bias.
  void mask_row(std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t j0, std::int64_t keys,
                std::int64_t key_length, KeyRange range, float log2e, float* s) const {
    constexpr float kNegInf = -std::numeric_limits<float>::infinity();
    for (std::int64_t t = 0; t < keys; ++t) {
      const std::int64_t j = j0 + t;
      bool visible = j >= range.lo && j < range.hi;
      if (!visible && j < key_length && is_column(j)) {
        visible = !p_.mask.causal || j <= mask_.causal_limit(i);
      }
      if (visible && p_.mask.keep) visible = mask_.visible(b, h, i, j, key_length);
      if (visible && slots_ != nullptr && slots_->query != nullptr) {
        visible =
            slots_->key[(h / p_.group()) * p_.seq_k() + j] <= slots_->query[h * p_.seq_q() + i];
      }
      if (!visible) {
        s[t] = kNegInf;
      } else if (mask_.has_bias()) {
        s[t] += mask_.bias(b, h, i, j) * log2e;
      }
    }
  }

 private:
  const Problem& p_;
  ElementMask mask_;
  std::int64_t local_width_;
  std::shared_ptr<const RowTables> tables_;  // the structure's rows (when it stores none), columns
  const KeyRange* rows_;                     // [S_q] the structure's row ranges
  const SlotRule* slots_;                    // null without per-key rules
  const std::uint8_t* column_ = nullptr;     // [S_k] when the structure has key columns
};

}  // namespace seqattn::detail
