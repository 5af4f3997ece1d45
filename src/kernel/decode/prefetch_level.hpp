// What the decode kernel's software prefetches ask for, per CPU: which cache the requests for
// the next blocks fill, and whether its passes also ask for rows a little further on into L1.
// One row of measurements per core, as a BLIS blocking table is per target. The choice never
// changes a result, only how fast a step streams the cache from DRAM.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "src/runtime/cpu_features.hpp"
#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

// The environment variable that overrides the table: "l1" or "l2", optionally followed by
// "+far<N>" (N in 64, 128, 256, 512, 1024: DecodePrefetch::far_row_bytes), then by "+near<N>"
// (N in 1..64: the near requests of simd::Prefetch, N rows on), then by "+paced"
// (DecodePrefetch::paced); "auto" or empty is unset. Read at the first decode run and kept for
// the process (a later setenv changes nothing).
inline constexpr const char* kDecodePrefetchEnv = "SEQATTN_DECODE_PREFETCH";

// What a decode run asks for ahead: the far requests' cache (the next blocks), how many rows
// on its passes ask for into L1 (0: none), whether an int8 tile's far requests are paced over
// its four passes (paced_requests.hpp) instead of riding on the two products, and how far on
// the far requests reach: far_row_bytes bytes of each key row (a block's row of 64 keys is 256
// bytes of f32, 128 of bf16 or f16, 64 of int8), so 256 asks for the same row 1 block on over
// an f32 cache, 2 over a 16-bit one and 4 over int8; at least one block (far_blocks).
struct DecodePrefetch {
  static constexpr std::uint16_t kFarRowBytes = 256;  // the table's distance but on Zen 3
  simd::CacheLevel level = simd::CacheLevel::kL2;
  std::uint8_t near_rows = 0;  // 0..64
  bool paced = false;
  std::uint16_t far_row_bytes = kFarRowBytes;  // 64, 128, 256, 512 or 1024
  bool operator==(const DecodePrefetch&) const = default;
  // Blocks between a block and the one its far requests ask for, over a cache of
  // `element_bytes`-byte elements: far_row_bytes over a 64-key row's bytes, at least 1.
  std::int64_t far_blocks(std::size_t element_bytes) const {
    const std::size_t row = 64 * element_bytes;
    return far_row_bytes > row ? static_cast<std::int64_t>(far_row_bytes / row) : 1;
  }
};

// The rule: `setting` is the variable's value (null when unset); anything but the grammar above
// is an Error naming the variable. Unset: AMD family 26 (Zen 5) takes l1; AMD family 25 without
// AVX-512 (Zen 3; Zen 4 has it) l2+far128; Intel with AVX-512 (the measured class: one Xeon)
// l2+near16+paced; every other CPU l2.
DecodePrefetch choose_decode_prefetch(const char* setting, const CpuFeatures& cpu);

// "l1", "l2", "l2+far128", "l2+near16+paced", …: RunRecord::decode_prefetch, and what
// SEQATTN_DECODE_PREFETCH takes.
std::string to_string(const DecodePrefetch& prefetch);

// This process's choice (the rule over this CPU and the environment, decided at first use; a bad
// value throws at every call and nothing is remembered), and its name (to_string, kept for the
// process, so a record can view it).
DecodePrefetch decode_prefetch();
std::string_view decode_prefetch_name();

}  // namespace seqattn::detail
