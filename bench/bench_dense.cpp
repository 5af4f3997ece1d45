// Dense flash attention across sequence lengths (GFLOP/s, O(N²) fit), the same in bf16/f16
// (BM_DenseHalf), the naive three-pass baseline, and sliding-window attention at long lengths.
// Read GFLOP/s against BM_FmaPeak.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "seqattn/plan.hpp"
#include "seqattn/variant_params.hpp"

namespace {

using seqattn::bhsd;

struct Inputs {
  std::int64_t heads, seq, dim;
  std::vector<float> q, k, v, out;

  Inputs(std::int64_t h, std::int64_t s, std::int64_t d)
      : heads(h),
        seq(s),
        dim(d),
        q(static_cast<size_t>(h * s * d)),
        k(q.size()),
        v(q.size()),
        out(q.size()) {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto* t : {&q, &k, &v}) {
      for (float& x : *t) x = dist(gen);
    }
  }
  seqattn::RunRecord run(const seqattn::AttentionOptions& options) {
    return seqattn::attend(bhsd<const float>(q.data(), 1, heads, seq, dim),
                           bhsd<const float>(k.data(), 1, heads, seq, dim),
                           bhsd<const float>(v.data(), 1, heads, seq, dim),
                           bhsd(out.data(), 1, heads, seq, dim), options);
  }
};

constexpr std::int64_t kHeads = 8;

// Args: S, D, causal, threads (0 = all cores). B = 1, H = 8.
void BM_Dense(benchmark::State& state) {
  Inputs in(kHeads, state.range(0), state.range(1));
  seqattn::AttentionOptions options;
  options.mask.causal = state.range(2) != 0;
  options.threads = static_cast<int>(state.range(3));
  seqattn::RunRecord record;
  for (auto _ : state) {
    record = in.run(options);
    benchmark::DoNotOptimize(in.out.data());
  }
  // 4·B·H·S²·D, halved for causal (the variant's own count).
  state.counters["GFLOPS"] = benchmark::Counter(
      record.flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = record.threads;
  state.SetComplexityN(state.range(0));
  state.SetLabel(std::string(record.simd_target));
}
BENCHMARK(BM_Dense)
    ->ArgNames({"S", "D", "causal", "threads"})
    ->ArgsProduct({{128, 512, 1024, 2048, 4096, 8192, 16384}, {64, 128}, {0, 1}, {1, 0}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// q, k, v and out all in one dtype (0 f32, 1 bf16, 2 f16), through a plan, against the same
// shape in f32 in the same binary (interleave them for the ratio). Args: S, D, causal, dtype.
// One thread.
void BM_DenseHalf(benchmark::State& state) {
  const std::int64_t seq = state.range(0), dim = state.range(1);
  const auto dtype = static_cast<seqattn::DType>(state.range(3));
  Inputs in(kHeads, seq, dim);
  std::vector<seqattn::bfloat16> b16[4];
  std::vector<seqattn::float16> f16[4];
  std::vector<float>* f32[4] = {&in.q, &in.k, &in.v, &in.out};
  seqattn::AnyConstTensor views[3];
  seqattn::AnyTensor out;
  for (int t = 0; t < 4; ++t) {
    for (const float x : *f32[t]) {
      b16[t].push_back(seqattn::bfloat16(x));
      f16[t].push_back(seqattn::float16(x));
    }
    seqattn::AnyTensor v = bhsd(f32[t]->data(), 1, kHeads, seq, dim);
    if (dtype == seqattn::DType::kBF16) v = bhsd(b16[t].data(), 1, kHeads, seq, dim);
    if (dtype == seqattn::DType::kF16) v = bhsd(f16[t].data(), 1, kHeads, seq, dim);
    if (t < 3) views[t] = v;
    if (t == 3) out = v;
  }
  seqattn::AttentionOptions options;
  options.mask.causal = state.range(2) != 0;
  options.threads = 1;
  const seqattn::AttentionPlan plan =
      seqattn::make_plan({1, kHeads, kHeads, seq, seq, dim, dim}, options);
  seqattn::RunRecord record;
  for (auto _ : state) {
    record = plan.run(views[0], views[1], views[2], out);
    benchmark::DoNotOptimize(out.data);
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      record.flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(seqattn::to_string(dtype)) + " " + std::string(record.simd_target));
}
BENCHMARK(BM_DenseHalf)
    ->ArgNames({"S", "D", "causal", "dtype"})
    ->ArgsProduct({{4096}, {64, 128}, {0, 1}, {0, 1, 2}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The same sweep per (D, causal, threads) family for the complexity fit.
void BM_DenseScaling(benchmark::State& state) { BM_Dense(state); }
BENCHMARK(BM_DenseScaling)
    ->ArgNames({"S", "D", "causal", "threads"})
    ->ArgsProduct({{256, 512, 1024, 2048, 4096}, {64}, {0}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Complexity(benchmark::oNSquared);

// Every supported head dimension at one length, one thread.
void BM_DenseHeadDim(benchmark::State& state) { BM_Dense(state); }
BENCHMARK(BM_DenseHeadDim)
    ->ArgNames({"S", "D", "causal", "threads"})
    ->ArgsProduct({{2048}, {32, 64, 80, 96, 128, 256}, {0}, {1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Materialise S×S scores, softmax them, multiply by V: plain loops left to the compiler.
void naive_attention(const float* q, const float* k, const float* v, float* out, std::int64_t s,
                     std::int64_t d, std::vector<float>& scores) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  for (std::int64_t i = 0; i < s; ++i) {
    for (std::int64_t j = 0; j < s; ++j) {
      float dot = 0;
      for (std::int64_t c = 0; c < d; ++c) dot += q[i * d + c] * k[j * d + c];
      scores[static_cast<size_t>(i * s + j)] = dot * scale;
    }
  }
  for (std::int64_t i = 0; i < s; ++i) {
    float* row = scores.data() + i * s;
    const float m = *std::max_element(row, row + s);
    float sum = 0;
    for (std::int64_t j = 0; j < s; ++j) sum += row[j] = std::exp(row[j] - m);
    for (std::int64_t j = 0; j < s; ++j) row[j] /= sum;
  }
  for (std::int64_t i = 0; i < s; ++i) {
    float* o = out + i * d;
    std::fill(o, o + d, 0.0f);
    for (std::int64_t j = 0; j < s; ++j) {
      const float p = scores[static_cast<size_t>(i * s + j)];
      for (std::int64_t c = 0; c < d; ++c) o[c] += p * v[j * d + c];
    }
  }
}

// Args: S, D; one thread, B = 1, H = 8.
void BM_NaiveThreePass(benchmark::State& state) {
  Inputs in(kHeads, state.range(0), state.range(1));
  const std::int64_t s = in.seq, d = in.dim;
  std::vector<float> scores(static_cast<size_t>(s * s));
  for (auto _ : state) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      const size_t offset = static_cast<size_t>(h * s * d);
      naive_attention(in.q.data() + offset, in.k.data() + offset, in.v.data() + offset,
                      in.out.data() + offset, s, d, scores);
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  const double flops = 4.0 * kHeads * static_cast<double>(s) * static_cast<double>(s) * d;
  state.counters["GFLOPS"] = benchmark::Counter(
      flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_NaiveThreePass)
    ->ArgNames({"S", "D"})
    ->ArgsProduct({{512, 1024, 2048, 4096}, {64}})
    ->Unit(benchmark::kMillisecond);

// One variant over S (D = 64, B = 1, H = 8): for the O(S) variants tokens/s should stay flat in
// S; GFLOPS counts the work each variant's cost() reports.
void run_linear_in_s(benchmark::State& state, const seqattn::VariantSpec& spec) {
  Inputs in(kHeads, state.range(0), 64);
  seqattn::AttentionOptions options;
  options.variant = spec;
  options.threads = static_cast<int>(state.range(1));
  seqattn::RunRecord record;
  for (auto _ : state) {
    record = in.run(options);
    benchmark::DoNotOptimize(in.out.data());
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["GFLOPS"] =
      benchmark::Counter(record.flops * iterations / 1e9, benchmark::Counter::kIsRate);
  state.counters["tokens_per_s"] = benchmark::Counter(
      static_cast<double>(state.range(0)) * iterations, benchmark::Counter::kIsRate);
  state.SetComplexityN(state.range(0));
  state.SetLabel(std::string(record.simd_target));
}

// BM_Variant/<name>/S/threads: every row of the variant table with its default spec (sliding
// window 256 each side, hierarchical block 64 with as many levels as S needs, linear elu1,
// Linformer k = 256), over S as far as its cost allows: 1024..4096 for a variant whose cost
// grows as S² (dense), 4096..65536 for the others. Issue 13's hierarchical targets read
// BM_Variant/hierarchical against BM_Variant/sliding-window at each S (one thread).
const bool kVariantsRegistered = [] {
  for (const seqattn::Variant v : seqattn::concrete_variants()) {
    const std::string name = "BM_Variant/" + std::string(seqattn::to_string(v));
    const seqattn::VariantSpec spec = seqattn::as_variant_spec(seqattn::make_spec(v, {}));
    const std::vector<std::int64_t> lengths =
        seqattn::grows_quadratically(v)
            ? std::vector<std::int64_t>{1024, 2048, 4096}
            : std::vector<std::int64_t>{4096, 8192, 16384, 32768, 65536};
    benchmark::RegisterBenchmark(name.c_str(),
                                 [spec](benchmark::State& state) { run_linear_in_s(state, spec); })
        ->ArgNames({"S", "threads"})
        ->ArgsProduct({lengths, {1, 0}})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  return true;
}();

}  // namespace

BENCHMARK_MAIN();
