// What the CPU and the operating system offer the bf16 compute paths, read once with CPUID and
// XGETBV. Highway's dispatch covers the SIMD targets; AMX and AVX512-BF16 are outside Highway
// 1.0.3, so their paths are chosen from these facts (src/kernel/compute_path.hpp).
#pragma once

#include <string>

namespace seqattn::detail {

enum class CpuVendor { kIntel, kAmd, kOther };

struct CpuFeatures {
  CpuVendor vendor = CpuVendor::kOther;
  unsigned family = 0;  // displayed family (base + extended), e.g. 25 for AMD Zen 3/4
  unsigned model = 0;   // displayed model (extended << 4 | base)
  bool avx512f = false;
  bool avx512_bf16 = false;
  // AVX512-VNNI with the BW and VL subsets it is used with (vpdpbusd on zmm): the int8 KV
  // cache's integer Q·Kᵀ and P·V (src/kernel/decode/int8_products_avx512vnni.cpp).
  bool avx512_vnni = false;
  bool amx_tile = false;
  bool amx_bf16 = false;
  // The OS saves the ZMM state (XCR0 bits 5-7) and the AMX tile state (XCR0 bits 17-18).
  bool os_avx512 = false;
  bool os_amx = false;

  // "AMD family 25 model 1": what a report or an error message names.
  std::string describe() const;
};

// This CPU's features (read on first use; the same afterwards).
const CpuFeatures& cpu_features();

}  // namespace seqattn::detail
