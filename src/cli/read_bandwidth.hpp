// Measured read bandwidth: the limit a memory-bound kernel (decode against a KV cache) can reach.
#pragma once

#include <cstddef>

namespace seqattn::cli {

struct ReadBandwidth {
  std::size_t bytes = 0;  // array size read per run
  int threads = 1;
  int runs = 0;
  double median_seconds = 0;
  double gbps() const {
    return median_seconds > 0 ? static_cast<double>(bytes) / median_seconds * 1e-9 : 0;
  }
};

// Sums a float array of `bytes` split evenly over `threads` OpenMP threads: one untimed run,
// then the median of `repeat` timed ones.
ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int repeat);

}  // namespace seqattn::cli
