// One pair thread's buffers for LSH attention's rounds (lsh_rounds.cpp), carved from the run's
// scratch: the caller's workspace or the run's one allocation. Sized for the longest sequence
// (S), whatever the key lengths, so a plan's count serves every run. Left uninitialised: each
// round writes what it reads (the accumulators are reset per pair).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>

#include "src/core/problem.hpp"
#include "src/gemm/gemm.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/runtime/checked_size.hpp"
#include "variants/lsh/lsh_rounds.hpp"

namespace seqattn::detail {

// Rows hashed per GEMM: the block and its M scores stay in L1/L2.
inline constexpr std::int64_t kLshHashRows = 128;
// Query slots per kernel call: the call's gathered rows, keys, values and outputs (about
// 4 · 2048 · 64 floats at D = 64) stay in L2, and a call's fixed cost (packing set-up, the
// thread team) is small beside its 2048 · 2c · (D + D_v) multiply-adds.
inline constexpr std::int64_t kLshSegmentRows = 2048;

// The query slots of one kernel call at most: whole chunks, at least one.
inline std::int64_t lsh_segment_chunks(std::int64_t chunk) {
  return std::max<std::int64_t>(1, kLshSegmentRows / chunk);
}

struct LshScratch {
  Carved<float> hash_block, hash_scores;  // per thread of the pair's team
  Carved<float> hash_pack;  // per thread: the hashing GEMM's packing (hash_pack_floats each)
  std::size_t hash_pack_floats = 0;
  Carved<float> inv_rms;                            // [S] (shared keys)
  Carved<std::int32_t> query_buckets, key_buckets;  // [group][hashes][S], [hashes][S]
  Carved<std::int32_t> query_order, key_order;      // [group][S], [S]
  Carved<std::int32_t> counts;                      // [buckets + 1]
  Carved<float> acc_out, acc_lse;                   // [group][S][D_v], [group][S]
  Carved<std::int32_t> self_rounds;                 // [group][S]
  // The segment handed to the kernel: rows [group][seg], keys [keys].
  Carved<float> q, k, v, out, lse;
  Carved<std::int32_t> query_pos, key_pos;
  Carved<std::uint8_t> nonfinite_flag;  // per gathered key: its value is not finite
  Carved<std::int64_t> nonfinite;       // those keys, the first nonfinite_count of them
  std::int64_t nonfinite_count = 0;
  Carved<std::byte> flash;  // the segment calls' kernel workspace (empty: they allocate)

  // threads: the pair's team (1 when pairs run in parallel).
  LshScratch(const Problem& p, const LshConfig& c, int threads, std::size_t flash_bytes,
             ScratchArena& arena) {
    const std::int64_t s = p.seq_q(), dim = p.dim(), dv = p.dim_v();
    const std::int64_t group = c.shared ? 1 : p.group();
    const std::int64_t seg = std::min(s, lsh_segment_chunks(c.chunk) * c.chunk);
    const std::int64_t keys = std::min(c.chunk, s) + seg;
    const char* what = "LSH attention's scratch";
    hash_block = Carved<float>(arena, checked_product({threads, kLshHashRows, dim}, what));
    hash_scores =
        Carved<float>(arena, checked_product({threads, kLshHashRows, c.buckets / 2}, what));
    hash_pack_floats = sgemm_pack_floats(kLshHashRows, c.buckets / 2, dim);
    hash_pack = Carved<float>(
        arena, checked_product({threads, static_cast<std::int64_t>(hash_pack_floats)}, what));
    inv_rms = Carved<float>(arena, c.shared ? s : 0);
    query_buckets = Carved<std::int32_t>(arena, checked_product({group, c.hashes, s}, what));
    key_buckets = Carved<std::int32_t>(arena, c.shared ? 0 : checked_product({c.hashes, s}, what));
    query_order = Carved<std::int32_t>(arena, checked_product({group, s}, what));
    key_order = Carved<std::int32_t>(arena, s);
    counts = Carved<std::int32_t>(arena, c.buckets + 1);
    acc_out = Carved<float>(arena, checked_product({group, s, dv}, what));
    acc_lse = Carved<float>(arena, group * s);
    self_rounds = Carved<std::int32_t>(arena, group * s);
    q = Carved<float>(arena, checked_product({group, seg, dim}, what));
    k = Carved<float>(arena, checked_product({keys, dim}, what));
    v = Carved<float>(arena, checked_product({keys, dv}, what));
    out = Carved<float>(arena, checked_product({group, std::max<std::int64_t>(seg, 1), dv}, what));
    lse = Carved<float>(arena, group * seg);
    query_pos = Carved<std::int32_t>(arena, group * seg);
    key_pos = Carved<std::int32_t>(arena, keys);
    nonfinite_flag = Carved<std::uint8_t>(arena, keys);
    nonfinite = Carved<std::int64_t>(arena, keys);
    flash = Carved<std::byte>(arena, static_cast<std::int64_t>(flash_bytes));
  }
  std::span<std::byte> flash_workspace() const { return {flash.data(), flash.size()}; }
};

}  // namespace seqattn::detail
