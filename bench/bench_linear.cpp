// Linear attention (elu1 and FAVOR+, m = D = 64; causal and not) and Linformer (k = 256)
// across S = 256 … 65536 with B = 1, H = 8, D = 64, one thread, each with a complexity fit
// (expected O(N)); dense attention through attend() in the same binary at S <= 8192 for the
// crossover and for the O(N²) extrapolation to long sequences.
//
//   flock /tmp/seqattn-bench.lock build/bench/bench_linear --benchmark_min_time=0.2
//       --benchmark_repetitions=5 --benchmark_report_aggregates_only=true
#include <benchmark/benchmark.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"

namespace {

using namespace seqattn;

constexpr std::int64_t kBatch = 1, kHeads = 8, kDim = 64;

struct Inputs {
  std::vector<float> q, k, v, out;
  explicit Inputs(std::int64_t s) {
    const auto n = static_cast<std::size_t>(kBatch * kHeads * s * kDim);
    std::mt19937 gen(1);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto* t : {&q, &k, &v}) {
      t->resize(n);
      for (float& x : *t) x = dist(gen);
    }
    out.assign(n, 0.0f);
  }
  ConstTensor view(const std::vector<float>& t, std::int64_t s) const {
    return bhsd<const float>(t.data(), kBatch, kHeads, s, kDim);
  }
};

void run(benchmark::State& state, const VariantSpec& spec, bool causal, int threads = 1) {
  const std::int64_t s = state.range(0);
  Inputs in(s);
  AttentionOptions opt;
  opt.variant = spec;
  opt.mask.causal = causal;
  opt.threads = threads;
  const Tensor out = bhsd(in.out.data(), kBatch, kHeads, s, kDim);
  // One untimed call: touches the output pages and fills the Linformer projection cache, as
  // in any repeated use.
  RunRecord record = attend(in.view(in.q, s), in.view(in.k, s), in.view(in.v, s), out, opt);
  for (auto _ : state) {
    record = attend(in.view(in.q, s), in.view(in.k, s), in.view(in.v, s), out, opt);
    benchmark::DoNotOptimize(in.out.data());
    benchmark::ClobberMemory();
  }
  state.SetComplexityN(s);
  state.counters["FLOP/s"] =
      benchmark::Counter(record.flops, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["bytes/s"] =
      benchmark::Counter(record.bytes, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(std::string(record.simd_target));
}

LinearSpec linear_spec(FeatureMap map) {
  LinearSpec spec;
  spec.feature_map = map;
  spec.num_features = kDim;
  return spec;
}

void BM_LinearElu1(benchmark::State& state) { run(state, linear_spec(FeatureMap::kElu1), false); }
void BM_LinearElu1Causal(benchmark::State& state) {
  run(state, linear_spec(FeatureMap::kElu1), true);
}
void BM_LinearFavor(benchmark::State& state) { run(state, linear_spec(FeatureMap::kFavor), false); }
void BM_LinearFavorCausal(benchmark::State& state) {
  run(state, linear_spec(FeatureMap::kFavor), true);
}
void BM_Linformer(benchmark::State& state) { run(state, LinformerSpec{256, 0, {}, {}}, false); }
void BM_Dense(benchmark::State& state) { run(state, DenseSpec{}, false); }
// Two threads (the machine's cores) for the scaling figure; B·H = 8 heads share them.
void BM_LinearElu1TwoThreads(benchmark::State& state) {
  run(state, linear_spec(FeatureMap::kElu1), false, 2);
}

// The recurrent form decoding one token at a time (B = 1, H = 8, D = 64): per-token cost is
// O(m·D) whatever the position, so items/s is the decoding rate.
void BM_LinearStateDecode(benchmark::State& state) {
  const std::int64_t tokens = state.range(0);
  const auto map = static_cast<FeatureMap>(state.range(1));
  Inputs in(tokens);
  LinearAttentionState recurrent(linear_spec(map), {kBatch, kHeads, kHeads, kDim, kDim},
                                 std::nullopt, 1);
  auto row = [&](const std::vector<float>& t, std::int64_t s) {
    ConstTensor v = in.view(t, tokens);
    v.data = v.ptr(0, 0, s);
    v.shape[2] = 1;
    return v;
  };
  for (auto _ : state) {
    recurrent.reset();
    for (std::int64_t s = 0; s < tokens; ++s) {
      Tensor out = bhsd(in.out.data(), kBatch, kHeads, tokens, kDim);
      out.data = out.ptr(0, 0, s);
      out.shape[2] = 1;
      recurrent.step(row(in.q, s), row(in.k, s), row(in.v, s), out);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations() * tokens);
  state.SetLabel(std::string(to_string(map)));
}

void linear_range(benchmark::internal::Benchmark* b) {
  b->RangeMultiplier(2)->Range(256, 65536)->Unit(benchmark::kMillisecond)->Complexity();
}
BENCHMARK(BM_LinearElu1)->Apply(linear_range);
BENCHMARK(BM_LinearElu1Causal)->Apply(linear_range);
BENCHMARK(BM_LinearFavor)->Apply(linear_range);
BENCHMARK(BM_LinearFavorCausal)->Apply(linear_range);
BENCHMARK(BM_Linformer)->Apply(linear_range);
BENCHMARK(BM_LinearElu1TwoThreads)
    ->Arg(4096)
    ->Arg(65536)
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LinearStateDecode)
    ->Args({1024, static_cast<int>(FeatureMap::kElu1)})
    ->Args({1024, static_cast<int>(FeatureMap::kFavor)})
    ->Unit(benchmark::kMillisecond);
// Dense is quadratic: S <= 8192 keeps a run short; its fit extrapolates further.
BENCHMARK(BM_Dense)
    ->RangeMultiplier(2)
    ->Range(256, 8192)
    ->Unit(benchmark::kMillisecond)
    ->Complexity(benchmark::oNSquared);

}  // namespace

BENCHMARK_MAIN();
