// The scaling report: measured points in, scaling.json / scaling.md / scaling.png out.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "src/cli/measure.hpp"
#include "src/cli/report_ring.hpp"

namespace seqattn::cli {

struct ReportConfig {
  Shape shape;  // seq unused
  std::vector<std::int64_t> seqs;
  std::vector<int> threads_list;
  std::vector<std::string> variants;              // built ones, dense first
  std::map<std::string, std::string> parameters;  // variant -> "window 256+256" etc.
  std::map<std::string, std::string> not_built;   // variant -> kNotImplemented message
  double max_dense_seconds = 2;
  double max_point_seconds = 4;
  std::int64_t fit_min_seq = 1024;
  std::int64_t error_rows = 256;
  int max_repeat = 5;  // most timed runs per point
  std::string out_dir = "report";
  std::string python;
  std::string plot_script;
  bool plot = true;
  std::vector<std::int64_t> decode_seqs;  // S_k of the decode sweep; empty = no decode section
  std::int64_t paged_batch = 32;          // sequences of the paged decode rows
  std::vector<std::int64_t> half_seqs;    // S of the dense f32/bf16/f16 rows; empty = none
  std::int64_t ring_seq = 8192;           // ring attention strong scaling S; 0 = no section
  std::int64_t ring_seq_per_rank = 2048;  // weak scaling S/P
};

struct ReportPoint {
  std::int64_t seq = 0;
  std::string variant;
  int threads = 1;
  bool measured = false;
  std::string skip_reason;  // when not measured
  double median_seconds = 0;
  double min_seconds = 0;
  int runs = 0;
  double flops = 0;
  double io_bytes = 0;                    // q, k, v and out
  std::optional<std::int64_t> rss_delta;  // peak RSS growth during the first run
  std::optional<double> relative_error;   // vs dense; none for dense itself
  std::int64_t error_rows = 0;            // query rows the error was measured on
  std::string simd_target;

  double gflops() const { return median_seconds > 0 ? flops / median_seconds * 1e-9 : 0; }
};

// One decode step (S_q = 1) against a KvCache of seq_k tokens.
struct DecodePoint {
  std::int64_t seq_k = 0;
  int threads = 1;
  DType kv_dtype = DType::kF32;  // of the cache
  double median_seconds = 0;
  double min_seconds = 0;
  int runs = 0;
  double kv_bytes = 0;  // bytes(dtype)·B·H_kv·S_k·(D + D_v): K and V read once per step
  std::string simd_target;
  std::string prefetch;  // RunRecord::decode_prefetch: "l1", "l2", "l2+near16+paced", …

  double kv_gbps() const { return median_seconds > 0 ? kv_bytes / median_seconds * 1e-9 : 0; }
};

// Sum of a float array over `threads` threads (the limit drawn for decode).
struct BandwidthPoint {
  std::string kind;  // "cache" (cache-resident size) or "dram"
  double bytes = 0;
  int threads = 1;
  int runs = 0;
  double gbps = 0;
};

// Batched decode over a PagedKvCache: `batch` sequences of lengths spread over
// [min_len, max_len], against a read probe of the same bytes at the same thread count.
struct PagedPoint {
  std::int64_t batch = 0, min_len = 0, max_len = 0;
  DType kv_dtype = DType::kBF16;
  int threads = 1;
  double median_seconds = 0;
  int runs = 0;
  double kv_bytes = 0;
  double probe_gbps = 0;
  std::string prefetch;  // RunRecord::decode_prefetch
  double kv_gbps() const { return median_seconds > 0 ? kv_bytes / median_seconds * 1e-9 : 0; }
};

struct DecodeReport {
  Shape shape;  // seq unused (S_k per point)
  std::vector<DecodePoint> points;
  std::vector<PagedPoint> paged;
  std::vector<BandwidthPoint> bandwidths;
  double dram_above_bytes = 64.0 * 1048576;  // caches larger than this compare against DRAM
  double elapsed_seconds = 0;

  // Whether a cache of kv_bytes is streamed from DRAM at every step: compared with the DRAM
  // read bandwidth, and timed in turns with the other dtypes' caches of its S_k.
  bool from_dram(double kv_bytes) const { return kv_bytes > dram_above_bytes; }
};

// Dense attention with q, k, v and out all in one dtype (f32, bf16 or f16), same shape as the
// sweep; the error is against the f32 run on the unrounded inputs.
struct HalfPoint {
  std::int64_t seq = 0;
  DType dtype = DType::kF32;
  bool bf16_precision = false;  // f32 tensors under --fp32-precision bf16
  int threads = 1;
  double median_seconds = 0;
  int runs = 0;
  double flops = 0;
  double error_vs_f32 = 0;
  std::string simd_target;
  std::string compute_path;  // RunRecord::compute_path

  double gflops() const { return median_seconds > 0 ? flops / median_seconds * 1e-9 : 0; }
};

struct HalfReport {
  Shape shape;
  std::vector<HalfPoint> points;
  double elapsed_seconds = 0;
};

struct AccuracyReport;  // report_accuracy.hpp

// A markdown table with one row per S and one column per approximate variant (dense left
// out); cell(seq, variant) gives each cell's text ("-" when nothing was measured).
void approximation_table(std::ostream& md, const std::vector<std::string>& variants,
                         const std::vector<std::int64_t>& seqs,
                         const std::function<std::string(std::int64_t, const std::string&)>& cell);

// Fits, crossovers, and the three files. Returns the scaling.md text (also printed).
std::string write_report(const ReportConfig& config, const std::vector<ReportPoint>& points,
                         double elapsed_seconds, const DecodeReport& decode = {},
                         const HalfReport& half = {}, const RingReport& ring = {},
                         const AccuracyReport* accuracy = nullptr);

}  // namespace seqattn::cli
