// Read bandwidth through the library's probe (detail::sum_floats: the dispatched target's
// widest loads), each thread on its own part.
#include "src/cli/read_bandwidth.hpp"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <new>
#include <vector>

#include "src/cli/measure.hpp"
#include "src/runtime/huge_pages.hpp"
#include "src/simd/sum_floats.hpp"

namespace seqattn::cli {
namespace {

constexpr std::size_t kLanes = 32;

float sum_range(const float* data, std::size_t begin, std::size_t end) {
  return detail::sum_floats(data + begin, static_cast<std::int64_t>(end - begin));
}

float parallel_sum(const float* data, std::size_t count, int threads) {
  const std::size_t blocks = count / kLanes;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t begin = blocks * t / n * kLanes;
    const std::size_t end = blocks * (t + 1) / n * kLanes;
    total += sum_range(data, begin, end);
  }
  return total;
}

}  // namespace

ReadProbe::ReadProbe(std::size_t bytes, int threads)
    : count_(std::max<std::size_t>(bytes / sizeof(float) / kLanes, 1) * kLanes),
      data_(hwy::AllocateAligned<float>(count_)),
      threads_(threads) {
  if (!data_) throw std::bad_alloc();
  detail::advise_huge_pages(data_.get(), count_ * sizeof(float));
  const std::size_t blocks = count_ / kLanes;
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    for (std::size_t i = blocks * t / n * kLanes; i < blocks * (t + 1) / n * kLanes; ++i) {
      data_[i] = static_cast<float>(i % 7) * 0.125f;
    }
  }
}

double ReadProbe::time_one() {
  const auto start = std::chrono::steady_clock::now();
  volatile float sink = parallel_sum(data_.get(), count_, threads_);
  (void)sink;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int repeat) {
  ReadProbe probe(bytes, threads);
  probe.time_one();  // untimed: warms caches and threads
  std::vector<double> seconds;
  for (int r = 0; r < repeat; ++r) seconds.push_back(probe.time_one());
  ReadBandwidth result;
  result.bytes = probe.bytes();
  result.threads = threads;
  result.runs = repeat;
  result.median_seconds = median(seconds);
  return result;
}

}  // namespace seqattn::cli
