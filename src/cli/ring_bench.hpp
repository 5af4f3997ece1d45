// `seqattn bench --ring`: ring attention over MPI, run under mpirun (every rank runs the CLI).
// Built from cmd_bench_ring.cpp when seqattn::mpi exists, else from cmd_bench_ring_absent.cpp,
// which says so.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "seqattn/options.hpp"
#include "src/cli/measure.hpp"

namespace seqattn::cli {

struct RingBenchSpec {
  Shape shape;  // the whole sequence: S = shape.seq over every rank
  AttentionOptions options;
  int warmup = 1;
  int repeat = 5;
  bool json = false;
  // Rank 0 also times single-process attend() over the whole sequence, interleaved with the
  // ring runs (the others wait), so the speed-up comes from one run.
  bool baseline = false;
};

// Each rank times its part; rank 0 prints the medians (the slowest rank's time per run), the
// throughput, the time blocked on communication and the communication time hidden behind
// compute (a ring pass of the same shards without compute, timed separately).
void bench_ring(const RingBenchSpec& spec);

// For the report: `mpirun -np ranks <this binary> bench --ring --json` (1 thread per rank,
// warm-up 1, median of 3) and its JSON; on failure, or without MPI, the reason in `error`.
nlohmann::json launch_ring_bench(int ranks, const Shape& s, std::int64_t seq, bool causal,
                                 std::string& error);

}  // namespace seqattn::cli
