// Decode against a KV cache: S_q new queries over S_k cached tokens, H = 32 query heads,
// H_kv = 8, D = 128, causal, f32 queries, through a plan over an f32, bf16 or f16 cache
// (BM_Decode) and, for comparison, the one-shot q/k/v path that repacks K and V on every call
// (BM_DecodeOneShot). KV_GBps is the K+V bytes the cache stores (2 per element in bf16/f16)
// divided by the time: read it against BM_ReadBandwidth in the same binary.
// BM_PlanOverhead times plan.run() and the kernel it calls on a tiny problem.
#include <benchmark/benchmark.h>
#include <hwy/aligned_allocator.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "src/api/kv_cache_access.hpp"
#include "src/api/plan_state.hpp"
#include "src/kernel/decode/prefetch_level.hpp"

namespace {

using seqattn::bhsd;

std::vector<float> random_floats(std::int64_t n, std::uint32_t seed) {
  std::vector<float> x(static_cast<size_t>(n));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& e : x) e = dist(gen);
  return x;
}

struct DecodeSetup {
  static constexpr std::int64_t kHeads = 32, kKvHeads = 8, kDim = 128;
  std::int64_t seq_k, seq_q;
  seqattn::KvCache cache;
  std::vector<float> q, out;

  DecodeSetup(std::int64_t sk, std::int64_t sq, std::int64_t heads = kHeads,
              std::int64_t kv_heads = kKvHeads, std::int64_t dim = kDim,
              seqattn::DType kv_dtype = seqattn::DType::kF32)
      : seq_k(sk),
        seq_q(sq),
        cache({1, kv_heads, sk, dim, dim, kv_dtype}),
        q(random_floats(heads * sq * dim, 1)),
        out(q.size()) {
    const std::vector<float> k = random_floats(kv_heads * sk * dim, 2);
    const std::vector<float> v = random_floats(kv_heads * sk * dim, 3);
    cache.append(bhsd<const float>(k.data(), 1, kv_heads, sk, dim),
                 bhsd<const float>(v.data(), 1, kv_heads, sk, dim));
  }
  seqattn::ConstTensor q_view() const {
    const auto& s = cache.shape();
    return bhsd<const float>(q.data(), 1, static_cast<std::int64_t>(q.size()) / (seq_q * s.dim),
                             seq_q, s.dim);
  }
  seqattn::Tensor out_view() {
    const auto& s = cache.shape();
    return bhsd(out.data(), 1, static_cast<std::int64_t>(out.size()) / (seq_q * s.dim_v), seq_q,
                s.dim_v);
  }
  double kv_bytes() const {
    const auto& s = cache.shape();
    return static_cast<double>(seqattn::dtype_size(s.dtype)) *
           static_cast<double>(s.heads_kv * seq_k * (s.dim + s.dim_v));
  }
};

// Args: S_k, threads, S_q, cache dtype (0 f32, 1 bf16, 2 f16).
void BM_Decode(benchmark::State& state) {
  const auto kv_dtype = static_cast<seqattn::DType>(state.range(3));
  DecodeSetup d(state.range(0), state.range(2), DecodeSetup::kHeads, DecodeSetup::kKvHeads,
                DecodeSetup::kDim, kv_dtype);
  seqattn::AttentionOptions options;
  options.mask.causal = true;
  options.threads = static_cast<int>(state.range(1));
  const seqattn::AttentionPlan plan =
      make_plan(seqattn::cache_shape(d.cache.shape(), DecodeSetup::kHeads, d.seq_q), options);
  auto workspace = hwy::AllocateAligned<std::byte>(plan.workspace_bytes());
  const std::span<std::byte> ws(workspace.get(), plan.workspace_bytes());
  seqattn::RunRecord record;
  for (auto _ : state) {
    record = plan.run(d.q_view(), d.cache, d.out_view(), {.workspace = ws});
    benchmark::DoNotOptimize(d.out.data());
  }
  const double runs = static_cast<double>(state.iterations());
  state.counters["KV_GBps"] =
      benchmark::Counter(d.kv_bytes() * runs / 1e9, benchmark::Counter::kIsRate);
  state.counters["GFLOPS"] =
      benchmark::Counter(record.flops * runs / 1e9, benchmark::Counter::kIsRate);
  state.counters["threads"] = record.threads;
  state.SetLabel(std::string("kv ") + std::string(seqattn::to_string(kv_dtype)));
}
BENCHMARK(BM_Decode)
    ->ArgNames({"S_k", "threads", "S_q", "kv"})
    ->ArgsProduct({{512, 4096, 32768}, {1, 2}, {1}, {0, 1, 2}})
    ->Args({4096, 2, 16, 0})
    ->Args({4096, 2, 16, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// The q/k/v path on the same problem (K and V packed on every call). Args: S_k, threads, S_q.
void BM_DecodeOneShot(benchmark::State& state) {
  const std::int64_t sk = state.range(0), sq = state.range(2), h = 32, hkv = 8, dim = 128;
  const std::vector<float> q = random_floats(h * sq * dim, 1);
  const std::vector<float> k = random_floats(hkv * sk * dim, 2),
                           v = random_floats(hkv * sk * dim, 3);
  std::vector<float> out(q.size());
  seqattn::AttentionOptions options;
  options.mask.causal = true;
  options.threads = static_cast<int>(state.range(1));
  for (auto _ : state) {
    seqattn::attend(
        bhsd<const float>(q.data(), 1, h, sq, dim), bhsd<const float>(k.data(), 1, hkv, sk, dim),
        bhsd<const float>(v.data(), 1, hkv, sk, dim), bhsd(out.data(), 1, h, sq, dim), options);
    benchmark::DoNotOptimize(out.data());
  }
  state.counters["KV_GBps"] = benchmark::Counter(
      8.0 * static_cast<double>(hkv * sk * dim) * static_cast<double>(state.iterations()) / 1e9,
      benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DecodeOneShot)
    ->ArgNames({"S_k", "threads", "S_q"})
    ->Args({4096, 1, 1})
    ->Args({32768, 2, 1})
    ->Args({4096, 2, 16})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// S_q = 1, S_k = 64, H = H_kv = 8, D = 64: plan.run (arg 0) against the kernel alone (arg 1).
void BM_PlanOverhead(benchmark::State& state) {
  DecodeSetup d(64, 1, 8, 8, 64);
  seqattn::AttentionOptions options;
  options.threads = 1;
  const seqattn::AttentionPlan plan =
      make_plan(seqattn::cache_shape(d.cache.shape(), 8, 1), options);
  auto workspace = hwy::AllocateAligned<std::byte>(plan.workspace_bytes());
  const std::span<std::byte> ws(workspace.get(), plan.workspace_bytes());
  seqattn::detail::CacheProblem kernel;
  kernel.q = d.q_view();
  kernel.out = d.out_view();
  kernel.kv = seqattn::detail::KvCacheAccess::packed(d.cache);
  kernel.scale = 0.125f;
  const std::vector<std::int64_t> no_globals;
  kernel.globals = &no_globals;
  kernel.split = seqattn::detail::cache_split(1, 8, 1, 1, 64);
  kernel.threads = 1;
  kernel.prefetch = seqattn::detail::decode_prefetch();  // as plan.run sets it
  const bool whole_call = state.range(0) == 0;
  for (auto _ : state) {
    if (whole_call) {
      plan.run(d.q_view(), d.cache, d.out_view(), {.workspace = ws});
    } else {
      seqattn::detail::cache_attention(kernel, reinterpret_cast<float*>(ws.data()));
    }
    benchmark::DoNotOptimize(d.out.data());
  }
  state.SetLabel(whole_call ? "plan.run" : "kernel only");
}
BENCHMARK(BM_PlanOverhead)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
