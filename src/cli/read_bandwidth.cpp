// Read bandwidth through the library's probe (detail::sum_floats: the dispatched target's
// widest loads), each thread on its own part.
#include "src/cli/read_bandwidth.hpp"

#include <omp.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "src/cli/measure.hpp"
#include "src/simd/sum_floats.hpp"

namespace seqattn::cli {
namespace {

constexpr std::size_t kLanes = 32;

float sum_range(const float* data, std::size_t begin, std::size_t end) {
  return detail::sum_floats(data + begin, static_cast<std::int64_t>(end - begin));
}

float parallel_sum(const std::vector<float>& data, int threads) {
  const std::size_t blocks = data.size() / kLanes;
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    const std::size_t begin = blocks * t / n * kLanes;
    const std::size_t end = blocks * (t + 1) / n * kLanes;
    total += sum_range(data.data(), begin, end);
  }
  return total;
}

}  // namespace

ReadBandwidth measure_read_bandwidth(std::size_t bytes, int threads, int repeat) {
  const std::size_t count = bytes / sizeof(float) / kLanes * kLanes;
  std::vector<float> data(count);
  // First touch by the reading threads, each on the part it will read.
  const std::size_t blocks = count / kLanes;
#pragma omp parallel num_threads(threads)
  {
    const auto t = static_cast<std::size_t>(omp_get_thread_num());
    const auto n = static_cast<std::size_t>(omp_get_num_threads());
    for (std::size_t i = blocks * t / n * kLanes; i < blocks * (t + 1) / n * kLanes; ++i) {
      data[i] = static_cast<float>(i % 7) * 0.125f;
    }
  }
  volatile float sink = parallel_sum(data, threads);  // untimed: warms caches and threads
  std::vector<double> seconds;
  for (int r = 0; r < repeat; ++r) {
    const auto start = std::chrono::steady_clock::now();
    sink = parallel_sum(data, threads);
    seconds.push_back(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  (void)sink;
  ReadBandwidth result;
  result.bytes = count * sizeof(float);
  result.threads = threads;
  result.runs = repeat;
  result.median_seconds = median(seconds);
  return result;
}

}  // namespace seqattn::cli
