#include "src/kernel/decode/prefetch_level.hpp"

#include <charconv>
#include <cstdlib>
#include <optional>
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
//
// The near requests (Intel with AVX-512, 16 rows): measured on one Xeon (a 480 MiB L3, family 6
// model 167, highway:AVX3_DL, far requests into L2), builds without and with them alternating
// run by run (docs/architecture.md, "Near requests", has every figure). S_k 131072, one
// thread, medians of 6: bf16 47.1 → 44.9 ms, int8 25.6 → 24.2; the paged bench, two threads:
// bf16 76% → 81-82% of its read probe, int8 72-74% → 77-80%. 8 to 32 rows measured alike.
// Not measured on other Intel cores (AVX2 clients keep l2) nor on AMD: Zen 5's far requests
// already fill L1, Zen 3/4 keep the table's L2 alone.
//
// The paced requests (Intel with AVX-512, int8 caches): the same Xeon, the table's choice against
// SEQATTN_DECODE_PREFETCH=l2+near16 (one binary, alternating run by run; S_k 131072, one thread,
// medians of 5): 25.89 → 24.04 ms (paced_requests.hpp; docs/architecture.md, "Paced
// requests", has the rest). Not measured elsewhere, so every other row leaves them off.
namespace {

// The grammar of kDecodePrefetchEnv; nullopt for anything else.
std::optional<DecodePrefetch> parse_decode_prefetch(std::string_view value) {
  const std::string_view level = value.substr(0, 2);
  if (level != "l1" && level != "l2") return std::nullopt;
  DecodePrefetch p{level == "l1" ? simd::CacheLevel::kL1 : simd::CacheLevel::kL2, 0, false};
  std::string_view rest = value.substr(2);
  constexpr std::string_view kNear = "+near", kPaced = "+paced";
  if (rest.starts_with(kNear)) {
    rest.remove_prefix(kNear.size());
    unsigned rows = 0;
    const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), rows);
    if (error != std::errc() || rest.front() == '0' || rows < 1 || rows > 64) return std::nullopt;
    p.near_rows = static_cast<std::uint8_t>(rows);
    rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  }
  if (rest == kPaced) {
    p.paced = true;
    rest = {};
  }
  if (!rest.empty()) return std::nullopt;
  return p;
}

}  // namespace

DecodePrefetch choose_decode_prefetch(const char* setting, const CpuFeatures& cpu) {
  const std::string_view value = setting == nullptr ? "" : setting;
  if (!value.empty() && value != "auto") {
    if (const std::optional<DecodePrefetch> set = parse_decode_prefetch(value)) return *set;
    throw Error(ErrorKind::kInvalidArgument, kDecodePrefetchEnv,
                "l1 or l2, optionally +near<N> with N in 1..64, then optionally +paced "
                "(l2+near16+paced), auto or unset",
                "'" + std::string(value) + "'",
                "unset it (or auto) to take this CPU's measured choice, or set one of those");
  }
  if (cpu.vendor == CpuVendor::kAmd && cpu.family == 26) return {simd::CacheLevel::kL1, 0, false};
  if (cpu.vendor == CpuVendor::kIntel && cpu.avx512f) return {simd::CacheLevel::kL2, 16, true};
  return {simd::CacheLevel::kL2, 0, false};
}

std::string to_string(const DecodePrefetch& prefetch) {
  std::string name = prefetch.level == simd::CacheLevel::kL1 ? "l1" : "l2";
  if (prefetch.near_rows != 0) name += "+near" + std::to_string(prefetch.near_rows);
  if (prefetch.paced) name += "+paced";
  return name;
}

DecodePrefetch decode_prefetch() {
  // Once: a decode step must not take the environment's lock, and the choice is the process's.
  static const DecodePrefetch prefetch =
      choose_decode_prefetch(std::getenv(kDecodePrefetchEnv), cpu_features());
  return prefetch;
}

std::string_view decode_prefetch_name() {
  static const std::string name = to_string(decode_prefetch());
  return name;
}

}  // namespace seqattn::detail
