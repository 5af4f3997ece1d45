#include "src/runtime/threads.hpp"

#include <omp.h>

#include <algorithm>

#include "src/runtime/validate.hpp"

namespace seqattn::detail {

int max_team_threads() {
  const int procs = std::max(1, omp_get_num_procs());
  const int limit = std::max(1, omp_get_thread_limit());
  return std::min(limit, 4 * procs);
}

int resolve_threads(int requested, const std::string& argument) {
  if (requested < 0) fail(argument, ">= 0 (0 = all cores)", std::to_string(requested));
  const int wanted = requested == 0 ? omp_get_max_threads() : requested;
  return std::clamp(wanted, 1, max_team_threads());
}

int team_here(int threads) {
  return omp_get_active_level() >= omp_get_max_active_levels() ? 1 : threads;
}

}  // namespace seqattn::detail
