#include "src/cli/report_ring.hpp"

#include <chrono>
#include <cstdio>
#include <iostream>

#include "src/cli/ring_bench.hpp"

namespace seqattn::cli {

RingReport run_ring(const Shape& shape, std::int64_t strong_seq, std::int64_t weak_seq_per_rank) {
  const auto start = std::chrono::steady_clock::now();
  RingReport r;
  r.strong_seq = strong_seq;
  r.weak_seq_per_rank = weak_seq_per_rank;
  for (const char* scaling : {"strong", "weak"}) {
    for (const bool causal : {false, true}) {
      for (const int ranks : {1, 2, 4}) {
        const std::int64_t seq =
            std::string(scaling) == "strong" ? strong_seq : weak_seq_per_rank * ranks;
        std::string error;
        nlohmann::json j = launch_ring_bench(ranks, shape, seq, causal, error);
        if (!error.empty() || j.is_discarded()) {
          r.skipped = error.empty() ? "unreadable output of seqattn bench --ring" : error;
          return r;
        }
        j["scaling"] = scaling;
        std::cerr << "report ring " << scaling << (causal ? " causal" : "") << " P=" << ranks
                  << " S=" << seq << "  " << format_seconds(j["median_ms"].get<double>() * 1e-3)
                  << "\n";
        r.runs.push_back(j);
      }
    }
  }
  r.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

void ring_table(std::ostream& md, const RingReport& r) {
  md << "\n## Ring attention over MPI (`mpirun -np P seqattn bench --ring`)\n\n";
  if (!r.skipped.empty()) {
    md << "Skipped: " << r.skipped << "\n";
    return;
  }
  md << "P processes x 1 thread on this machine (more processes than cores share them: P = 4 "
        "runs oversubscribed on 2 cores). Strong scaling: S = "
     << r.strong_seq << " in total; weak scaling: S = " << r.weak_seq_per_rank
     << " per process. Dense shards are contiguous, causal ones zig-zag. Speed-up is against "
        "P = 1 of the same row group; `blocked` is the time spent waiting on MPI (communication "
        "not hidden behind compute). Took "
     << static_cast<int>(r.elapsed_seconds) << " s.\n\n"
     << "| scaling | mask | P | S | median | GFLOP/s | speed-up | blocked | MB sent |\n"
     << "|---|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const nlohmann::json& j : r.runs) {
    double one = 0;
    for (const nlohmann::json& k : r.runs)
      if (k["scaling"] == j["scaling"] && k["causal"] == j["causal"] && k["ranks"] == 1)
        one = k["median_ms"].get<double>();
    const double ms = j["median_ms"].get<double>();
    const bool weak = j["scaling"] == "weak";
    // Weak scaling: S = P·s, so the work is P = 1's times P² (every pair of shards).
    const double p = j["ranks"].get<double>();
    const double work = weak ? p * p : 1.0;
    char line[256];
    std::snprintf(
        line, sizeof line, "| %s | %s | %d | %lld | %s | %.1f | %.2fx | %.1f%% | %.1f |\n",
        j["scaling"].get<std::string>().c_str(), j["causal"].get<bool>() ? "causal" : "none",
        j["ranks"].get<int>(), static_cast<long long>(j["seq"].get<std::int64_t>()),
        format_seconds(ms * 1e-3).c_str(),
        j["gflops"].is_number() ? j["gflops"].get<double>() : 0.0, one > 0 ? one / ms * work : 0.0,
        100 * j["wait_fraction"].get<double>(), j["bytes_sent"].get<double>() * 1e-6);
    md << line;
  }
  md << "\nWeak-scaling speed-up is throughput against P = 1: S grows with P, so the work grows "
        "with P² (all pairs of shards) while each process holds S/P; P² · t(1) / t(P).\n";
}

nlohmann::json ring_json(const RingReport& r) {
  return {{"skipped", r.skipped},
          {"strong_seq", r.strong_seq},
          {"weak_seq_per_rank", r.weak_seq_per_rank},
          {"elapsed_seconds", r.elapsed_seconds},
          {"runs", r.runs}};
}

}  // namespace seqattn::cli
