#include "src/kernel/amx/amx_permission.hpp"

#include <atomic>
#include <cerrno>
#include <mutex>

#if defined(__linux__) && defined(__x86_64__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace seqattn::detail::amx {
namespace {

int request_from_kernel() {
#if defined(__linux__) && defined(__x86_64__)
  // The constants of <asm/prctl.h> and the kernel's xfeature numbering, spelled here because
  // the installed kernel headers may predate them.
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  if (syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0) return 0;
  return errno;
#else
  return ENOSYS;
#endif
}

constexpr int kNotAsked = -1;

// The answer is read on every run, so it sits in an atomic; the mutex only orders first asks.
struct PermissionState {
  std::mutex mutex;
  int (*request)() = nullptr;  // nullptr: the system call
  std::atomic<int> answer{kNotAsked};
};

PermissionState& state() {
  static PermissionState s;
  return s;
}

}  // namespace

AmxPermission request_amx_permission(bool cpu_has_amx) {
  if (!cpu_has_amx) return AmxPermission::kNoAmx;
  PermissionState& s = state();
  int answer = s.answer.load(std::memory_order_acquire);
  if (answer != kNotAsked) return static_cast<AmxPermission>(answer);
  std::lock_guard<std::mutex> lock(s.mutex);
  answer = s.answer.load(std::memory_order_relaxed);
  if (answer == kNotAsked) {
    const int error = s.request != nullptr ? s.request() : request_from_kernel();
    answer = static_cast<int>(error == 0 ? AmxPermission::kGranted : AmxPermission::kRefused);
    s.answer.store(answer, std::memory_order_release);
  }
  return static_cast<AmxPermission>(answer);
}

void set_amx_permission_request_for_testing(int (*request)()) {
  PermissionState& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  s.request = request;
  s.answer.store(kNotAsked, std::memory_order_release);
}

}  // namespace seqattn::detail::amx
