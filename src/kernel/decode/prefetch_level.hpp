// Which cache the decode kernel's software prefetches fill, per CPU: one row of measurements
// per core, as a BLIS blocking table is per target. The level never changes a result, only how
// fast a step streams the cache from DRAM.
#pragma once

#include <string_view>

#include "src/runtime/cpu_features.hpp"
#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

// The environment variable that overrides the table: "l1" or "l2"; "auto" or empty is unset.
// Read at the first decode run and kept for the process (a later setenv changes nothing).
inline constexpr const char* kDecodePrefetchEnv = "SEQATTN_DECODE_PREFETCH";

// The rule: `setting` is the variable's value (null when unset); anything but l1, l2, auto or
// empty is an Error naming the variable. Unset, AMD family 26 (Zen 5) takes L1, every other
// CPU L2.
simd::CacheLevel choose_decode_prefetch_level(const char* setting, const CpuFeatures& cpu);

// "l1" or "l2": RunRecord::decode_prefetch, and what SEQATTN_DECODE_PREFETCH takes.
std::string_view to_string(simd::CacheLevel level);

// This process's level (the rule over this CPU and the environment, decided at first use; a bad
// value throws at every call and nothing is remembered).
simd::CacheLevel decode_prefetch_level();

}  // namespace seqattn::detail
