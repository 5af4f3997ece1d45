// Linux lets a process use the AMX tile data (8 KiB of state per thread) only after asking:
// arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA), since 5.16. Without the permission the
// first tile instruction raises SIGILL. The permission is process-wide and permanent, so it is
// asked for at most once and the answer kept.
//
// What is per thread is the tile *configuration*: the kernel loads it (LDTILECFG) on each
// thread at the start of a run and releases it (TILERELEASE) at the end, see configure_tiles()
// in amx_micro_kernels.hpp. Nothing here touches the tiles.
#pragma once

namespace seqattn::detail::amx {

enum class AmxPermission {
  kGranted,  // the tiles may be used by every thread of the process
  kRefused,  // the kernel said no (e.g. EINVAL from a kernel older than 5.16)
  kNoAmx,    // the CPU has no AMX: nothing was asked
};

// kNoAmx when !cpu_has_amx (no system call). Otherwise the first call asks the kernel and every
// later call returns that answer; concurrent first calls ask once.
AmxPermission request_amx_permission(bool cpu_has_amx);

// Tests only: replaces the system call by `request` (0 = granted, else an errno value) and
// forgets the kept answer, so the next request_amx_permission(true) asks `request`. nullptr
// restores the system call (and forgets the answer again).
void set_amx_permission_request_for_testing(int (*request)());

}  // namespace seqattn::detail::amx
