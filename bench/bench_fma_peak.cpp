// The machine's FP32 FMA peak for one thread on the target Highway dispatch picks: independent
// FMA chains held in registers, enough of them to cover FMA latency × the number of FMA pipes.
// The dense benchmarks are read as a fraction of this number.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/bench_fma_peak.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <benchmark/benchmark.h>

#include <cstdint>
#include <string>

HWY_BEFORE_NAMESPACE();
namespace fma_peak::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// 16 chains (32-register targets) cover 4-cycle latency × 2 pipes × 2; 8 fit the 16-register
// targets. Returns the flops done and a checksum that keeps the chains alive.
float RunChains(std::int64_t iterations, double* flops) {
  const hn::ScalableTag<float> df;
  constexpr size_t kChains = HWY_TARGET <= HWY_AVX3 ? 16 : 8;
  hn::Vec<decltype(df)> acc[kChains];
  for (size_t c = 0; c < kChains; ++c) acc[c] = hn::Set(df, static_cast<float>(c));
  const auto mul = hn::Set(df, 0.999999f), add = hn::Set(df, 1e-7f);
  for (std::int64_t n = 0; n < iterations; ++n) {
    for (size_t c = 0; c < kChains; ++c) acc[c] = hn::MulAdd(acc[c], mul, add);
  }
  auto total = acc[0];
  for (size_t c = 1; c < kChains; ++c) total = hn::Add(total, acc[c]);
  *flops = 2.0 * static_cast<double>(iterations) * kChains * hn::Lanes(df);
  return hn::GetLane(total);
}

const char* Name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace fma_peak::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace fma_peak {
HWY_EXPORT(RunChains);
HWY_EXPORT(Name);

void BM_FmaPeak(benchmark::State& state) {
  double flops = 0, total = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(HWY_DYNAMIC_DISPATCH(RunChains)(1 << 20, &flops));
    total += flops;
  }
  state.counters["GFLOPS"] = benchmark::Counter(total / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string("highway:") + HWY_DYNAMIC_DISPATCH(Name)());
}
BENCHMARK(BM_FmaPeak)->Unit(benchmark::kMicrosecond);

}  // namespace fma_peak
#endif  // HWY_ONCE
