// Measured read bandwidth: the limit a memory-bound kernel (decode against a KV cache) can reach.
#pragma once

#include <hwy/aligned_allocator.h>

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

// A float array of `bytes` in huge pages where Linux grants them (as the KV caches ask:
// otherwise the caches' reads would be compared with a probe paying a TLB miss every 4 KiB),
// first touched by the `threads` OpenMP threads that read it, each its own part. time_one() sums it
// once and returns the seconds: a benchmark can interleave these reads with its kernel's runs, so
// that both medians sample the same moments of a shared host.
class ReadProbe {
 public:
  ReadProbe(std::size_t bytes, int threads);
  double time_one();
  std::size_t bytes() const { return count_ * sizeof(float); }
  int threads() const { return threads_; }

 private:
  std::size_t count_;
  hwy::AlignedFreeUniquePtr<float[]> data_;
  int threads_;
};

// A ReadProbe's one untimed run, then the median of `repeat` timed ones.
ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int repeat);

}  // namespace seqattn::cli
