// Which compute path bf16 operands take: AMX tiles, AVX512-BF16's vdpbf16ps, or the fp32
// kernels over values widened exactly to fp32. Highway's run-time dispatch (simd_target())
// picks the SIMD target; this layer picks the bf16 products, which no Highway 1.0.3 target
// emits. docs/architecture.md, "Compute paths", has the rules and the rates behind them.
#pragma once

#include <string>
#include <string_view>

#include "src/core/problem.hpp"
#include "src/kernel/amx/amx_permission.hpp"
#include "src/runtime/cpu_features.hpp"

namespace seqattn::detail {

using amx::AmxPermission;

// "fp32", "amx-bf16", "avx512-bf16", "amx-emulated" (ComputePath: src/core/problem.hpp).
std::string_view to_string(ComputePath path);

// Whether this build holds the path's kernels: fp32 always; the AMX path and its emulation in
// the Highway tile kernel (tile_paths_built()); vdpbf16ps not yet.
bool path_built(ComputePath path);

// Whether vdpbf16ps runs at least at the fp32 FMA rate on this CPU model, so that a bf16 dot
// product pays over widening. By model, not by the AVX512_BF16 flag: AMD Zen 4 and Zen 5 run
// it at twice the fp32 FMA rate; Sapphire Rapids at half (issue 31's measurements).
bool vdpbf16ps_pays(const CpuFeatures& cpu);

struct PathChoice {
  ComputePath path = ComputePath::kFp32;
  std::string reason;
};

// The path for bf16 operands on `cpu`. `forced` is SEQATTN_COMPUTE_PATH's value ("" or "auto":
// never AMX, which rounds the probabilities (it runs only when forced); vdpbf16ps where the
// model runs it at least at the fp32 rate and its kernels are built (not yet: they would break
// the bit-for-bit promise too, and face the same choice when built); else fp32;
// "fp32", "amx-bf16", "avx512-bf16", "amx-emulated": that path or an Error naming
// SEQATTN_COMPUTE_PATH that says why it cannot run). `ask_amx` asks Linux for the AMX tile
// state (request_amx_permission; a test passes its own), called only when AMX would run.
PathChoice choose_bf16_path(const CpuFeatures& cpu, std::string_view forced,
                            AmxPermission (*ask_amx)(bool cpu_has_amx));

// choose_bf16_path for this CPU, this process's SEQATTN_COMPUTE_PATH and the real request.
PathChoice bf16_path_here();

// bf16_path_here().path, remembered for the last SEQATTN_COMPUTE_PATH value seen (the CPU
// does not change; a test may change the variable): what a run asks, allocating nothing while
// the value stays the same (the reasons are strings; a steady run in a caller's workspace must
// not allocate). A forced path that cannot run is not remembered: each call throws.
ComputePath bf16_path_for_runs();

}  // namespace seqattn::detail
