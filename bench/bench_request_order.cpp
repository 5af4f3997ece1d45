// Whether the order of a decode kernel's far requests matters, without the kernel: two arrays of
// 8 KiB blocks (a cache's K and V, 32 MiB each: from DRAM) read line by line, with FMA work
// between lines and, per line read, one request for a line `ahead` blocks on into L2. Modes:
//  0 in order: lines read and asked for in address order;
//  1 passes: each block read in 4 column passes (line 4q + p in pass p, as AVX2's int8 Q·Kᵀ
//    reads its quad rows), each read asking for the same line further on (the kernels' old
//    order);
//  2 passes, ordered requests: the same reads, the requests from simd::OrderedLines (address
//    order, the kernels' order since the far requests were reordered).
// docs/architecture.md, "Far requests in address order", has what it measured. Args: mode,
// ahead (blocks), work (rounds of 6 FMAs a line). Counter ns_per_line (Google Benchmark prints
// an inverted rate with an "s" after it: the number is nanoseconds a line).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "bench/bench_request_order.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>

#include <cstddef>
#include <cstdint>

#include "src/simd/prefetch.hpp"

HWY_BEFORE_NAMESPACE();
namespace request_order::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

constexpr size_t kBlock = 8192, kLines = kBlock / 64, kPasses = 4;

// Reads the line at `line` (64 bytes of floats) and does `work` rounds of 6 FMAs with it:
// independent chains, as a kernel's accumulators (the same work a line on every target).
template <class D, class V>
HWY_INLINE void ReadLine(D d, const float* line, size_t work, V (&acc)[6]) {
  V x = hn::LoadU(d, line);
  for (size_t i = hn::Lanes(d); i < 16; i += hn::Lanes(d)) x = hn::Add(x, hn::LoadU(d, line + i));
  const V m = hn::Set(d, 0.999f);
  for (size_t w = 0; w < work; ++w) {
    for (V& a : acc) a = hn::MulAdd(a, m, x);
  }
  acc[0] = hn::Add(acc[0], x);
}

// One sweep over `blocks` blocks of k then v; returns a sum that keeps the work alive.
float Sweep(const std::int8_t* k, const std::int8_t* v, size_t blocks, size_t ahead, int mode,
            size_t work) {
  const hn::ScalableTag<float> d;
  using V = hn::Vec<decltype(d)>;
  V acc[6];
  for (V& a : acc) a = hn::Set(d, 1e-3f);
  for (size_t b = 0; b < blocks; ++b) {
    const bool far = b + ahead < blocks;
    const seqattn::simd::Prefetch request{far ? static_cast<std::ptrdiff_t>(ahead * kBlock) : 0,
                                          seqattn::simd::CacheLevel::kL2};
    for (const std::int8_t* block : {k + b * kBlock, v + b * kBlock}) {
      auto read = [&](size_t line) {
        ReadLine(d, reinterpret_cast<const float*>(block + line * 64), work, acc);
      };
      if (mode == 0) {
        for (size_t i = 0; i < kLines; ++i) {
          if (request) request.Line(block + i * 64);
          read(i);
        }
        continue;
      }
      seqattn::simd::OrderedLines ordered(block, mode == 2 ? kBlock : 0, request, kLines);
      for (size_t pass = 0; pass < kPasses; ++pass) {
        for (size_t q = 0; q < kLines / kPasses; ++q) {
          const size_t line = q * kPasses + pass;
          if (mode == 1 && request) request.Line(block + line * 64);
          ordered.Visit(1);
          read(line);
        }
      }
    }
  }
  V total = acc[0];
  for (size_t a = 1; a < 6; ++a) total = hn::Add(total, acc[a]);
  return hn::GetLane(hn::SumOfLanes(d, total));
}

const char* Name() { return hwy::TargetName(HWY_TARGET); }

}  // namespace request_order::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace request_order {
HWY_EXPORT(Sweep);
HWY_EXPORT(Name);

void BM_RequestOrder(benchmark::State& state) {
  constexpr size_t kBytes = size_t{32} << 20;
  const auto mode = static_cast<int>(state.range(0));
  const auto ahead = static_cast<size_t>(state.range(1));
  const auto work = static_cast<size_t>(state.range(2));
  auto k = hwy::AllocateAligned<float>(kBytes / sizeof(float));
  auto v = hwy::AllocateAligned<float>(kBytes / sizeof(float));
  for (size_t i = 0; i < kBytes / sizeof(float); ++i) {  // normal floats: no denormal stalls
    k[i] = 0.5f + static_cast<float>(i % 7) * 0.125f;
    v[i] = 0.25f + static_cast<float>(i % 5) * 0.125f;
  }
  const size_t blocks = kBytes / 8192;  // kBlock
  const auto* k_bytes = reinterpret_cast<const std::int8_t*>(k.get());
  const auto* v_bytes = reinterpret_cast<const std::int8_t*>(v.get());
  for (auto _ : state) {
    benchmark::DoNotOptimize(
        HWY_DYNAMIC_DISPATCH(Sweep)(k_bytes, v_bytes, blocks, ahead, mode, work));
  }
  const double lines = 2.0 * kBytes / 64 * static_cast<double>(state.iterations());
  state.counters["ns_per_line"] =
      benchmark::Counter(lines * 1e-9, benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
  state.SetLabel(HWY_DYNAMIC_DISPATCH(Name)());
}
BENCHMARK(BM_RequestOrder)
    ->ArgNames({"mode", "ahead", "work"})
    ->ArgsProduct({{0, 1, 2}, {1, 4}, {3, 5}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace request_order
#endif  // HWY_ONCE
