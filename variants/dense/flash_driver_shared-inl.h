// The flash kernel's driver, written once over a SIMD ops type (see flash_tiles_shared-inl.h):
// packs K and V of a (batch, kv-head) into tiles, walks query tiles × key tiles with online
// softmax, skips hidden tiles, sends only edge tiles through the element mask, and
// parallelises over query tiles with OpenMP. Every output row is produced by one work item
// visiting its key tiles in a fixed order, so the result is bitwise the same for any thread
// count.
//
// No include guard and no namespace: a backend shell includes this once inside its
// per-target namespace and target region, after the headers listed in flash_kernel_deps.hpp,
// with Exp2NonPositive<Ops> visible.

#include "variants/dense/flash_tiles_shared-inl.h"  // IWYU pragma: keep

// After the tiles: the geometry takes their blocking table.
#include "variants/dense/flash_packing_shared-inl.h"  // IWYU pragma: keep

// Per-thread scratch and the loop over one work item (a query tile of one head).
template <class Ops>
class FlashWorker {
 public:
  static constexpr FlashBlocking kBlocking = kFlashBlocking<Ops>;
  static constexpr size_t kRows = kBlocking.rows;
  static constexpr size_t kKeyVecs = kBlocking.key_vecs;
  static constexpr size_t kOutVecs = kBlocking.out_vecs;
  static constexpr size_t kLanes = Ops::kLanes;
  static_assert(kBlocking.query_tile % kBlocking.rows == 0, "whole micro-tiles per work item");

  FlashWorker(const Problem& p, const FlashGeometry& g, const TileVisibility& visibility,
              const KeyPattern& pattern, const std::vector<std::uint8_t>& tile_has_global_key)
      : p_(p),
        g_(g),
        visibility_(visibility),
        pattern_(pattern),
        tile_has_global_key_(tile_has_global_key),
        q_tile_(hwy::AllocateAligned<float>(static_cast<size_t>(g.query_tile * g.dim))),
        o_tile_(hwy::AllocateAligned<float>(static_cast<size_t>(g.query_tile * g.dv_pad))),
        scores_(hwy::AllocateAligned<float>(kRows * static_cast<size_t>(g.key_tile))),
        sum_lanes_(hwy::AllocateAligned<float>(static_cast<size_t>(g.query_tile) * kLanes)),
        m_(static_cast<size_t>(g.query_tile)),
        alpha_(kRows),
        ranges_(static_cast<size_t>(g.query_tile)),
        key_row_(static_cast<size_t>(g.dim)) {
    tiles_.reserve(static_cast<size_t>(g.key_tiles));
    rope_ = rope_of(p.positional.get());
    if (p.positional && p.positional->has_alibi()) {
      alibi_ = p.positional->alibi_slopes.data();
      alibi_symmetric_ = p.positional->alibi_symmetric;
    }
  }

  // dim floats for PackKeyValueTile's rotated key.
  float* key_row() { return key_row_.data(); }

  // tile_slots maps a key tile to its packed slot (a ring); nullptr: slot = tile.
  void run(std::int64_t b, std::int64_t h, std::int64_t qt, const float* packed_k,
           const float* packed_v, const std::int64_t* tile_slots = nullptr) {
    const std::int64_t i0 = qt * g_.query_tile;
    const std::int64_t n_rows = std::min(g_.query_tile, p_.seq_q() - i0);
    const std::int64_t blocks = (n_rows + g_.rows - 1) / g_.rows;
    const std::int64_t len = std::min(p_.key_length(b), p_.seq_k());
    load_queries(b, h, i0, n_rows, blocks * g_.rows);
    collect_tiles(i0, n_rows, len);
    for (const std::int64_t kt : tiles_) {
      const std::int64_t slot = tile_slots ? tile_slots[kt] : kt;
      const float* k_tile = packed_k + slot * g_.key_tile * g_.dim;
      const float* v_tile = packed_v + slot * g_.key_tile * g_.dv_pad;
      for (std::int64_t rb = 0; rb < blocks; ++rb) {
        attend_block(b, h, i0, n_rows, rb, kt, len, k_tile, v_tile);
      }
    }
    store_rows(b, h, i0, n_rows);
  }

 private:
  // Scaled queries in log2 units, padded rows zero; accumulators reset.
  void load_queries(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t n_rows,
                    std::int64_t padded_rows) {
    const float mul = p_.scale * kLog2e;
    float* q = q_tile_.get();
    for (std::int64_t r = 0; r < padded_rows; ++r) {
      float* dst = q + r * g_.dim;
      if (r >= n_rows) {
        std::fill(dst, dst + g_.dim, 0.0f);
        continue;
      }
      const float* src = p_.q.ptr(b, h, i0 + r);
      const std::int64_t step = p_.q.strides[3];
      if (rope_ != nullptr) {  // rotated while it is scaled: no pass of its own over q
        rotate_row_at(src, step, g_.dim, mul, *rope_, rope_->rows(), RopeSide::kQuery, i0 + r, dst);
      } else if (step == 1) {  // contiguous rows vectorise
        for (std::int64_t d = 0; d < g_.dim; ++d) dst[d] = src[d] * mul;
      } else {
        for (std::int64_t d = 0; d < g_.dim; ++d) dst[d] = src[d * step] * mul;
      }
    }
    std::fill(o_tile_.get(), o_tile_.get() + padded_rows * g_.dv_pad, 0.0f);
    std::fill(m_.begin(), m_.end(), -std::numeric_limits<float>::infinity());
    std::fill(sum_lanes_.get(), sum_lanes_.get() + g_.query_tile * kLanes, 0.0f);
  }

  // Key tiles intersecting any row's contiguous range, plus tiles holding a visible global
  // key, in increasing order (the order fixes the floating-point result).
  void collect_tiles(std::int64_t i0, std::int64_t n_rows, std::int64_t len) {
    std::int64_t lo = len, hi = 0;
    for (std::int64_t r = 0; r < g_.query_tile; ++r) {
      const KeyRange range = r < n_rows ? visibility_.row_range(i0 + r, len) : KeyRange{};
      ranges_[static_cast<size_t>(r)] = range;
      if (!range.empty()) {
        lo = std::min(lo, range.lo);
        hi = std::max(hi, range.hi);
      }
    }
    tiles_.clear();
    const std::int64_t first = hi > lo ? lo / g_.key_tile : 0;
    const std::int64_t last = hi > lo ? (hi + g_.key_tile - 1) / g_.key_tile : 0;
    for (const std::int64_t j : pattern_.global_keys) {
      const std::int64_t kt = j / g_.key_tile;
      if (j >= len || kt >= first) break;
      if (tiles_.empty() || tiles_.back() != kt) tiles_.push_back(kt);
    }
    for (std::int64_t kt = first; kt < last; ++kt) tiles_.push_back(kt);
    for (const std::int64_t j : pattern_.global_keys) {
      const std::int64_t kt = j / g_.key_tile;
      if (j >= len) break;
      if (kt >= last && (tiles_.empty() || tiles_.back() != kt)) tiles_.push_back(kt);
    }
    if (alibi_ != nullptr) nearest_tiles_first(i0 + p_.seq_k() - p_.seq_q());
  }

  // ALiBi's scores fall with the distance from the diagonal, so in increasing key order the
  // running maximum rose on almost every tile, and each rise costs a scalar exp2 and a
  // rescale per row (the exp2 calls alone were 5.7% of a profile at S = 4096, causal).
  // Visiting the tiles nearest the query tile's diagonal position first (a fixed order, so
  // still deterministic) sets the maximum at once.
  void nearest_tiles_first(std::int64_t diagonal) {
    const auto distance = [&](std::int64_t kt) {
      const std::int64_t j0 = kt * g_.key_tile, j1 = j0 + g_.key_tile;
      return diagonal < j0 ? j0 - diagonal : diagonal >= j1 ? diagonal - j1 + 1 : 0;
    };
    std::stable_sort(tiles_.begin(), tiles_.end(),
                     [&](std::int64_t a, std::int64_t b) { return distance(a) < distance(b); });
  }

  // kRange: only the rows' contiguous ranges cut the tile (vector masking); kEdge: the exact
  // element rule is needed (keep mask, bias or a global key column in the tile).
  enum class TileKind { kSkip, kFull, kRange, kEdge };

  TileKind classify(std::int64_t n_rows, std::int64_t rb, std::int64_t kt) const {
    const std::int64_t j0 = kt * g_.key_tile, j1 = j0 + g_.key_tile;
    bool full = !visibility_.elementwise();
    bool any = tile_has_global_key_[static_cast<size_t>(kt)] != 0;
    for (std::int64_t r = rb * g_.rows; r < std::min(n_rows, (rb + 1) * g_.rows); ++r) {
      const KeyRange range = ranges_[static_cast<size_t>(r)];
      full = full && range.lo <= j0 && j1 <= range.hi;
      any = any || (!range.empty() && range.lo < j1 && range.hi > j0);
    }
    if (!any) return TileKind::kSkip;
    if (full) return TileKind::kFull;
    const bool ranges_suffice =
        !visibility_.elementwise() && tile_has_global_key_[static_cast<size_t>(kt)] == 0;
    return ranges_suffice ? TileKind::kRange : TileKind::kEdge;
  }

  void attend_block(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t n_rows,
                    std::int64_t rb, std::int64_t kt, std::int64_t len, const float* k_tile,
                    const float* v_tile) {
    const TileKind kind = classify(n_rows, rb, kt);
    if (kind == TileKind::kSkip) return;
    const MicroTile tile{b, h, i0, n_rows, rb, kt, len, kind};
    // Band edges and the causal diagonal often need only a few keys of the tile: when the
    // rows' union fits in half the width, run the half-width kernels there (same result:
    // the skipped keys are hidden for every row of the block).
    if constexpr (kKeyVecs >= 2) {
      if (kind == TileKind::kRange) {
        const std::int64_t first = half_width_start(rb, kt, n_rows);
        if (first >= 0) {
          attend_micro_tile<kKeyVecs / 2>(tile, first, k_tile, v_tile);
          return;
        }
      }
    }
    attend_micro_tile<kKeyVecs>(tile, 0, k_tile, v_tile);
  }

  struct MicroTile {
    std::int64_t b, h, i0, n_rows, rb, kt, len;
    TileKind kind;
  };

  // First key (tile-relative, whole vectors) of a half-width window holding every key the
  // block's rows can see in tile kt, or -1 when no such window exists.
  std::int64_t half_width_start(std::int64_t rb, std::int64_t kt, std::int64_t n_rows) const {
    const std::int64_t j0 = kt * g_.key_tile, half = g_.key_tile / 2;
    std::int64_t lo = g_.key_tile, hi = 0;
    for (std::int64_t r = rb * g_.rows; r < std::min(n_rows, (rb + 1) * g_.rows); ++r) {
      const KeyRange range = ranges_[static_cast<size_t>(r)];
      if (range.empty()) continue;
      lo = std::min(lo, std::max<std::int64_t>(range.lo - j0, 0));
      hi = std::max(hi, std::min(range.hi - j0, g_.key_tile));
    }
    const std::int64_t first = std::min<std::int64_t>(
        lo / static_cast<std::int64_t>(kLanes) * static_cast<std::int64_t>(kLanes),
        g_.key_tile - half);
    return hi <= first + half ? first : -1;
  }

  // One rows × (kVecs·lanes) micro-tile starting at key `first` of tile kt: Q·Kᵀ, mask,
  // online softmax, P·V.
  template <size_t kVecs>
  void attend_micro_tile(const MicroTile& t, std::int64_t first, const float* k_tile,
                         const float* v_tile) {
    constexpr size_t kWidth = kVecs * kLanes;
    const size_t key_tile = static_cast<size_t>(g_.key_tile);
    const size_t dv_pad = static_cast<size_t>(g_.dv_pad);
    float* scores = scores_.get();
    MultiplyTile<Ops, kRows, kVecs, TileUpdate::kOverwrite>(
        q_tile_.get() + t.rb * g_.rows * g_.dim, static_cast<size_t>(g_.dim), k_tile + first,
        key_tile, static_cast<size_t>(g_.dim), scores, kWidth, nullptr);
    const std::int64_t j0 = t.kt * g_.key_tile + first;
    if (alibi_ != nullptr) add_alibi<kVecs>(t, j0);
    if (t.kind == TileKind::kEdge) mask_block(t, j0, static_cast<std::int64_t>(kWidth));
    if (t.kind == TileKind::kRange) mask_block_by_range<kVecs>(t.rb, j0);
    const size_t row0 = static_cast<size_t>(t.rb * g_.rows);
    const bool rescale = SoftmaxStep<Ops, kRows, kVecs>(
        scores, m_.data() + row0, sum_lanes_.get() + row0 * kLanes, alpha_.data());
    float* o = o_tile_.get() + t.rb * g_.rows * g_.dv_pad;
    const float* v = v_tile + first * g_.dv_pad;
    if (rescale) {
      MultiplyRowsByValues<Ops, kRows, kOutVecs, TileUpdate::kScaleRowsThenAccumulate>(
          scores, kWidth, v, dv_pad, kWidth, o, dv_pad, alpha_.data());
    } else {
      MultiplyRowsByValues<Ops, kRows, kOutVecs, TileUpdate::kAccumulate>(
          scores, kWidth, v, dv_pad, kWidth, o, dv_pad, nullptr);
    }
  }

  void mask_block(const MicroTile& t, std::int64_t j0, std::int64_t width) {
    for (std::int64_t r = 0; r < g_.rows; ++r) {
      const std::int64_t row = t.rb * g_.rows + r;
      float* s = scores_.get() + r * width;
      if (row >= t.n_rows) {
        std::fill(s, s + width, -std::numeric_limits<float>::infinity());
        continue;
      }
      visibility_.mask_row(t.b, t.h, t.i0 + row, j0, width, t.len,
                           ranges_[static_cast<size_t>(row)], kLog2e, s);
    }
  }

  // ALiBi's bias on the block's scores, before the mask (which overwrites hidden keys).
  template <size_t kVecs>
  void add_alibi(const MicroTile& t, std::int64_t j0) {
    constexpr size_t kWidth = kVecs * kLanes;
    const float slope = alibi_[t.h] * kLog2e;
    const std::int64_t offset = p_.seq_k() - p_.seq_q();  // query i sits at key position i + offset
    for (std::int64_t r = 0; r < g_.rows; ++r) {
      const auto rel = static_cast<float>(j0 - (t.i0 + t.rb * g_.rows + r + offset));
      float* s = scores_.get() + r * static_cast<std::int64_t>(kWidth);
      if (alibi_symmetric_) {
        AddDistanceBias<Ops, kVecs, true>(s, slope, rel);
      } else {
        AddDistanceBias<Ops, kVecs, false>(s, slope, rel);
      }
    }
  }

  template <size_t kVecs>
  void mask_block_by_range(std::int64_t rb, std::int64_t j0) {
    constexpr std::int64_t kWidth = static_cast<std::int64_t>(kVecs * kLanes);
    // Clamped to [-1, width + 1] so the float compare is exact.
    auto relative = [&](std::int64_t j) {
      return static_cast<float>(std::clamp<std::int64_t>(j - j0, -1, kWidth + 1));
    };
    for (std::int64_t r = 0; r < g_.rows; ++r) {
      const KeyRange range = ranges_[static_cast<size_t>(rb * g_.rows + r)];  // empty for padding
      KeepKeyRange<Ops, kVecs>(scores_.get() + r * kWidth, relative(range.lo), relative(range.hi));
    }
  }

  // out = O / l; a row that saw no key gives zeros and lse = -inf.
  void store_rows(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t n_rows) const {
    for (std::int64_t r = 0; r < n_rows; ++r) {
      const float sum = Ops::ReduceSum(Ops::Load(sum_lanes_.get() + r * kLanes));
      const float inv = sum > 0 ? 1.0f / sum : 0.0f;
      const float* o = o_tile_.get() + r * g_.dv_pad;
      float* out = p_.out.ptr(b, h, i0 + r);
      const std::int64_t step = p_.out.strides[3];
      if (step == 1) {
        for (std::int64_t d = 0; d < g_.dim_v; ++d) out[d] = o[d] * inv;
      } else {
        for (std::int64_t d = 0; d < g_.dim_v; ++d) out[d * step] = o[d] * inv;
      }
      if (p_.lse) {
        p_.lse->at(b, h, i0 + r, 0) = sum > 0 ? (m_[static_cast<size_t>(r)] + std::log2(sum)) * kLn2
                                              : -std::numeric_limits<float>::infinity();
      }
    }
  }

  const Problem& p_;
  const FlashGeometry& g_;
  const TileVisibility& visibility_;
  const KeyPattern& pattern_;
  const std::vector<std::uint8_t>& tile_has_global_key_;
  hwy::AlignedFreeUniquePtr<float[]> q_tile_, o_tile_, scores_, sum_lanes_;
  std::vector<float> m_, alpha_;
  std::vector<KeyRange> ranges_;
  std::vector<std::int64_t> tiles_;
  std::vector<float> key_row_;
  const RopeTables* rope_ = nullptr;
  const float* alibi_ = nullptr;  // slopes per query head, natural units
  bool alibi_symmetric_ = false;
};

inline std::vector<std::uint8_t> TilesWithGlobalKeys(const KeyPattern& pattern,
                                                     const FlashGeometry& g) {
  std::vector<std::uint8_t> flags(static_cast<size_t>(g.key_tiles), 0);
  for (const std::int64_t j : pattern.global_keys) flags[static_cast<size_t>(j / g.key_tile)] = 1;
  return flags;
}

// Packed K/V of several (batch, kv-head) pairs are kept at once, up to this many floats
// (2 MiB; at least one pair), so that one dynamic loop spreads the query tiles of all of
// them over the threads (a barrier per kv-head idles threads on its last tiles) while the
// freshly packed tiles are still in cache: a 16 MiB budget measured 1.4x slower at S = 4096.
inline constexpr std::int64_t kPackedBudgetFloats = std::int64_t{1} << 19;

// Key tiles [first, last) that the contiguous ranges of query tile qt's rows touch; `global`
// when one of its rows is a global query, which sees every key.
struct QueryTileKeys {
  std::int64_t first = 0, last = 0;
  bool global = false;
};

inline QueryTileKeys KeysOfQueryTile(const Problem& p, const FlashGeometry& g,
                                     const TileVisibility& visibility, const KeyPattern& pattern,
                                     std::int64_t qt, std::int64_t len) {
  QueryTileKeys keys;
  std::int64_t lo = len, hi = 0;
  const std::int64_t i0 = qt * g.query_tile, i1 = std::min(i0 + g.query_tile, p.seq_q());
  for (std::int64_t i = i0; i < i1; ++i) {
    if (pattern.is_global_query(i)) {
      keys.global = true;
      continue;
    }
    const KeyRange range = visibility.row_range(i, len);
    if (range.empty()) continue;
    lo = std::min(lo, range.lo);
    hi = std::max(hi, range.hi);
  }
  if (hi > lo) {
    keys.first = lo / g.key_tile;
    keys.last = (hi + g.key_tile - 1) / g.key_tile;
  }
  return keys;
}

// Query rows per segment of the banded path: a segment packs about as many new keys as it has
// query rows, and half the packing budget of them is still in L2 when its query tiles read
// them (packing a whole 32 MiB pair first sent every band read to DRAM and page-faulted a
// fresh 32 MiB buffer per call: 1.27x slower per token at S = 65536 than at 4096).
inline constexpr std::int64_t kBandSegmentFloats = kPackedBudgetFloats / 2;

// Packed storage of the banded path: global-key tiles in fixed slots, band tiles in a ring of
// `ring` slots (tile kt in slot globals + kt % ring), wide enough for any segment's band.
struct BandRing {
  std::int64_t ring = 1;
  std::vector<std::int64_t> tile_slots;  // per key tile
  std::vector<std::int64_t> slot_holds;  // per slot: the key tile packed there, or -1
};

inline BandRing MakeBandRing(const Problem& p, const FlashGeometry& g,
                             const TileVisibility& visibility, const KeyPattern& pattern,
                             const std::vector<std::uint8_t>& global_tiles, std::int64_t segment) {
  BandRing r;
  for (std::int64_t b = 0; b < p.batch(); ++b) {
    const std::int64_t len = std::min(p.key_length(b), p.seq_k());
    for (std::int64_t q0 = 0; q0 < g.query_tiles; q0 += segment) {
      std::int64_t first = g.key_tiles, last = 0;
      for (std::int64_t qt = q0; qt < std::min(q0 + segment, g.query_tiles); ++qt) {
        const QueryTileKeys keys = KeysOfQueryTile(p, g, visibility, pattern, qt, len);
        if (keys.global || keys.last <= keys.first) continue;
        first = std::min(first, keys.first);
        last = std::max(last, keys.last);
      }
      r.ring = std::max(r.ring, last - first);
    }
  }
  std::int64_t globals = 0;
  for (const std::uint8_t flag : global_tiles) globals += flag;
  r.tile_slots.resize(static_cast<size_t>(g.key_tiles));
  for (std::int64_t kt = 0, next_global = 0; kt < g.key_tiles; ++kt) {
    r.tile_slots[static_cast<size_t>(kt)] =
        global_tiles[static_cast<size_t>(kt)] != 0 ? next_global++ : globals + kt % r.ring;
  }
  r.slot_holds.assign(static_cast<size_t>(globals + r.ring), -1);
  return r;
}

// Queues the key tiles [first, last) whose slot does not hold them yet.
inline void QueueKeyTiles(BandRing& r, std::vector<std::int64_t>& to_pack, std::int64_t first,
                          std::int64_t last) {
  for (std::int64_t kt = first; kt < last; ++kt) {
    std::int64_t& holds = r.slot_holds[static_cast<size_t>(r.tile_slots[static_cast<size_t>(kt)])];
    if (holds == kt) continue;
    holds = kt;
    to_pack.push_back(kt);
  }
}

// Band pattern with a pair larger than the packing budget: each pair runs in segments of query
// tiles, each packing only the key tiles its band needs (into a ring) right before using them;
// tiles shared with the previous segment stay packed. Global-key tiles are packed once per pair;
// query tiles holding a global query row run last, on a fully packed copy. Work items are the
// same as in FlashForward, so the result is bitwise identical.
template <class Ops>
void FlashForwardBanded(const Problem& p, const KeyPattern& pattern, const FlashGeometry& g,
                        const TileVisibility& visibility,
                        const std::vector<std::uint8_t>& global_tiles) {
  const std::int64_t segment = std::clamp<std::int64_t>(
      kBandSegmentFloats / ((g.dim + g.dv_pad) * g.query_tile), 1, g.query_tiles);
  BandRing ring = MakeBandRing(p, g, visibility, pattern, global_tiles, segment);
  const std::int64_t slots = static_cast<std::int64_t>(ring.slot_holds.size());
  const std::int64_t k_floats = slots * g.key_tile * g.dim;
  auto packed =
      hwy::AllocateAligned<float>(static_cast<size_t>(k_floats + slots * g.key_tile * g.dv_pad));
  float* packed_k = packed.get();
  float* packed_v = packed.get() + k_floats;
  const bool has_global_queries =
      std::any_of(pattern.global_query.begin(), pattern.global_query.end(),
                  [](std::uint8_t flag) { return flag != 0; });
  hwy::AlignedFreeUniquePtr<float[]> full;
  if (has_global_queries) {
    full =
        hwy::AllocateAligned<float>(static_cast<size_t>(g.packed_k_floats() + g.packed_v_floats()));
  }
  const std::int64_t group = p.group();
  std::vector<QueryTileKeys> keys(static_cast<size_t>(g.query_tiles));
  std::vector<std::int64_t> to_pack;
  to_pack.reserve(static_cast<size_t>(g.key_tiles));
#pragma omp parallel num_threads(p.threads)
  {
    FlashWorker<Ops> worker(p, g, visibility, pattern, global_tiles);
    auto pack_queued = [&](std::int64_t b, std::int64_t hk, float* k_base, float* v_base,
                           const std::int64_t* tile_slots) {
#pragma omp for schedule(static)
      for (size_t t = 0; t < to_pack.size(); ++t) {
        const std::int64_t kt = to_pack[t], slot = tile_slots ? tile_slots[kt] : kt;
        PackKeyValueTile(p, g, b, hk, kt, k_base + slot * g.key_tile * g.dim,
                         v_base + slot * g.key_tile * g.dv_pad, worker.key_row());
      }
    };
    // Query tiles [q0, q1) times the heads of kv-head hk; global tiles only when `global`.
    auto run_tiles = [&](std::int64_t b, std::int64_t hk, std::int64_t q0, std::int64_t q1,
                         bool global, const float* k_base, const float* v_base,
                         const std::int64_t* tile_slots) {
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t item = 0; item < (q1 - q0) * group; ++item) {
        std::int64_t qt = q0 + item / group;
        if (p.mask->causal) qt = q1 - 1 - (qt - q0);
        if (keys[static_cast<size_t>(qt)].global != global) continue;
        worker.run(b, hk * group + item % group, qt, k_base, v_base, tile_slots);
      }
    };
    for (std::int64_t pair = 0; pair < p.batch() * p.heads_kv(); ++pair) {
      const std::int64_t b = pair / p.heads_kv(), hk = pair % p.heads_kv();
      const std::int64_t len = std::min(p.key_length(b), p.seq_k());
      for (std::int64_t q0 = 0; q0 < g.query_tiles; q0 += segment) {
        const std::int64_t q1 = std::min(q0 + segment, g.query_tiles);
#pragma omp single
        {
          to_pack.clear();
          if (q0 == 0) {
            std::fill(ring.slot_holds.begin(), ring.slot_holds.end(), -1);
            for (std::int64_t kt = 0; kt < g.key_tiles; ++kt) {
              if (global_tiles[static_cast<size_t>(kt)] != 0)
                QueueKeyTiles(ring, to_pack, kt, kt + 1);
            }
          }
          for (std::int64_t qt = q0; qt < q1; ++qt) {
            QueryTileKeys& k = keys[static_cast<size_t>(qt)];
            k = KeysOfQueryTile(p, g, visibility, pattern, qt, len);
            for (std::int64_t kt = k.first; kt < k.last && !k.global; ++kt) {
              if (global_tiles[static_cast<size_t>(kt)] == 0)
                QueueKeyTiles(ring, to_pack, kt, kt + 1);
            }
          }
        }
        const std::int64_t* slots_of = ring.tile_slots.data();
        pack_queued(b, hk, packed_k, packed_v, slots_of);
        run_tiles(b, hk, q0, q1, false, packed_k, packed_v, slots_of);
      }
      if (!has_global_queries) continue;
#pragma omp single
      {
        to_pack.clear();
        for (std::int64_t kt = 0; kt < g.key_tiles; ++kt) to_pack.push_back(kt);
      }
      float* full_k = full.get();
      float* full_v = full.get() + g.packed_k_floats();
      pack_queued(b, hk, full_k, full_v, nullptr);
      run_tiles(b, hk, 0, g.query_tiles, true, full_k, full_v, nullptr);
    }
  }
}

template <class Ops>
void FlashForward(const Problem& p, const KeyPattern& pattern) {
  const FlashGeometry g(p, kFlashBlocking<Ops>, static_cast<std::int64_t>(Ops::kLanes));
  const TileVisibility visibility(p, pattern);
  const std::vector<std::uint8_t> global_tiles = TilesWithGlobalKeys(pattern, g);
  const std::int64_t per_pair = g.packed_k_floats() + g.packed_v_floats();
  if (pattern.banded && per_pair > kPackedBudgetFloats) {
    FlashForwardBanded<Ops>(p, pattern, g, visibility, global_tiles);
    return;
  }
  const std::int64_t pairs = p.batch() * p.heads_kv();
  const std::int64_t pairs_per_round =
      std::clamp<std::int64_t>(kPackedBudgetFloats / per_pair, 1, pairs);
  auto packed = hwy::AllocateAligned<float>(static_cast<size_t>(per_pair * pairs_per_round));
  const std::int64_t group = p.group();
#pragma omp parallel num_threads(p.threads)
  {
    FlashWorker<Ops> worker(p, g, visibility, pattern, global_tiles);
    for (std::int64_t first = 0; first < pairs; first += pairs_per_round) {
      const std::int64_t count = std::min(pairs_per_round, pairs - first);
#pragma omp for schedule(static)
      for (std::int64_t task = 0; task < count * g.key_tiles; ++task) {
        const std::int64_t slot = task / g.key_tiles, kt = task % g.key_tiles;
        const std::int64_t pair = first + slot;
        float* base = packed.get() + slot * per_pair;
        PackKeyValueTile(p, g, pair / p.heads_kv(), pair % p.heads_kv(), kt,
                         base + kt * g.key_tile * g.dim,
                         base + g.packed_k_floats() + kt * g.key_tile * g.dv_pad, worker.key_row());
      }
      // Heads sharing a kv-head run back to back on the same packed tiles; under a causal
      // mask the later (heavier) query tiles of every pair go first to balance the threads.
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t item = 0; item < count * group * g.query_tiles; ++item) {
        std::int64_t qt = item / (count * group);
        if (p.mask->causal) qt = g.query_tiles - 1 - qt;
        const std::int64_t slot = item / group % count;
        const std::int64_t pair = first + slot;
        const float* base = packed.get() + slot * per_pair;
        worker.run(pair / p.heads_kv(), pair % p.heads_kv() * group + item % group, qt, base,
                   base + g.packed_k_floats());
      }
    }
  }
}
