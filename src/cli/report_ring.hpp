// The scaling report's ring-attention section: `seqattn bench --ring` under mpirun for P = 1,
// 2 and 4 processes, strong scaling (fixed S) and weak scaling (fixed S/P).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "src/cli/measure.hpp"

namespace seqattn::cli {

struct RingReport {
  std::string skipped;  // why there is no section (no MPI, mpirun failed), else empty
  std::int64_t strong_seq = 0, weak_seq_per_rank = 0;
  std::vector<nlohmann::json> runs;  // bench --ring --json output, with "scaling": strong|weak
  double elapsed_seconds = 0;
};

// Runs the section (about half a minute at the default sizes). Never throws for a failed
// mpirun: the reason goes into `skipped`.
RingReport run_ring(const Shape& shape, std::int64_t strong_seq, std::int64_t weak_seq_per_rank);

void ring_table(std::ostream& md, const RingReport& r);
nlohmann::json ring_json(const RingReport& r);

}  // namespace seqattn::cli
