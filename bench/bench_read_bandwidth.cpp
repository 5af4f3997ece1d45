// The machine's read bandwidth: each thread sums its own contiguous part of a float array with
// the widest vectors Highway dispatches to (four independent accumulators, so the adds never
// limit the loads). Decode is read-bound: BM_Decode's K+V GB/s is read against this.
// Args: MiB, threads. 32 MiB stays in this machine's L3 once warm (the S_k = 4096 decode
// cache is 33.5 MB); 1 GiB streams from DRAM.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/bench_read_bandwidth.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <cstdint>

HWY_BEFORE_NAMESPACE();
namespace read_bandwidth::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float SumFloats(const float* HWY_RESTRICT data, std::int64_t count) {
  const hn::ScalableTag<float> df;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i + 4 * lanes <= count; i += 4 * lanes) {
    a0 = hn::Add(a0, hn::Load(df, data + i));
    a1 = hn::Add(a1, hn::Load(df, data + i + lanes));
    a2 = hn::Add(a2, hn::Load(df, data + i + 2 * lanes));
    a3 = hn::Add(a3, hn::Load(df, data + i + 3 * lanes));
  }
  float total = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < count; ++i) total += data[i];
  return total;
}

}  // namespace read_bandwidth::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace read_bandwidth {
HWY_EXPORT(SumFloats);

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
      sum += HWY_DYNAMIC_DISPATCH(SumFloats)(data.get() + t * part, count);
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["GBps"] = benchmark::Counter(
      4.0 * static_cast<double>(floats) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_ReadBandwidth)
    ->ArgNames({"MiB", "threads"})
    ->ArgsProduct({{32, 1024}, {1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace read_bandwidth
#endif  // HWY_ONCE
