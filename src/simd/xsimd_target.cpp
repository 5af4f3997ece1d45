// The xsimd backend's arch selection and simd_target(). Compiled for the baseline ISA: only
// the per-arch kernel translation units get -m flags.
#include <xsimd/xsimd.hpp>

#include <atomic>
#include <string>

#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "src/simd/highway_target.hpp"
#include "src/simd/xsimd_dispatch.hpp"

namespace seqattn::simd {
namespace {

bool cpu_supports(XsimdArch arch) {
  const auto cpu = xsimd::available_architectures();
  switch (arch) {
    case XsimdArch::kSse4_2:
      return cpu.sse4_2 != 0;
    case XsimdArch::kAvx2Fma:
      return cpu.fma3_avx2 != 0;
    case XsimdArch::kAvx512f:
      return cpu.avx512f != 0;
  }
  return false;
}

// -1: no restriction; otherwise the forced XsimdArch.
std::atomic<int> forced_arch{-1};

}  // namespace

std::vector<XsimdArch> supported_xsimd_archs() {
  std::vector<XsimdArch> archs;
  for (const XsimdArch arch : {XsimdArch::kSse4_2, XsimdArch::kAvx2Fma, XsimdArch::kAvx512f}) {
    if (cpu_supports(arch)) archs.push_back(arch);
  }
  return archs;
}

XsimdArch current_xsimd_arch() {
  const int forced = forced_arch.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<XsimdArch>(forced);
  static const std::vector<XsimdArch> supported = supported_xsimd_archs();
  if (supported.empty()) {
    throw Error(ErrorKind::kUnsupported, "cpu", "SSE4.2 or better for the xsimd kernels",
                "no compiled xsimd arch is supported", "build with SEQATTN_SIMD_BACKEND=highway");
  }
  return supported.back();
}

const char* xsimd_arch_name(XsimdArch arch) {
  switch (arch) {
    case XsimdArch::kSse4_2:
      return "sse4_2";
    case XsimdArch::kAvx2Fma:
      return "fma3<avx2>";
    case XsimdArch::kAvx512f:
      return "avx512f";
  }
  return "unknown";
}

void force_xsimd_arch_for_test(std::optional<XsimdArch> arch) {
  forced_arch.store(arch ? static_cast<int>(*arch) : -1, std::memory_order_relaxed);
}

}  // namespace seqattn::simd

namespace seqattn::simd {
// Both backends run in this build: the flash kernel on xsimd, the other kernels (linear and
// Linformer feature maps, GEMM) on Highway, so the name gives both.
std::string_view backend_target_name() {
  return interned_name(
      {"xsimd:", xsimd_arch_name(current_xsimd_arch()), "+highway:", dispatched_target_cstr()});
}
}  // namespace seqattn::simd
