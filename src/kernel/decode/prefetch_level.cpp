#include "src/kernel/decode/prefetch_level.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

#include "seqattn/error.hpp"

namespace seqattn::detail {

// Measured with the prefetch distance of cache_worker-inl.h, the levels alternating (run by run
// in one process, or process by process), so a busy moment of the shared host slows both; each
// arrow goes from the other level to the chosen one:
//  - Zen 5 (AMD EPYC family 26 model 2, highway:AVX3_DL; seqattn bench --heads 32 --kv-heads 8
//    --dim 128 --seq 32768 --seq-q 1): L1 faster in every pair. One thread, eight pairs: bf16
//    5-14% (7.48 → 6.47 ms, 7.71 → 7.09), int8 1-5% (6.10 → 5.87, 4.06 → 3.89); two threads:
//    bf16 4.30 → 3.84 and 4.68 → 4.35 ms; the paged bench (32 × 512..8192, bf16, two
//    threads) 19.14 → 17.93 and 21.59 → 20.58 ms.
//  - Zen 4 (family 25): L2. L1 requests each held one of the core's few miss buffers until the
//    line came: one thread's bf16 step at S_k 32768 took 12.5 ms, 6.3-6.5 ms into L2.
//  - Zen 3 (family 25 model 1, highway:AVX2): mixed within the host's swings, its decode being
//    compute-bound, so L2 as for the family (the same bench, one thread, two runs per level,
//    L1 then L2: bf16 14.9 and 14.9 ms against 17.7 and 15.4; int8 12.6 and 8.4 against 11.8
//    and 8.2; the paged bench, two threads: 33.6 and 36.4 against 34.3 and 34.1 ms).
//  - Intel (a Sapphire-Rapids-class Xeon with AMX, family 6, highway:AVX3_DL; the same bench,
//    level by level in alternating processes, three pairs each, medians): L2 faster in 22 of
//    24 pairs (the two others: bf16 two threads at S_k 32768, one pair even; int8 two threads,
//    one pair the other way). S_k 32768 (128 MiB of bf16 K+V), one thread: bf16 12.0 → 9.3
//    ms, int8 3.7 → 3.4; two threads: bf16 4.3 → 3.4, int8 even (1.76-1.86 ms). S_k 131072
//    (512 MiB): one thread bf16 51.7 → 45.5 ms, int8 28.0 → 24.5; two threads bf16 26.1 →
//    23.0, int8 14.0 → 12.0. The paged bench, two threads, two runs of each level: 27.4 and
//    27.0 → 25.0 and 24.0 ms.
simd::CacheLevel choose_decode_prefetch_level(const char* setting, const CpuFeatures& cpu) {
  const std::string_view value = setting == nullptr ? "" : setting;
  if (value == "l1") return simd::CacheLevel::kL1;
  if (value == "l2") return simd::CacheLevel::kL2;
  if (!value.empty() && value != "auto") {
    throw Error(ErrorKind::kInvalidArgument, kDecodePrefetchEnv, "l1, l2, auto or unset",
                "'" + std::string(value) + "'",
                "unset it (or auto) to take this CPU's measured level, or set l1 or l2");
  }
  const bool zen5 = cpu.vendor == CpuVendor::kAmd && cpu.family == 26;
  return zen5 ? simd::CacheLevel::kL1 : simd::CacheLevel::kL2;
}

std::string_view to_string(simd::CacheLevel level) {
  return level == simd::CacheLevel::kL1 ? "l1" : "l2";
}

simd::CacheLevel decode_prefetch_level() {
  // Once: a decode step must not take the environment's lock, and the level is the process's.
  static const simd::CacheLevel level =
      choose_decode_prefetch_level(std::getenv(kDecodePrefetchEnv), cpu_features());
  return level;
}

}  // namespace seqattn::detail
