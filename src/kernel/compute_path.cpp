// The bf16 compute path: the CPU's features, the build's kernels and SEQATTN_COMPUTE_PATH.
#include "src/kernel/compute_path.hpp"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <mutex>

#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "src/kernel/flash_attention.hpp"

namespace seqattn::detail {
namespace {

constexpr const char* kEnv = "SEQATTN_COMPUTE_PATH";
constexpr const char* kNames = "one of auto, fp32, amx-bf16, avx512-bf16, amx-emulated";

// What keeps a path from running here: kUnsupported when the CPU, the OS, Linux or the build's
// backend lacks it, kNotImplemented when only its kernels are missing; empty `why`: nothing.
struct Obstacle {
  std::string why;
  ErrorKind kind = ErrorKind::kUnsupported;
};

// The permission is asked last, and only when the AMX path exists: a process that never runs
// it never asks.
Obstacle amx_obstacle(const CpuFeatures& cpu, AmxPermission (*ask_amx)(bool)) {
  if (!(cpu.amx_tile && cpu.amx_bf16)) return {"this CPU has no AMX (amx_tile, amx_bf16)"};
  if (!cpu.os_amx) return {"the OS does not enable the AMX tile state (XCR0 bits 17-18)"};
  if (!path_built(ComputePath::kAmxBf16)) {
    return {"this build's tile kernel has no AMX path (the xsimd backend)"};
  }
  if (ask_amx(true) != AmxPermission::kGranted) {
    return {"Linux refused the AMX tile-data permission (arch_prctl ARCH_REQ_XCOMP_PERM)"};
  }
  return {};
}

Obstacle avx512_bf16_obstacle(const CpuFeatures& cpu) {
  if (!(cpu.avx512_bf16 && cpu.avx512f)) return {"this CPU has no AVX512-BF16"};
  if (!cpu.os_avx512) return {"the OS does not enable the AVX-512 state"};
  if (!vdpbf16ps_pays(cpu)) {
    return {"vdpbf16ps runs below the fp32 FMA rate on " + cpu.describe() +
            " (half of it on Sapphire Rapids)"};
  }
  if (!path_built(ComputePath::kAvx512Bf16)) {
    return {"the vdpbf16ps kernels are not built yet (issue 31)", ErrorKind::kNotImplemented};
  }
  return {};
}

[[noreturn]] void refuse(std::string_view forced, const Obstacle& obstacle) {
  throw Error(obstacle.kind, kEnv, "a compute path this CPU and build can run (fp32 always can)",
              std::string(forced), obstacle.why);
}

}  // namespace

std::string_view to_string(ComputePath path) {
  switch (path) {
    case ComputePath::kFp32:
      return "fp32";
    case ComputePath::kAmxBf16:
      return "amx-bf16";
    case ComputePath::kAvx512Bf16:
      return "avx512-bf16";
    case ComputePath::kAmxEmulated:
      return "amx-emulated";
  }
  return "unknown";
}

bool path_built(ComputePath path) {
  switch (path) {
    case ComputePath::kFp32:
      return true;
    case ComputePath::kAmxBf16:
    case ComputePath::kAmxEmulated:
      return tile_paths_built();
    case ComputePath::kAvx512Bf16:
      return false;
  }
  return false;
}

bool vdpbf16ps_pays(const CpuFeatures& cpu) {
  // AMD family 25 with AVX512-BF16 is Zen 4 (Zen 3 lacks the flag); family 26 is Zen 5.
  return cpu.vendor == CpuVendor::kAmd && cpu.avx512_bf16 && cpu.family >= 25;
}

PathChoice choose_bf16_path(const CpuFeatures& cpu, std::string_view forced,
                            AmxPermission (*ask_amx)(bool cpu_has_amx)) {
  if (forced == "fp32") return {ComputePath::kFp32, std::string("forced by ") + kEnv + "=fp32"};
  if (forced == "amx-bf16") {
    const Obstacle obstacle = amx_obstacle(cpu, ask_amx);
    if (!obstacle.why.empty()) refuse(forced, obstacle);
    return {ComputePath::kAmxBf16, std::string("forced by ") + kEnv + "=amx-bf16"};
  }
  if (forced == "avx512-bf16") {
    const Obstacle obstacle = avx512_bf16_obstacle(cpu);
    if (!obstacle.why.empty()) refuse(forced, obstacle);
    return {ComputePath::kAvx512Bf16, std::string("forced by ") + kEnv + "=avx512-bf16"};
  }
  if (forced == "amx-emulated") {
    if (!path_built(ComputePath::kAmxEmulated)) {
      refuse(forced, {"this build's tile kernel has no tile path (the xsimd backend)"});
    }
    return {ComputePath::kAmxEmulated, std::string("forced by ") + kEnv + "=amx-emulated"};
  }
  if (!forced.empty() && forced != "auto") {
    throw Error(ErrorKind::kInvalidArgument, kEnv, kNames, "'" + std::string(forced) + "'");
  }
  // auto does not take the AMX path, so it never asks for the permission. Measured on a
  // Sapphire-Rapids-class Xeon (amx_tile, amx_bf16; one core, highway:AVX3_DL; one sweep) it
  // runs dense bf16 prefill 1.8-3.4x the fp32 path from S = 2048 (D 128, S 8192: 451 against
  // 133 GFLOP/s; docs/architecture.md, "Compute paths"), but it rounds the probabilities to
  // bf16 (up to 4.72e-3 of max|ref| against float64, where the fp32 path is within about 1e-6),
  // and auto keeps the README's promise: a bf16 run is bit for bit the fp32 run on the widened
  // inputs, rounded once.
  std::string no_amx = "this CPU has no AMX (amx_tile, amx_bf16)";
  if (cpu.amx_tile && cpu.amx_bf16) {
    no_amx =
        "the AMX path runs only when forced (SEQATTN_COMPUTE_PATH=amx-bf16): up to 3.4x faster, it "
        "rounds the probabilities to bf16, where auto keeps the bit-for-bit fp32 result on "
        "widened inputs";
  }
  const Obstacle no_avx = avx512_bf16_obstacle(cpu);
  if (no_avx.why.empty()) return {ComputePath::kAvx512Bf16, "vdpbf16ps (" + cpu.describe() + ")"};
  return {ComputePath::kFp32, "bf16 widened exactly to fp32: " + no_amx + "; " + no_avx.why};
}

PathChoice bf16_path_here() {
  const char* forced = std::getenv(kEnv);
  return choose_bf16_path(cpu_features(), forced == nullptr ? "" : forced,
                          &amx::request_amx_permission);
}

ComputePath bf16_path_for_runs() {
  struct Last {
    std::mutex mutex;
    std::array<char, 32> value{};  // a longer value is not remembered (it is refused anyway)
    std::size_t size = 0;
    bool known = false;
    ComputePath path = ComputePath::kFp32;
  };
  static Last last;
  const char* env = std::getenv(kEnv);
  const std::string_view value = env == nullptr ? "" : env;
  {
    const std::lock_guard lock(last.mutex);
    if (last.known && value == std::string_view(last.value.data(), last.size)) return last.path;
  }
  // The value read above, not a second getenv: the pair remembered must agree.
  const ComputePath path =
      choose_bf16_path(cpu_features(), value, &amx::request_amx_permission).path;  // may throw
  if (value.size() <= last.value.size()) {
    const std::lock_guard lock(last.mutex);
    std::copy(value.begin(), value.end(), last.value.begin());
    last.size = value.size();
    last.path = path;
    last.known = true;
  }
  return path;
}

}  // namespace seqattn::detail

namespace seqattn {

ComputePathChoice bf16_compute_path() {
  const detail::PathChoice choice = detail::bf16_path_here();
  return {std::string(detail::to_string(choice.path)), choice.reason};
}

}  // namespace seqattn
