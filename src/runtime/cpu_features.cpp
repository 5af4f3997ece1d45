// CPUID and XGETBV, read once.
#include "src/runtime/cpu_features.hpp"

#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace seqattn::detail {
namespace {

#if defined(__x86_64__) || defined(__i386__)
struct Regs {
  unsigned a = 0, b = 0, c = 0, d = 0;
};

Regs cpuid(unsigned leaf, unsigned subleaf) {
  Regs r;
  if (__get_cpuid_count(leaf, subleaf, &r.a, &r.b, &r.c, &r.d) == 0) return Regs{};
  return r;
}

// XCR0 through the instruction itself: _xgetbv needs -mxsave on this translation unit, which
// the baseline build does not have. Only called when CPUID says OSXSAVE is set.
std::uint64_t xcr0() {
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

bool bit(unsigned reg, int b) { return ((reg >> b) & 1u) != 0; }

CpuFeatures read_features() {
  CpuFeatures f;
  const Regs vendor = cpuid(0, 0);
  const unsigned max_leaf = vendor.a;
  // "GenuineIntel" / "AuthenticAMD" in EBX, EDX, ECX.
  if (vendor.b == 0x756e6547u && vendor.d == 0x49656e69u && vendor.c == 0x6c65746eu) {
    f.vendor = CpuVendor::kIntel;
  } else if (vendor.b == 0x68747541u && vendor.d == 0x69746e65u && vendor.c == 0x444d4163u) {
    f.vendor = CpuVendor::kAmd;
  }
  const Regs id = cpuid(1, 0);
  const unsigned base_family = (id.a >> 8) & 0xfu, base_model = (id.a >> 4) & 0xfu;
  f.family = base_family == 0xfu ? base_family + ((id.a >> 20) & 0xffu) : base_family;
  f.model = (base_family == 0xfu || base_family == 0x6u) ? ((id.a >> 12) & 0xf0u) | base_model
                                                         : base_model;
  if (max_leaf < 7) return f;
  const Regs ext = cpuid(7, 0);
  const Regs ext1 = cpuid(7, 1);
  f.avx512f = bit(ext.b, 16);
  f.avx512_bf16 = bit(ext1.a, 5);
  f.avx512_vnni = f.avx512f && bit(ext.b, 30) && bit(ext.b, 31) && bit(ext.c, 11);
  f.amx_bf16 = bit(ext.d, 22);
  f.amx_tile = bit(ext.d, 24);
  if (bit(id.c, 27)) {  // OSXSAVE
    const std::uint64_t x = xcr0();
    f.os_avx512 = (x & 0xe6u) == 0xe6u;     // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
    f.os_amx = (x & 0x60000u) == 0x60000u;  // XTILECFG, XTILEDATA
  }
  return f;
}
#else
CpuFeatures read_features() { return CpuFeatures{}; }
#endif

}  // namespace

std::string CpuFeatures::describe() const {
  const char* name = vendor == CpuVendor::kIntel ? "Intel"
                     : vendor == CpuVendor::kAmd ? "AMD"
                                                 : "x86";
  return std::string(name) + " family " + std::to_string(family) + " model " +
         std::to_string(model);
}

const CpuFeatures& cpu_features() {
  static const CpuFeatures features = read_features();
  return features;
}

}  // namespace seqattn::detail
