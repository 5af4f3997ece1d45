// `seqattn bench --paged`: batched decode over a PagedKvCache, sequences of different lengths
// spread evenly over --seq-lens A:B, and the read bandwidth of a same-footprint array probed
// in the same run (the limit the K+V bytes are compared with).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "seqattn/options.hpp"
#include "src/cli/measure.hpp"
#include "src/cli/read_bandwidth.hpp"

namespace seqattn::cli {

struct PagedBenchSpec {
  Shape shape;  // batch = sequences, heads, kv_heads, dim, dim_v, dtype (q/out), kv_dtype
  std::int64_t seq_q = 1;
  std::int64_t min_len = 512, max_len = 8192;
  AttentionOptions options;
  int warmup = 1;
  int repeat = 5;
  bool json = false;
};

// "A:B" with 1 <= A <= B; Error naming `argument` otherwise.
void parse_seq_lens(const std::string& text, const std::string& argument, std::int64_t& lo,
                    std::int64_t& hi);

// n lengths spread evenly over [lo, hi] (the ends included), in an order shuffled with a fixed
// seed, so a batch mixes short and long sequences the same way in every run.
std::vector<std::int64_t> spread_lengths(std::int64_t n, std::int64_t lo, std::int64_t hi);

struct PagedTiming {
  Timing timing;
  std::vector<std::int64_t> lengths;  // of the batch's sequences, in batch order
  double kv_bytes = 0;                // K + V (and i8 scales) the pool stores for them
  ReadBandwidth probe;                // a read of kv_bytes at the run's thread count
  double kv_gbps() const { return kv_bytes / timing.median_seconds * 1e-9; }
};

// Fills a pool with spec.shape.batch random sequences, times one plan over all of them
// (warm-up, then the median of `repeat`), then probes the read bandwidth of the same bytes.
PagedTiming time_paged(const PagedBenchSpec& spec);

// time_paged, printed as a line or as JSON.
void bench_paged(const PagedBenchSpec& spec);

}  // namespace seqattn::cli
