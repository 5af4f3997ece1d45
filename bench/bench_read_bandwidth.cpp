// The machine's read bandwidth: each thread sums its own contiguous part of a float array
// through detail::sum_floats (the dispatched target's widest loads). Decode is read-bound:
// BM_Decode's K+V GB/s is read against this. Args: MiB, threads. 32 MiB stays in this
// machine's L3 once warm (the S_k = 4096 decode cache is 33.5 MB); 1 GiB streams from DRAM;
// 128 and 256 MiB are the S_k = 32768 cache in bf16/f16 and in f32.
#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <cstdint>

#include "src/simd/sum_floats.hpp"

namespace {

void BM_ReadBandwidth(benchmark::State& state) {
  const std::int64_t floats = state.range(0) << 18;  // MiB → floats
  const int threads = static_cast<int>(state.range(1));
  auto data = hwy::AllocateAligned<float>(static_cast<size_t>(floats));
  // First touch by the reading thread, so each part lives where it is read.
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < floats; ++i) data[i] = 1.0f;
  const std::int64_t part = floats / threads / 64 * 64;
  for (auto _ : state) {
    float sum = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sum)
    {
      const std::int64_t t = omp_get_thread_num();
      const std::int64_t count = t + 1 == threads ? floats - t * part : part;
      sum += seqattn::detail::sum_floats(data.get() + t * part, count);
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["GBps"] = benchmark::Counter(
      4.0 * static_cast<double>(floats) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadBandwidth)
    ->ArgNames({"MiB", "threads"})
    ->ArgsProduct({{32, 128, 256, 1024}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace
