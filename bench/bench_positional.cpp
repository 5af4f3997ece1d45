// What RoPE and ALiBi cost inside the kernels: one-shot attend() (B = 1, H = 8) without an
// encoding, with RoPE fused into the kernel's packing, with RoPE as a user would add it
// without the fusion (a separate vectorised rotation pass over q and k into copies, then
// attend), and with ALiBi; for causal dense attention at S = 4096 and non-causal linear
// attention (elu+1, no ALiBi) at S = 65536, where the O(S·D) rotation is a larger share of
// the O(S·D²) work. Compare the medians of one run:
//   build/release/bench/bench_positional --benchmark_repetitions=5
//     --benchmark_enable_random_interleaving=true --benchmark_report_aggregates_only=true
// (one command line).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "seqattn/plan.hpp"

namespace {

using seqattn::bhsd;

constexpr std::int64_t kHeads = 8;

enum Mode : std::int64_t { kNone, kRopeFused, kRopeSeparatePass, kAlibi };

struct Inputs {
  std::int64_t seq, dim;
  std::vector<float> q, k, v, out, q_rot, k_rot, cos, sin;

  Inputs(std::int64_t s, std::int64_t d)
      : seq(s),
        dim(d),
        q(static_cast<size_t>(kHeads * s * d)),
        k(q.size()),
        v(q.size()),
        out(q.size()),
        q_rot(q.size()),
        k_rot(q.size()),
        cos(static_cast<size_t>(s * d / 2)),
        sin(cos.size()) {
    std::mt19937 gen(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto* t : {&q, &k, &v}) {
      for (float& x : *t) x = dist(gen);
    }
    // The separate pass's tables, built once outside the timing (in its favour).
    const std::int64_t half = d / 2;
    for (std::int64_t pos = 0; pos < s; ++pos) {
      for (std::int64_t p = 0; p < half; ++p) {
        const double angle = static_cast<double>(pos) * std::pow(10000.0, -2.0 * p / d);
        cos[static_cast<size_t>(pos * half + p)] = static_cast<float>(std::cos(angle));
        sin[static_cast<size_t>(pos * half + p)] = static_cast<float>(std::sin(angle));
      }
    }
  }

  // The halves layout (rotate_half), row by row: a loop the compiler vectorises.
  void rotate(const std::vector<float>& src, std::vector<float>& dst) const {
    const std::int64_t half = dim / 2;
    for (std::int64_t row = 0; row < kHeads * seq; ++row) {
      const float* x = src.data() + row * dim;
      float* y = dst.data() + row * dim;
      const float* c = cos.data() + row % seq * half;
      const float* s = sin.data() + row % seq * half;
      for (std::int64_t p = 0; p < half; ++p) {
        y[p] = x[p] * c[p] - x[p + half] * s[p];
        y[p + half] = x[p] * s[p] + x[p + half] * c[p];
      }
    }
  }

  seqattn::RunRecord run(const float* qd, const float* kd, const seqattn::AttentionOptions& o) {
    return seqattn::attend(
        bhsd<const float>(qd, 1, kHeads, seq, dim), bhsd<const float>(kd, 1, kHeads, seq, dim),
        bhsd<const float>(v.data(), 1, kHeads, seq, dim), bhsd(out.data(), 1, kHeads, seq, dim), o);
  }
};

enum Variant : std::int64_t { kDenseCausal, kLinear };

// Args: S, D, mode, variant, threads (0 = all cores).
void BM_Positional(benchmark::State& state) {
  Inputs in(state.range(0), state.range(1));
  const auto mode = static_cast<Mode>(state.range(2));
  seqattn::AttentionOptions options;
  if (state.range(3) == kLinear) {
    options.variant = seqattn::LinearSpec{};
  } else {
    options.mask.causal = true;
  }
  options.threads = static_cast<int>(state.range(4));
  if (mode == kRopeFused) options.rope = seqattn::RotaryEmbedding{};
  if (mode == kAlibi) options.alibi = seqattn::Alibi{};
  seqattn::RunRecord record;
  for (auto _ : state) {
    if (mode == kRopeSeparatePass) {
      in.rotate(in.q, in.q_rot);
      in.rotate(in.k, in.k_rot);
      record = in.run(in.q_rot.data(), in.k_rot.data(), options);
    } else {
      record = in.run(in.q.data(), in.k.data(), options);
    }
    benchmark::DoNotOptimize(in.out.data());
  }
  state.counters["GFLOPS"] = benchmark::Counter(
      record.flops * static_cast<double>(state.iterations()) / 1e9, benchmark::Counter::kIsRate);
  state.SetLabel(std::string(record.simd_target));
}
void Cases(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : {64, 128}) {
    for (const Mode mode : {kNone, kRopeFused, kRopeSeparatePass, kAlibi}) {
      b->Args({4096, d, mode, kDenseCausal, 1});
    }
    for (const Mode mode : {kNone, kRopeFused, kRopeSeparatePass}) {
      b->Args({65536, d, mode, kLinear, 1});
    }
  }
}
BENCHMARK(BM_Positional)
    ->ArgNames({"S", "D", "mode", "variant", "threads"})
    ->Apply(Cases)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
