#include "src/kernel/decode/prefetch_level.hpp"

#include <bit>
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
// The far distance (DecodePrefetch::far_row_bytes): 256 bytes of each key row everywhere (the
// distance of cache_worker-inl.h's figures) but Zen 3 (AMD EPYC family 25 model 1, no AVX-512,
// highway:AVX2, far requests into L2), where 128 was faster for bf16 and int8 alike. Measured
// with the distance alternating run by run in one process (a temporary switch; `seqattn bench
// --heads 32 --kv-heads 8 --dim 128 --seq-q 1 --seq 32768 --repeat 30`, two processes, 30
// pairs; the paged bench 32 × 512..8192, two threads, 20 pairs), medians 256 → 128:
//  - bf16 (1 block ahead instead of 2): one thread 21.06 → 18.52 ms, faster in 27 of 30 pairs;
//    two threads 11.56 → 10.36 ms, 27 of 30; paged 57.72 → 54.02 ms, 17 of 20.
//  - int8 (2 blocks instead of 4): one thread 12.03 → 11.04 ms, 25 of 30; two threads 6.25 →
//    5.89 ms, 24 of 30; paged 25.32 → 23.53 ms, 15 of 20. One block (64): 11.93 → 11.65 ms, 22
//    of 30; three blocks against four even (17 of 30); bf16 three blocks against two even (14).
// That was a busy hour of the host; in a quiet one one thread was even (bf16 14.75 → 14.98 ms,
// 14 of 30; int8 7.71 → 7.64, 16 of 30) and the paged bench still faster (39.51 → 36.34 ms, 16
// of 20): docs/architecture.md, "Far distance".
// A stand-alone loop with the bf16 step's arithmetic and requests (16 KiB of K then of V per
// block; no softmax) agreed: 1 and 2 blocks 13.7-14.0 ms, 4 blocks 17.6, 8 blocks 23.5.
// Not measured on Zen 4 (family 25 with AVX-512), which keeps 256.
//
// The paced requests (Intel with AVX-512, int8 caches): the same Xeon, the table's choice against
// SEQATTN_DECODE_PREFETCH=l2+near16 (one binary, alternating run by run; S_k 131072, one thread,
// medians of 5): 25.89 → 24.04 ms (paced_requests.hpp; docs/architecture.md, "Paced
// requests", has the rest). Not measured elsewhere, so every other row leaves them off.
namespace {

// Takes `prefix` and the decimal number after it off the front of `rest` into `number`; false
// for the prefix without a number or with one spelt with a leading zero. Without the prefix,
// `rest` stays and `number` is 0 (no number this grammar takes is 0).
bool take_number(std::string_view& rest, std::string_view prefix, unsigned& number) {
  number = 0;
  if (!rest.starts_with(prefix)) return true;
  rest.remove_prefix(prefix.size());
  const auto [end, error] = std::from_chars(rest.data(), rest.data() + rest.size(), number);
  if (error != std::errc() || rest.front() == '0') return false;
  rest.remove_prefix(static_cast<std::size_t>(end - rest.data()));
  return true;
}

// The grammar of kDecodePrefetchEnv; nullopt for anything else.
std::optional<DecodePrefetch> parse_decode_prefetch(std::string_view value) {
  const std::string_view level = value.substr(0, 2);
  if (level != "l1" && level != "l2") return std::nullopt;
  DecodePrefetch p{level == "l1" ? simd::CacheLevel::kL1 : simd::CacheLevel::kL2, 0, false};
  std::string_view rest = value.substr(2);
  unsigned far_bytes = 0, near_rows = 0;
  if (!take_number(rest, "+far", far_bytes) || !take_number(rest, "+near", near_rows)) {
    return std::nullopt;
  }
  if (far_bytes != 0) {  // a power of two from 64 to 1024
    if (!std::has_single_bit(far_bytes) || far_bytes < 64 || far_bytes > 1024) return std::nullopt;
    p.far_row_bytes = static_cast<std::uint16_t>(far_bytes);
  }
  if (near_rows > 64) return std::nullopt;
  p.near_rows = static_cast<std::uint8_t>(near_rows);
  if (rest == "+paced") {
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
                "l1 or l2, optionally +far<N> with N in 64, 128, 256, 512, 1024, then "
                "optionally +near<N> with N in 1..64, then optionally +paced (l2+near16+paced, "
                "l2+far128), auto or unset",
                "'" + std::string(value) + "'",
                "unset it (or auto) to take this CPU's measured choice, or set one of those");
  }
  if (cpu.vendor == CpuVendor::kAmd && cpu.family == 26) return {simd::CacheLevel::kL1, 0, false};
  if (cpu.vendor == CpuVendor::kAmd && cpu.family == 25 && !cpu.avx512f) {
    return {simd::CacheLevel::kL2, 0, false, 128};
  }
  if (cpu.vendor == CpuVendor::kIntel && cpu.avx512f) return {simd::CacheLevel::kL2, 16, true};
  return {simd::CacheLevel::kL2, 0, false};
}

std::string to_string(const DecodePrefetch& prefetch) {
  std::string name = prefetch.level == simd::CacheLevel::kL1 ? "l1" : "l2";
  if (prefetch.far_row_bytes != DecodePrefetch::kFarRowBytes) {
    name += "+far" + std::to_string(prefetch.far_row_bytes);
  }
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
