// Runtime choice of the xsimd arch (xsimd build only): the kernels are compiled once per arch
// in their own translation units, and this picks the best one the CPU supports, or a lower
// one a test forces.
#pragma once

#include <optional>
#include <vector>

namespace seqattn::simd {

// Compiled xsimd archs, worst to best.
enum class XsimdArch { kSse4_2, kAvx2Fma, kAvx512f };

// The arch the kernels run on: the best compiled arch the CPU supports, unless a test
// restricted it with force_xsimd_arch_for_test.
XsimdArch current_xsimd_arch();

// "sse4_2", "fma3<avx2>" or "avx512f" (xsimd's own names).
const char* xsimd_arch_name(XsimdArch arch);

// Compiled archs the CPU supports, worst to best: the set a test should iterate.
std::vector<XsimdArch> supported_xsimd_archs();

// Runs the kernels on `arch` (which must be supported) until reset with std::nullopt.
void force_xsimd_arch_for_test(std::optional<XsimdArch> arch);

}  // namespace seqattn::simd
