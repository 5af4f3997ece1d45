// The decode kernel's driver, written once over the per-target CacheWorker: work items
// (batch, kv head, row tile, chunk), threads, and the split-KV merge. Included by the
// per-target shells cache_attention.cpp (f32 and int8 caches) and cache_attention_half.cpp
// (bf16 and f16 caches), inside their target namespace after cache_worker-inl.h: one
// translation unit per pair of cache dtypes, so that the two halves compile in parallel
// (one unit took 2 min under the sanitizers, the longest of the build).
//
// No include guard and no namespace, like the other -inl bodies of a foreach_target shell.

// Combines the chunks of one row tile in chunk order (fixed, so bitwise reproducible):
// O = Σ_c O_c·2^(m_c - M), l = Σ_c l_c·2^(m_c - M), M = max_c m_c.
template <class Worker>
void MergeChunks(const CacheProblem& p, Worker& worker, const float* partials, std::int64_t chunks,
                 std::int64_t rows, float* acc) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  const std::int64_t dv_pad = p.kv.dv_pad;
  const CachePartialLayout part(p.split.row_tile, dv_pad);
  for (std::int64_t r = 0; r < rows; ++r) {
    float max = kNegInf;
    for (std::int64_t c = 0; c < chunks; ++c)
      max = std::max(max, partials[c * part.total + part.max + r]);
    float sum = 0.0f;
    std::fill(acc, acc + dv_pad, 0.0f);
    for (std::int64_t c = 0; c < chunks && max != kNegInf; ++c) {
      const float* chunk = partials + c * part.total;
      if (chunk[part.max + r] == kNegInf) continue;  // the chunk saw no key of this row
      const float w = std::exp2(chunk[part.max + r] - max);
      sum += w * chunk[part.sum + r];
      for (std::int64_t d = 0; d < dv_pad; ++d)
        acc[static_cast<size_t>(d)] += w * chunk[r * dv_pad + d];
    }
    worker.store_row(r, acc, max, sum);
  }
}

// Whether an int8 cache's products run on vpdpbusd / vpdpwssd: on a target at least AVX3_DL
// (Ice Lake, Zen 4 and later; Highway's later AVX3_ZEN4 and AVX3_SPR too) of a CPU and OS with
// AVX512-VNNI. The AVX3 target keeps the portable micro-kernels, so on a VNNI machine the tests
// compare both.
template <class Elem>
bool UseVnni() {
  if constexpr (std::is_same_v<Elem, std::int8_t> && HWY_TARGET <= HWY_AVX3_DL) {
    const CpuFeatures& cpu = cpu_features();
    return cpu.avx512_vnni && cpu.os_avx512;
  } else {
    return false;
  }
}

// Chunks a thread takes at a time: a run of a tile's consecutive chunks, the live ones (those
// below the longest sequence's length, ChunksOf) shared out over the team, not one at a time:
// visit_tile prefetches 1-4 blocks ahead (the table's distance) into this core's caches, so a chunk
// after one that ran on the other core starts on cold blocks (2 of a 512-key chunk's 8 of a bf16
// cache, 4 of an int8 one). At S_k 32768 (B 1, H 32, H_kv 8, D 128, two Zen 5 threads, alternating
// rounds) one chunk a grab read 35.5-36.0 GB/s (bf16) and 28.4-29.3 (i8); runs of 33 chunks
// 44.5-48.8 and 41.8-41.9. Past the live chunks items return at once, so a run counted from the
// capacity would leave a short sequence's work to one thread.
inline int ChunkRun(const CacheProblem& p, int team) {
  if (p.split.chunk_keys == 0) return 1;  // an item is a whole tile
  std::int64_t live = 1;
  for (std::int64_t b = 0; b < p.kv.batch; ++b) live = std::max(live, ChunksOf(p, b));
  return static_cast<int>((live + team - 1) / team);
}

// Work items are (batch, kv head, row tile, chunk); every output row is written by one thread
// (directly, or by the merge of its tile's chunks in chunk order).
template <class Ops, class Elem>
void CacheAttention(const CacheProblem& p, float* workspace) {
  const CacheSplit& split = p.split;
  const bool vnni = UseVnni<Elem>();
  const bool merge = split.chunk_keys != 0;
  const std::int64_t tiles = p.kv.batch * p.kv.heads_kv * split.row_tiles;
  const std::int64_t items = tiles * split.chunks;
  const CacheScratchLayout layout(split.row_tile, p.kv.dim, p.kv.dv_pad);
  const CachePartialLayout part(split.row_tile, p.kv.dv_pad);
  float* partials = workspace + p.threads * layout.total;
  // The (b, hk, first row, rows) of a tile: sequence b has group · S_q(b) rows per kv head, so
  // a tile past a ragged sequence's rows has none (n <= 0).
  auto tile_rows = [&](std::int64_t tile, std::int64_t& b, std::int64_t& hk, std::int64_t& r0) {
    const std::int64_t pair = tile / split.row_tiles;
    b = pair / p.kv.heads_kv;
    hk = pair % p.kv.heads_kv;
    r0 = tile % split.row_tiles * split.row_tile;
    return std::min(split.row_tile, p.group * p.seq_q(b) - r0);
  };
  auto item = [&](CacheWorker<Ops, Elem>& worker, std::int64_t it) {
    const std::int64_t tile = it / split.chunks, c = it % split.chunks;
    std::int64_t b, hk, r0;
    const std::int64_t n = tile_rows(tile, b, hk, r0);
    if (n <= 0 || c >= ChunksOf(p, b)) return;  // past the sequence's rows or keys
    const CacheKeyRange keys = KeysOfChunk(p, b, c);
    worker.run(b, hk, r0, n, keys.lo, keys.hi);
    if (merge) {
      worker.store_partial(partials + it * part.total);
    } else {
      worker.store_out();
    }
  };
  // `thread`'s output accumulator region is free once its items are done (the workspace is
  // the caller's: a run allocates nothing). The index is passed, not asked of OpenMP: the
  // one-thread path runs outside our region, maybe inside a caller's, where
  // omp_get_thread_num() is the caller's thread number, not 0.
  auto merge_tile = [&](CacheWorker<Ops, Elem>& worker, int thread, std::int64_t tile) {
    float* acc = workspace + thread * layout.total + layout.o;
    std::int64_t b, hk, r0;
    const std::int64_t n = tile_rows(tile, b, hk, r0);
    if (n <= 0) return;
    worker.bind_rows(b, hk, r0, n);
    MergeChunks(p, worker, partials + tile * split.chunks * part.total, ChunksOf(p, b), n, acc);
  };
  // One thread runs plain loops outside any OpenMP construct: libgomp allocates a team for
  // every parallel region it enters (an if(false) one too) and a work share for an orphaned
  // loop, and a decode step must not allocate.
  const int team = static_cast<int>(std::min<std::int64_t>(p.threads, items));
  if (team <= 1) {
    CacheWorker<Ops, Elem> worker(p, workspace, vnni);
    for (std::int64_t it = 0; it < items; ++it) item(worker, it);
    if (merge) {
      for (std::int64_t tile = 0; tile < tiles; ++tile) merge_tile(worker, 0, tile);
    }
    return;
  }
  const int grab = ChunkRun(p, team);
#pragma omp parallel num_threads(team)
  {
    const int thread = omp_get_thread_num();
    CacheWorker<Ops, Elem> worker(p, workspace + thread * layout.total, vnni);
#pragma omp for schedule(dynamic, grab)
    for (std::int64_t it = 0; it < items; ++it) item(worker, it);
    if (merge) {
#pragma omp for schedule(static)
      for (std::int64_t tile = 0; tile < tiles; ++tile) merge_tile(worker, thread, tile);
    }
  }
}
