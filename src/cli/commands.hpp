// The seqattn subcommands. Each add_*_command registers one subcommand whose callback runs it;
// failures are thrown as seqattn::Error and turned into a message and exit code by main().
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "src/cli/measure.hpp"

#include "seqattn/attention.hpp"

namespace CLI {
class App;
}

namespace seqattn::cli {

void add_run_command(CLI::App& app);
void add_bench_command(CLI::App& app);
void add_select_command(CLI::App& app);
void add_calibrate_command(CLI::App& app);
void add_report_command(CLI::App& app);
void add_mha_command(CLI::App& app);

// The run record as JSON (variant, reason, ms, gflops, flops, bytes, threads, simd_target,
// compute_path, decode_prefetch: null for a run over q, k, v).
nlohmann::json record_json(const RunRecord& record);
// One line: "dense (requested explicitly): 1.23 ms, 45.6 GFLOP/s, 2 threads, highway:AVX3,
// fp32 compute".
std::string record_line(const RunRecord& record);

// --fp32-precision ieee|bf16 on run, bench and mha (parsed by parse_fp32_precision).
void add_fp32_precision_flag(CLI::App& cmd, std::string& value);

// A JSON number, or null for NaN/inf (JSON has no such numbers).
nlohmann::json number_or_null(double value);

// A bench point's timing: the last run's record (without its own "ms"), median_ms, min_ms and
// gflops over the timed runs.
nlohmann::json timing_json(const Timing& t);

}  // namespace seqattn::cli
