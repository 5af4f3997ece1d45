// One work item of attention over a KV cache: up to row_tile query rows of one (batch, kv
// head) against the keys of one chunk, read in place from the cache's blocks through the
// flash kernel's micro-kernels (flash_tiles_body.inc). Rows are cut into blocks of the
// target's `rows` (6 on AVX-512/AVX2) and one exact remainder block (1 to rows - 1 rows,
// each count its own instantiation), so 4 rows (one token, 4 query heads per kv head) run as a
// 4-row micro-tile instead of being padded to 6.
//
// Elem is the cache's element type: float, or bfloat16/float16, which the micro-kernels widen
// to fp32 as they load (Ops::LoadWide), so the arithmetic and the softmax are fp32 and a half
// cache is read at 2 bytes an element; or int8 (1 byte), whose products are integers (below),
// through its own micro-kernels (int8_products-inl.h). int8 elements stand for
// int8 · scale[token]. Over an int8 cache Q·Kᵀ runs in integers (int8_products-inl.h): each
// query row is quantised to int8 once per row tile (scale max|row| / 127, as the keys; for the
// portable kernels also regrouped as the int8 ops' factors), a tile's dot products are exact
// int32 sums (pmaddwd pairs; vpdpbusd where the CPU has AVX512-VNNI), and a score is
// float(dot) · key scale · query scale. The softmax stays fp32; the probabilities, times the
// values' scales (after the running sum took them unscaled), are rounded per row to int16 and
// P·V is exact int32 sums too (pmaddwd; vpdpwssd), so no dequantised copy of a block ever exists.
// With the cache in L2/L3 (S_k 4096, H 32, H_kv 8, D 128, one Zen 4 thread) the integer Q·Kᵀ took a
// decode step from 0.80 to 0.56 ms, and the integer P·V to 0.42 ms.
//
// No include guard and no namespace: cache_attention.cpp includes this inside its per-target
// namespace, after flash_tiles_body.inc and int8_products-inl.h (and src/simd/int8_ops-inl.h,
// whose Int8QuadOps / Int8PairOps it names, before the namespace).

template <class Ops, class Elem>
class CacheWorker {
 public:
  static constexpr FlashBlocking kBlocking = kFlashBlocking<Ops>;
  static constexpr bool kQuantized = std::is_same_v<Elem, std::int8_t>;
  static constexpr size_t kRows = kBlocking.rows;
  static constexpr size_t kLanes = Ops::kLanes;
  // An int8 tile is a whole 64-key block on every target: its per-tile work (the weights' row
  // max and quantisation, the scaled P·V added to O: passes over dv_pad per row) costs as much
  // at 16 keys as at 64. One Zen 3 thread (AVX2; S_k 32768, H 32, H_kv 8, D 128): 16-key tiles
  // 8.76 and 8.85 ms, 64-key tiles 7.91 and 8.14 (alternating runs). The fp32 path keeps the
  // flash blocking's tile: 64 keys in 16-key passes measured slower there (bf16 14.5-14.6 ->
  // 15.4-18.1 ms).
  static constexpr size_t kKeyVecs = kQuantized ? kKvBlock / kLanes : kBlocking.key_vecs;
  static constexpr size_t kOutVecs = kBlocking.out_vecs;
  static constexpr std::int64_t kWidth = static_cast<std::int64_t>(kKeyVecs * kLanes);
  static_assert(kKvBlock % kWidth == 0, "a key tile never crosses a cache block");
  static_assert(kRows <= CacheScratchLayout::kMaxRows && kLanes <= CacheScratchLayout::kMaxLanes);
  using QOps = simd::HWY_NAMESPACE::Int8QuadOps;  // the int8 products' ops on this target
  using POps = simd::HWY_NAMESPACE::Int8PairOps;

  // vnni: the int8 products run on QuadDot64Avx512Vnni and PairDotAvx512Vnni (an AVX-512
  // target on a CPU with VNNI).
  CacheWorker(const CacheProblem& p, float* scratch, bool vnni)
      : p_(p),
        layout_(p.split.row_tile, p.kv.dim, p.kv.dv_pad),
        scratch_(scratch),
        far_keys_(kKvBlock * p.prefetch.far_blocks(sizeof(Elem))),
        rope_(rope_of(p.positional)),
        alibi_(p.positional != nullptr && p.positional->has_alibi() ? p.positional : nullptr),
        vnni_(vnni) {
    // The run's level and near requests (the table's near_rows rows on) in elements of each
    // block's rows: a key row (d) or quad row of 64 keys, a value row (token) or pair. visit_tile
    // sets the offsets to the next blocks.
    const std::int64_t near_rows = p.prefetch.near_rows;
    const std::int64_t key_row = kKvBlock * (kQuantized ? kKeyQuad : 1);
    const std::int64_t value_row = p.kv.dv_pad * (kQuantized ? 2 : 1);
    prefetch_k_ = {0, p.prefetch.level, static_cast<std::int32_t>(near_rows * key_row)};
    prefetch_v_ = {0, p.prefetch.level, static_cast<std::int32_t>(near_rows * value_row)};
  }

  // Rows [r0, r0 + n) of (b, hk) over keys [k0, k1) (absolute positions): leaves the
  // unnormalised output, running max (log2 units) and running sums in the scratch.
  void run(std::int64_t b, std::int64_t hk, std::int64_t r0, std::int64_t n, std::int64_t k0,
           std::int64_t k1) {
    b_ = b;
    hk_ = hk;
    r0_ = r0;
    n_ = n;
    k0_ = k0;
    k1_ = k1;
    // The chunks of one row tile (64 per tile at S_k 32768) share its queries: they are
    // scaled, rotated and quantised once. Per chunk that preparation was 8% of an int8 decode.
    const std::array<std::int64_t, 4> rows{b, hk, r0, n};
    if (rows != prepared_rows_) {
      load_queries();
      prepared_rows_ = rows;
    }
    reset_accumulators();
    std::int64_t lo = k1, hi = k0;
    for (std::int64_t r = 0; r < n; ++r) {
      const CacheKeyRange range = row_range(r);
      ranges_[static_cast<size_t>(r)] = range;
      if (!range.empty()) {
        lo = std::min(lo, range.lo);
        hi = std::max(hi, range.hi);
      }
    }
    // Global-key tiles below the band, the band, global-key tiles above: increasing order,
    // which fixes the floating-point result.
    const std::int64_t first = hi > lo ? lo / kWidth * kWidth : k1;
    const std::int64_t last = hi > lo ? (hi + kWidth - 1) / kWidth * kWidth : k1;
    std::int64_t done = std::numeric_limits<std::int64_t>::min();
    for (const std::int64_t g : *p_.globals) {
      if (g >= first) break;
      if (g >= k0 && g < k1 && g / kWidth * kWidth > done) visit_tile(done = g / kWidth * kWidth);
    }
    for (std::int64_t j0 = first; j0 < last; j0 += kWidth) visit_tile(done = j0);
    for (const std::int64_t g : *p_.globals) {
      if (g >= last && g < k1 && g / kWidth * kWidth > done) visit_tile(done = g / kWidth * kWidth);
    }
  }

  // out = O / l and lse for the rows of the last run(); a row that saw no key is zeros, -inf.
  void store_out() const {
    for (std::int64_t r = 0; r < n_; ++r) {
      const float sum = Ops::ReduceSum(Ops::Load(sum_lanes() + r * kLanes));
      store_row(r, o() + r * p_.kv.dv_pad, m()[r], sum);
    }
  }

  // The partial result of the last run(): O [row_tile][dv_pad], max [row_tile], sum [row_tile].
  void store_partial(float* dst) const {
    const CachePartialLayout part(p_.split.row_tile, p_.kv.dv_pad);
    std::copy(o(), o() + n_ * p_.kv.dv_pad, dst);
    for (std::int64_t r = 0; r < n_; ++r) {
      dst[part.max + r] = m()[r];
      dst[part.sum + r] = Ops::ReduceSum(Ops::Load(sum_lanes() + r * kLanes));
    }
  }

  // Writes row r of the last item: out = o / sum, lse = (max + log2 sum)·ln 2.
  void store_row(std::int64_t r, const float* o_row, float max, float sum) const {
    const std::int64_t row = r0_ + r, i = row / p_.group, h = hk_ * p_.group + row % p_.group;
    const float inv = sum > 0 ? 1.0f / sum : 0.0f;
    float* out = p_.out.ptr(b_, h, i);
    const std::int64_t step = p_.out.strides[3];
    for (std::int64_t d = 0; d < p_.kv.dim_v; ++d) out[d * step] = o_row[d] * inv;
    if (p_.lse) {
      p_.lse->at(b_, h, i, 0) =
          sum > 0 ? (max + std::log2(sum)) * kLn2 : -std::numeric_limits<float>::infinity();
    }
  }

  // Points store_row at rows [r0, r0 + n) of (b, hk) without running them (the merge).
  void bind_rows(std::int64_t b, std::int64_t hk, std::int64_t r0, std::int64_t n) {
    b_ = b;
    hk_ = hk;
    r0_ = r0;
    n_ = n;
  }

 private:
  enum class TileKind { kSkip, kFull, kRange, kEdge };

  float* q() const { return scratch_ + layout_.q; }
  std::int8_t* q8() const { return reinterpret_cast<std::int8_t*>(scratch_ + layout_.q8); }
  std::int32_t* qf() const { return reinterpret_cast<std::int32_t*>(scratch_ + layout_.qf); }
  // int32 factors of one query row in qf().
  size_t qf_stride() const {
    return static_cast<size_t>(p_.kv.key_rows() / kKeyQuad) * QOps::kParts;
  }
  float* o() const { return scratch_ + layout_.o; }
  float* scores() const { return scratch_ + layout_.scores; }
  float* sum_lanes() const { return scratch_ + layout_.sum_lanes; }
  float* m() const { return scratch_ + layout_.m; }
  float* alpha() const { return scratch_ + layout_.alpha; }

  std::int64_t position(std::int64_t r) const { return p_.position(b_, (r0_ + r) / p_.group); }

  // Keys row r sees through the contiguous rules, within this item's chunk.
  CacheKeyRange row_range(std::int64_t r) const {
    const CacheKeyRange range = VisibleKeys(p_, b_, position(r));
    return {std::max(range.lo, k0_), std::min(range.hi, k1_)};
  }

  // Scaled queries in log2 units (int8: also quantised).
  void load_queries() {
    const float mul = p_.scale * kLog2e;
    const std::int64_t dim = p_.kv.dim, step = p_.q.strides[3];
    for (std::int64_t r = 0; r < n_; ++r) {
      const std::int64_t row = r0_ + r;
      const float* src = p_.q.ptr(b_, hk_ * p_.group + row % p_.group, row / p_.group);
      float* dst = q() + r * dim;
      if (rope_ != nullptr) {  // at its absolute position, as the keys were on append
        // The group's query heads share a position (rows i·group + head): one set of angles.
        float* cos = scratch_ + layout_.angles;
        const std::int64_t pos = rope_->options.offset + position(r);
        if (r == 0 || pos != angles_position_) {
          rope_angles(*rope_, pos, cos, cos + rope_->half);
          angles_position_ = pos;
        }
        rotate_row(src, step, dim, mul, *rope_, cos, cos + rope_->half, dst);
      } else {
        for (std::int64_t d = 0; d < dim; ++d) dst[d] = src[d * step] * mul;
      }
      if constexpr (kQuantized) quantize_query(r, dst);
    }
  }

  void reset_accumulators() {
    std::fill(o(), o() + n_ * p_.kv.dv_pad, 0.0f);
    std::fill(m(), m() + n_, -std::numeric_limits<float>::infinity());
    std::fill(sum_lanes(), sum_lanes() + n_ * static_cast<std::int64_t>(kLanes), 0.0f);
  }

  // Row r of the queries (scaled, rotated) to int8 by the keys' rule, zero padded to whole
  // quads, with its scale and element sum (the VNNI kernels' q8) and, for the portable
  // kernels, as QOps' factors (qf). A row with a non-finite element gets scale NaN (and zero
  // bytes), so its scores and output are NaN, as over a float cache.
  void quantize_query(std::int64_t r, const float* row) {
    const std::int64_t dim = p_.kv.dim, rows = p_.kv.key_rows();
    std::int8_t* dst = q8() + r * rows;
    const float scale = int8_row_scale(row, dim);
    const bool finite = std::isfinite(scale);
    std::int32_t sum = 0;
    if (finite) quantize_int8_row(row, dim, scale, dst, 1);
    for (std::int64_t d = 0; d < rows; ++d) {
      if (!finite || d >= dim) dst[d] = 0;
      sum += dst[d];
    }
    q_scale_[static_cast<size_t>(r)] = scale;
    q_sum_[static_cast<size_t>(r)] = sum;
    if (vnni_) return;  // the VNNI kernels read q8 and the sum; qf is the portable kernels'
    std::int32_t* factors = qf() + static_cast<size_t>(r) * qf_stride();
    for (std::int64_t c = 0; c < rows / kKeyQuad; ++c)
      QOps::QueryFactors(dst + c * kKeyQuad, factors + static_cast<size_t>(c) * QOps::kParts);
  }

  bool tile_has_global(std::int64_t j0) const {
    auto it = std::lower_bound(p_.globals->begin(), p_.globals->end(), j0);
    return it != p_.globals->end() && *it < j0 + kWidth && *it < p_.kv.length(b_);
  }

  TileKind classify(std::int64_t row0, std::int64_t rows, std::int64_t j0, bool global) const {
    if (global) return TileKind::kEdge;
    bool any = false, full = true;
    for (std::int64_t r = row0; r < row0 + rows; ++r) {
      const CacheKeyRange range = ranges_[static_cast<size_t>(r)];
      any = any || (!range.empty() && range.lo < j0 + kWidth && range.hi > j0);
      full = full && range.lo <= j0 && j0 + kWidth <= range.hi;
    }
    return !any ? TileKind::kSkip : full ? TileKind::kFull : TileKind::kRange;
  }

  void visit_tile(std::int64_t j0) {
    const bool global = p_.banded && tile_has_global(j0);
    const PackedKv& kv = p_.kv;
    const std::int64_t block = kv.block(b_, hk_, j0);  // once: a table lookup when paged
    const Elem* k_block = kv.template key_block_at<Elem>(block);
    const Elem* v_block = kv.template value_block_at<Elem>(block);
    // An int8 block stores its keys in quads: a tile's first key is 4 bytes per key in.
    const Elem* k_tile = k_block + j0 % kKvBlock * (kQuantized ? kKeyQuad : 1);
    const Elem* v_tile = v_block + j0 % kKvBlock * kv.dv_pad;
    // The micro-kernels prefetch the same rows of a block ahead as they read this one, so it is
    // in flight during this one's arithmetic: from DRAM at S_k = 32768 (D = 128) one block
    // ahead took f32 from 10.2 to 12.9 GB/s on one thread and from 20.3 to 29.3 on two.
    // Prefetching the whole next block at once measured slower (8.8 GB/s): it floods the fill
    // buffers. The distance is in bytes of each key row, from prefetch_level.cpp's table
    // (DecodePrefetch::far_blocks, in keys once a run: far_keys_): 256 bytes (32 KiB of K at D =
    // 128), so a 16-bit cache looks two blocks ahead (one block measured 11.6 ms (bf16) / 9.7 ms
    // (f16), two 9.0 / 8.4, while two blocks for f32 gained nothing: 21.8 vs 21.4 ms), but 128
    // bytes on Zen 3, where the shorter reach was faster for bf16 and int8 alike (the table has the
    // pairs). Past the end the distance is 0. The requests fill the table's cache (L2 or L1 per
    // CPU, measured). On a Sapphire-Rapids-class Xeon (prefetching into L2) twice this distance
    // gained nothing: bf16 and int8, S_k 32768 and 131072, one and two threads, within ±5% either
    // way; on a Xeon with a 480 MiB L3 (paged bf16, two threads) 3 blocks were even, 8 slower
    // (68-69% of the read probe against 73-76%), none 51% (docs/architecture.md, "Paged cache").
    const std::int64_t next = j0 + far_keys_;
    const bool ahead = next < kv.length(b_);
    const std::int64_t next_block = ahead ? kv.block(b_, hk_, next) : block;
    prefetch_k_.offset = kv.template key_block_at<Elem>(next_block) - k_block;
    prefetch_v_.offset = kv.template value_block_at<Elem>(next_block) - v_block;
    if constexpr (kQuantized) {  // the tile's 64-byte-aligned run of scales
      k_scales_ = kv.key_scales_at(block) + j0 % kKvBlock;
      v_scales_ = kv.value_scales_at(block) + j0 % kKvBlock;
      if (ahead && j0 % kKvBlock == 0) prefetch_scales(next_block);
      far_asked_ = false;
    } else {
      order_far_requests(j0, k_block, v_tile);
    }
    std::int64_t row0 = 0;
    for (; row0 + static_cast<std::int64_t>(kRows) <= n_; row0 += kRows) {
      const TileKind kind = classify(row0, kRows, j0, global);
      if (kind != TileKind::kSkip) attend_rows<kRows>(row0, j0, kind, k_tile, v_tile);
    }
    const std::int64_t rest = n_ - row0;
    if (rest == 0) return;
    const TileKind kind = classify(row0, rest, j0, global);
    if (kind != TileKind::kSkip) {
      (this->*kRemainder[static_cast<size_t>(rest)])(row0, j0, kind, k_tile, v_tile);
    }
  }

  // The far requests of a float or half tile, in address order (simd::OrderedLines): the key
  // block's share of this tile (a block's keys are [D][64]: a tile of kWidth keys reads a few
  // bytes of every row, so its share is a run of whole rows) and the tile's value rows, both at
  // the next blocks. The first micro-tile of rows asks for them all; the others find none left.
  void order_far_requests(std::int64_t j0, const Elem* k_block, const Elem* v_tile) {
    constexpr std::int64_t kTiles = kKvBlock / kWidth;
    const auto share = static_cast<size_t>(p_.kv.key_rows() * kKvBlock / kTiles);  // elements
    const auto tile = static_cast<size_t>(j0 % kKvBlock / kWidth);
    k_far_ = simd::OrderedLines::Of(k_block + tile * share, share, prefetch_k_,
                                    static_cast<size_t>(p_.kv.dim) * kKeyVecs);
    const auto values = kWidth * static_cast<size_t>(p_.kv.dv_pad);
    v_far_ = simd::OrderedLines::Of(v_tile, values, prefetch_v_, values / kLanes);
  }

  // Asks for the K and V scales of storage block `next_block` (4 lines each), once per block, as
  // the micro-kernels ask for its keys and values. One Zen 5 thread's int8 step at S_k 32768 ran
  // 4-8% faster with them (6.12 → 5.88, 6.46 → 6.22, 7.00 → 6.41 ms; with and without alternating
  // run by run in one process).
  void prefetch_scales(std::int64_t next_block) const {
    for (const float* scales :
         {p_.kv.key_scales_at(next_block), p_.kv.value_scales_at(next_block)}) {
      for (std::int64_t i = 0; i < kKvBlock; i += 64 / sizeof(float)) {
        simd::PrefetchLine(scales + i, p_.prefetch.level);
      }
    }
  }

  // kR rows × kWidth keys: Q·Kᵀ from the cache block, mask, online softmax, P·V.
  template <size_t kR>
  void attend_rows(std::int64_t row0, std::int64_t j0, TileKind kind, const Elem* k_tile,
                   const Elem* v_tile) {
    const std::int64_t dim = p_.kv.dim;
    const size_t dv_pad = static_cast<size_t>(p_.kv.dv_pad);
    float* s = scores();
    TilePacing pacing;  // int8 only; none (no far requests) but in the tile's first micro-tile
    bool far = false;
    if constexpr (kQuantized) {
      // The tile's first micro-tile of rows makes its far requests; the others (S_q > 1, or a
      // group above kRows) read the same keys and values and ask for none, as over a float cache.
      far = !far_asked_;
      far_asked_ = true;
      if (far) pacing = tile_pacing<kR>(k_tile, v_tile);
      Int8Scores<kR>(row0, k_tile, s, pacing.key_quads);
    } else {
      MultiplyTile<Ops, kR, kKeyVecs, TileUpdate::kOverwrite, true, Elem>(
          q() + row0 * dim, static_cast<size_t>(dim), k_tile, static_cast<size_t>(kKvBlock),
          static_cast<size_t>(dim), s, static_cast<size_t>(kWidth), nullptr, prefetch_k_, &k_far_);
    }
    if (alibi_ != nullptr) add_alibi(row0, kR, j0, s);
    if (kind == TileKind::kRange) {
      auto rel = [&](std::int64_t j) {  // clamped so the float compare is exact
        return static_cast<float>(std::clamp<std::int64_t>(j - j0, -1, kWidth + 1));
      };
      for (size_t r = 0; r < kR; ++r) {
        const CacheKeyRange range = ranges_[static_cast<size_t>(row0) + r];
        KeepKeyRange<Ops, kKeyVecs>(s + r * kWidth, rel(range.lo), rel(range.hi));
      }
    } else if (kind == TileKind::kEdge) {
      for (size_t r = 0; r < kR; ++r)
        mask_row(row0 + static_cast<std::int64_t>(r), j0, s + r * kWidth);
    }
    if constexpr (kQuantized) {
      PacedLines values = pacing.values;  // a local: kept in registers across the stores
      const bool rescale =
          SoftmaxStep<Ops, kR, kKeyVecs>(s, m() + row0, sum_lanes() + row0 * kLanes, alpha(),
                                         [&] { values.Take(Pacing::kSoftmaxLines); });
      Int8Values<kR>(row0, v_tile, rescale, values, pacing.keys, far);
      pacing.keys.TakeAll();  // none left where P·V's passes outnumber the paced key lines
    } else {
      const bool rescale =
          SoftmaxStep<Ops, kR, kKeyVecs>(s, m() + row0, sum_lanes() + row0 * kLanes, alpha());
      float* acc = o() + row0 * p_.kv.dv_pad;
      if (rescale) {
        MultiplyRowsByValues<Ops, kR, kOutVecs, TileUpdate::kScaleRowsThenAccumulate, true, Elem>(
            s, kWidth, v_tile, dv_pad, kWidth, acc, dv_pad, alpha(), prefetch_v_, &v_far_);
      } else {
        MultiplyRowsByValues<Ops, kR, kOutVecs, TileUpdate::kAccumulate, true, Elem>(
            s, kWidth, v_tile, dv_pad, kWidth, acc, dv_pad, nullptr, prefetch_v_, &v_far_);
      }
    }
  }

  // A micro-tile's paced requests (DecodePrefetch::paced, paced_requests.hpp): the quad rows
  // whose far lines Q·Kᵀ asks for, the value lines the softmax and the weights pass take, the key
  // lines P·V takes. Unpaced, or with the far requests off: the products ask for all their own.
  struct TilePacing {
    size_t key_quads = 0;
    PacedLines values, keys;
  };
  template <size_t kR>
  TilePacing tile_pacing(const Elem* k_tile, const Elem* v_tile) const {
    const auto quads = static_cast<size_t>(p_.kv.key_rows() / kKeyQuad);
    if (!p_.prefetch.paced || !prefetch_k_ || !prefetch_v_) return {quads, {}, {}};
    constexpr size_t kQuadRow = kKeyQuad * kKvBlock;
    const size_t key_quads = Pacing::KeyQuadsInScores(quads);
    const size_t value_bytes = static_cast<size_t>(p_.kv.dv_pad) * kWidth;
    const size_t early = std::min(kR * Pacing::kValueLinesPerRow * 64, value_bytes);
    return {key_quads, PacedLines(v_tile, early, prefetch_v_),
            PacedLines(k_tile + key_quads * kQuadRow, (quads - key_quads) * kQuadRow, prefetch_k_)};
  }

  // The int8 scores of rows [row0, row0 + kR): exact integer dot products, then
  // float(dot) · key scale[t] · query scale[r], in that order on every target.
  template <size_t kR>
  void Int8Scores(std::int64_t row0, const Elem* k_tile, float* s, size_t far_quads) const {
    const auto rows = static_cast<size_t>(p_.kv.key_rows());
    constexpr size_t kQuadRow = kKeyQuad * kKvBlock;  // bytes from one quad of keys to the next
    static_assert(kR <= 6 && QOps::kLanes == kLanes && kWidth == 64,
                  "the VNNI kernels take 1-6 rows of 64 keys");
    if (vnni_) {  // scales the scores itself, by the same rule
      const QuadDotScores out{s, kWidth, k_scales_, q_scale_.data() + row0};
      QuadDot64Avx512Vnni(q8() + static_cast<size_t>(row0) * rows, rows, q_sum_.data() + row0,
                          k_tile, kQuadRow, rows / kKeyQuad, kR, out, prefetch_k_, far_quads);
      return;
    }
    QuadDotTile<QOps, kR, kKeyVecs>(qf() + static_cast<size_t>(row0) * qf_stride(), qf_stride(),
                                    k_tile, kQuadRow, rows / kKeyQuad, s, kWidth, prefetch_k_,
                                    far_quads);
    for (size_t r = 0; r < kR; ++r) {
      const auto qs = Ops::Set(q_scale_[static_cast<size_t>(row0) + r]);
      for (size_t v = 0; v < kKeyVecs; ++v) {
        float* at = s + r * kWidth + v * kLanes;
        Ops::Store(Ops::Mul(Ops::Mul(Ops::Load(at), Ops::Load(k_scales_ + v * kLanes)), qs), at);
      }
    }
  }

  // P·V of rows [row0, row0 + kR) over an int8 value tile in integers: w = p · value scale[t]
  // (padding slots have scale 0), quantised per row to int16 with scale max w / 32767; exact
  // int32 sums; then o = o·alpha + float(sum)·w scale (o + … without a rescale), the same
  // order on every target.
  // `values`: the first value lines' far requests, the weights pass takes them; `keys`: the key
  // lines P·V takes (paced_requests.hpp; both empty unpaced). `far`: P·V asks for the value
  // lines `values` left (false: the tile's first micro-tile made its far requests).
  template <size_t kR>
  void Int8Values(std::int64_t row0, const Elem* v_tile, bool rescale, PacedLines values,
                  PacedLines& keys, bool far) {
    float* s = scores();
    const auto dv_pad = static_cast<size_t>(p_.kv.dv_pad);
    std::array<float, kR> w_scale, unit;
    for (size_t r = 0; r < kR; ++r)
      w_scale[r] = Int8Weights(s + r * kWidth, w16_.data() + r * kWidth, unit[r], values);
    constexpr size_t kPair = 2;  // keys per 16-bit lane of a value block
    // P·V asks for the value lines from the pair holding the first byte the passes before it did
    // not ask for (its earlier lines, if any, they did), so every line is asked for once or twice.
    const size_t values_from = far ? values.taken_bytes() / (kPair * dv_pad) : kWidth / kPair;
    const PairRequests requests{prefetch_v_, values_from, keys};
    float* acc = o() + static_cast<size_t>(row0) * dv_pad;
    if (vnni_) {  // adds to O itself, by the same rule
      const PairDotUpdate update{acc, dv_pad, w_scale.data(), unit.data(),
                                 rescale ? alpha() : nullptr};
      PairDotAvx512Vnni(w16_.data(), kWidth, v_tile, kPair * dv_pad, kWidth / kPair, kR, dv_pad,
                        update, requests);
      return;
    }
    float* pv = scratch_ + layout_.pv;
    PairDotTile<POps, kR>(w16_.data(), kWidth, v_tile, kPair * dv_pad, kWidth / kPair, dv_pad, pv,
                          dv_pad, requests);
    for (size_t r = 0; r < kR; ++r) {
      const auto scale = Ops::Set(w_scale[r]), a = Ops::Set(alpha()[r]), u = Ops::Set(unit[r]);
      for (size_t c = 0; c < dv_pad; c += kLanes) {
        float* at = acc + r * dv_pad + c;
        const auto t = Ops::Mul(Ops::Mul(Ops::Load(pv + r * dv_pad + c), scale), u);
        Ops::Store(rescale ? Ops::MulAdd(Ops::Load(at), a, t) : Ops::Add(Ops::Load(at), t), at);
      }
    }
  }

  // One row of a tile's probabilities times the values' scales, quantised to int16 in w16
  // (asking for `values`' far lines as it goes); returns the weights' scale (max / 32767; 0 for
  // a row of zeros; NaN if one is NaN, so the output is NaN as over a float cache, the int16
  // weights then being meaningless). A row whose largest weight is below 2^-60 is first multiplied
  // by 2^64 (exact), so 32767 / max stays finite and the scale stays normal; `unit` (2^-64, else 1)
  // undoes it after the sums.
  float Int8Weights(float* row, std::int16_t* w16, float& unit, PacedLines& values) const {
    auto top = Ops::Zero(), total = Ops::Zero();  // the sum carries a NaN, which Max may drop
    for (size_t v = 0; v < kKeyVecs; ++v) {
      values.Take(Pacing::kWeightLines);
      const auto w = Ops::Mul(Ops::Load(row + v * kLanes), Ops::Load(v_scales_ + v * kLanes));
      Ops::Store(w, row + v * kLanes);
      top = Ops::Max(top, w);
      total = Ops::Add(total, w);
    }
    unit = 1.0f;
    if (std::isnan(Ops::ReduceSum(total))) return std::numeric_limits<float>::quiet_NaN();
    float max = Ops::ReduceMax(top);
    if (max > 0.0f && max < 0x1p-60f) {
      for (size_t v = 0; v < kKeyVecs; ++v) {
        Ops::Store(Ops::Mul(Ops::Load(row + v * kLanes), Ops::Set(0x1p64f)), row + v * kLanes);
      }
      max *= 0x1p64f;
      unit = 0x1p-64f;
    }
    const float mul = max > 0.0f ? 32767.0f / max : 0.0f;
    for (size_t v = 0; v < kKeyVecs; ++v)
      POps::QuantizeWeights(row + v * kLanes, mul, w16 + v * kLanes);
    return max / 32767.0f;
  }

  // ALiBi on rows [row0, row0 + rows) of the tile's scores, before the mask.
  void add_alibi(std::int64_t row0, size_t rows, std::int64_t j0, float* s) const {
    for (size_t r = 0; r < rows; ++r) {
      const std::int64_t row = r0_ + row0 + static_cast<std::int64_t>(r);
      const std::int64_t h = hk_ * p_.group + row % p_.group;
      const float slope = alibi_->alibi_slopes[static_cast<size_t>(h)] * kLog2e;
      const auto rel = static_cast<float>(j0 - position(row0 + static_cast<std::int64_t>(r)));
      if (alibi_->alibi_symmetric) {
        AddDistanceBias<Ops, kKeyVecs, true>(s + r * kWidth, slope, rel);
      } else {
        AddDistanceBias<Ops, kKeyVecs, false>(s + r * kWidth, slope, rel);
      }
    }
  }

  // The exact rule for a tile holding a global key: the row's range, or a global key of this
  // chunk that is stored and (causal) not in the row's future.
  void mask_row(std::int64_t r, std::int64_t j0, float* s) const {
    const CacheKeyRange range = ranges_[static_cast<size_t>(r)];
    const std::int64_t pos = position(r);
    for (std::int64_t t = 0; t < kWidth; ++t) {
      const std::int64_t j = j0 + t;
      bool visible = j >= range.lo && j < range.hi;
      if (!visible && j >= k0_ && j < k1_ && p_.is_global(j)) {
        visible = SeesGlobalKey(p_, b_, pos, j);
      }
      if (!visible) s[t] = -std::numeric_limits<float>::infinity();
    }
  }

  using RowsFn = void (CacheWorker::*)(std::int64_t, std::int64_t, TileKind, const Elem*,
                                       const Elem*);
  template <size_t... kIs>
  static constexpr std::array<RowsFn, sizeof...(kIs)> RowsTable(std::index_sequence<kIs...>) {
    return {(kIs == 0 ? nullptr : &CacheWorker::attend_rows<(kIs == 0 ? 1 : kIs)>)...};
  }
  // kRemainder[n]: the n-row micro-tile, n in [1, kRows).
  static constexpr std::array<RowsFn, kRows> kRemainder =
      RowsTable(std::make_index_sequence<kRows>{});

  const CacheProblem& p_;
  CacheScratchLayout layout_;
  float* scratch_;
  std::int64_t b_ = 0, hk_ = 0, r0_ = 0, n_ = 0, k0_ = 0, k1_ = 0;
  simd::Prefetch prefetch_k_, prefetch_v_;  // the run's requests; offsets set per tile
  const std::int64_t far_keys_;             // keys from a tile to the one its far requests ask for
  simd::OrderedLines k_far_, v_far_;        // float and half: the tile's far requests
  const float* k_scales_ = nullptr;         // int8: the current tile's scales
  const float* v_scales_ = nullptr;
  bool far_asked_ = false;  // int8: the current tile's far requests were made
  std::array<CacheKeyRange, kCacheRowTile> ranges_{};
  const RopeTables* rope_;
  const PositionalTables* alibi_;  // null without ALiBi
  std::int64_t angles_position_ = 0;
  std::array<std::int64_t, 4> prepared_rows_{-1, -1, -1, -1};  // (b, hk, r0, n) of q(), q8(), qf()
  bool vnni_;
  std::array<float, kCacheRowTile> q_scale_{};  // int8: each query row's scale and sum
  std::array<std::int32_t, kCacheRowTile> q_sum_{};
  std::array<std::int16_t, CacheScratchLayout::kMaxRows * kKvBlock> w16_{};  // int8: P as int16
};
