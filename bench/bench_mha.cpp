// MultiHeadAttention forward, B = 1, d_model = 512, H = 8 (d_k = 64): where the time goes —
// projections (GEMM), attention (attend) and the rest (splits, merges, biases, bookkeeping).
// And a bf16 model against the same layer in fp32 (d_model = 1024, H = 16, issue 31's target):
// its projections run on AMX tiles only where SEQATTN_COMPUTE_PATH=amx-bf16 chooses them (the
// label says which path ran); elsewhere bf16 is widened and runs at the fp32 rate.
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "seqattn/half.hpp"
#include "seqattn/mha.hpp"

namespace {

using namespace seqattn;

constexpr std::int64_t kModel = 512, kHeads = 8;

std::vector<float> random_vector(std::size_t n, unsigned seed, float scale) {
  std::vector<float> x(n);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (float& v : x) v = dist(gen);
  return x;
}

MultiHeadAttention make_layer(const VariantSpec& variant, int threads, bool bias) {
  MhaConfig config;
  config.d_model = kModel;
  config.num_heads = kHeads;
  config.variant = variant;
  config.threads = threads;
  config.bias = bias;
  MultiHeadAttention layer(config);
  const float s = 1.0f / std::sqrt(static_cast<float>(kModel));
  const std::vector<float> w = random_vector(kModel * kModel, 1, s);
  const std::vector<float> b = random_vector(kModel, 2, 0.1f);
  for (Projection p :
       {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
    layer.set_weights(p, w.data(), kModel, kModel);
    if (bias) layer.set_bias(p, b.data(), kModel);
  }
  return layer;
}

void run_mha(benchmark::State& state, const VariantSpec& variant, bool bias) {
  const std::int64_t seq = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  MultiHeadAttention layer = make_layer(variant, threads, bias);
  const std::vector<float> x = random_vector(static_cast<std::size_t>(seq * kModel), 3, 1.0f);
  std::vector<float> out(x.size());
  const SequenceView<const float> in{x.data(), 1, seq, kModel, 0};
  const SequenceView<float> result{out.data(), 1, seq, kModel, 0};
  layer.forward(in, result);  // first touch of the workspace and the GEMM packing buffers
  double projection = 0, attention = 0, total = 0, flops = 0;
  for (auto _ : state) {
    const MhaRecord r = layer.forward(in, result);
    projection += r.projection_seconds;
    attention += r.attention_seconds;
    total += r.total_seconds;
    flops += r.projection_flops + r.attention.flops;
    benchmark::DoNotOptimize(out.data());
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["proj_ms"] = 1e3 * projection / n;
  state.counters["attn_ms"] = 1e3 * attention / n;
  state.counters["other_us"] = 1e6 * (total - projection - attention) / n;
  state.counters["other_%"] = 100.0 * (total - projection - attention) / total;
  state.counters["GFLOP/s"] = 1e-9 * flops / total;
  state.counters["threads"] = threads;
}

void BM_MhaDense(benchmark::State& state) { run_mha(state, DenseSpec{}, false); }
BENCHMARK(BM_MhaDense)
    ->ArgsProduct({{512, 1024, 2048, 4096, 8192}, {1}})
    ->Args({4096, 2})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MhaDenseBias(benchmark::State& state) { run_mha(state, DenseSpec{}, true); }
BENCHMARK(BM_MhaDenseBias)
    ->Args({4096, 1})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MhaSlidingWindow(benchmark::State& state) {
  run_mha(state, SlidingWindowSpec{256, 256, {}}, false);
}
BENCHMARK(BM_MhaSlidingWindow)
    ->ArgsProduct({{512, 2048, 8192}, {1}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MhaLinear(benchmark::State& state) { run_mha(state, LinearSpec{}, false); }
BENCHMARK(BM_MhaLinear)
    ->ArgsProduct({{512, 2048, 8192}, {1}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

void BM_MhaLinformer(benchmark::State& state) {
  LinformerSpec spec;
  spec.proj_len = 256;
  run_mha(state, spec, false);
}
BENCHMARK(BM_MhaLinformer)
    ->ArgsProduct({{512, 2048, 8192}, {1}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// d_model = 1024, H = 16, no bias: fp32 weights and activations, or the same rounded to bf16.
template <class T>
void run_model(benchmark::State& state) {
  constexpr std::int64_t kWide = 1024;
  const std::int64_t seq = state.range(0);
  MhaConfig config;
  config.d_model = kWide;
  config.num_heads = 16;
  config.threads = static_cast<int>(state.range(1));
  MultiHeadAttention layer(config);
  const std::vector<float> w32 =
      random_vector(kWide * kWide, 1, 1.0f / std::sqrt(static_cast<float>(kWide)));
  const std::vector<T> w(w32.begin(), w32.end());
  for (Projection p :
       {Projection::kQuery, Projection::kKey, Projection::kValue, Projection::kOutput}) {
    layer.set_weights(p, w.data(), kWide, kWide);
  }
  const std::vector<float> x32 = random_vector(static_cast<std::size_t>(seq * kWide), 3, 1.0f);
  const std::vector<T> x(x32.begin(), x32.end());
  std::vector<T> out(x.size());
  const SequenceView<const T> in{x.data(), 1, seq, kWide, 0};
  const SequenceView<T> result{out.data(), 1, seq, kWide, 0};
  const MhaRecord first = layer.forward(in, result);  // packs the weights on a tile path
  double total = 0, flops = 0;
  for (auto _ : state) {
    const MhaRecord r = layer.forward(in, result);
    total += r.total_seconds;
    flops += r.projection_flops + r.attention.flops;
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["GFLOP/s"] = 1e-9 * flops / total;
  state.SetLabel("projections " + first.projection_path + ", attention " +
                 std::string(first.attention.compute_path));
}

void BM_MhaModelF32(benchmark::State& state) { run_model<float>(state); }
void BM_MhaModelBf16(benchmark::State& state) { run_model<bfloat16>(state); }
BENCHMARK(BM_MhaModelF32)
    ->Args({2048, 1})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MhaModelBf16)
    ->Args({2048, 1})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
