// The one rule for a thread count that reaches the OpenMP runtime (attend, plans, KvCache
// attention, MultiHeadAttention, LinearAttentionState, the GEMM): negative is an Error; 0 means
// omp_get_max_threads() (all cores, or OMP_NUM_THREADS); anything larger than
// max_team_threads() is clamped to it, and RunRecord::threads reports the team that ran.
// Unclamped, a count such as 100000 overflowed the OpenMP runtime's stack and 1 << 30 made it
// call exit(1).
#pragma once

#include <string>

namespace seqattn::detail {

// 4 × the processors this process may run on, and never above OMP_THREAD_LIMIT: enough for
// deliberate oversubscription, far below what breaks the runtime.
int max_team_threads();

// The team a requested count runs with (see above); `argument` names it in the Error.
int resolve_threads(int requested, const std::string& argument);

// The team a region of `threads` actually gets when it starts here: 1 inside a caller's active
// parallel region when nesting is off (omp_get_active_level() >= omp_get_max_active_levels(),
// the default), where OpenMP runs it on the calling thread alone. What RunRecord::threads says.
int team_here(int threads);

}  // namespace seqattn::detail
