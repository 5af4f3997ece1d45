// The packed GEMM engine: square problems and the attention projection shape
// [S, d_model] × [d_model, 3·d_model], one and two threads, reported in GFLOP/s.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "seqattn/workspace.hpp"
#include "src/gemm/gemm.hpp"

namespace {

using seqattn::detail::sgemm;
using seqattn::detail::Transpose;

std::vector<float> random_matrix(std::int64_t rows, std::int64_t cols, unsigned seed) {
  std::vector<float> x(static_cast<size_t>(rows * cols));
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : x) v = dist(gen);
  return x;
}

void run_gemm(benchmark::State& state, std::int64_t m, std::int64_t n, std::int64_t k,
              Transpose tb) {
  const int threads = static_cast<int>(state.range(1));
  const std::vector<float> a = random_matrix(m, k, 1);
  const std::vector<float> b =
      random_matrix(tb == Transpose::kNo ? k : n, tb == Transpose::kNo ? n : k, 2);
  std::vector<float> c(static_cast<size_t>(m * n));
  const std::int64_t ldb = tb == Transpose::kNo ? n : k;
  // The packing scratch, kept between calls as the library's callers keep theirs.
  seqattn::WorkspaceBuffer pack_bytes;
  const std::size_t pack_floats = seqattn::detail::sgemm_pack_floats(m, n, k, threads);
  const std::span<float> pack(reinterpret_cast<float*>(pack_bytes.get(4 * pack_floats).data()),
                              pack_floats);
  for (auto _ : state) {
    sgemm(Transpose::kNo, tb, m, n, k, 1.0f, a.data(), k, b.data(), ldb, 0.0f, c.data(), n, threads,
          pack);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = threads;
  state.SetLabel(seqattn::detail::gemm_blocking().target);
}

// C[n, n] = A[n, n] · B[n, n].
void BM_SgemmSquare(benchmark::State& state) {
  const std::int64_t n = state.range(0);
  run_gemm(state, n, n, n, Transpose::kNo);
}
BENCHMARK(BM_SgemmSquare)
    ->ArgsProduct({{128, 255, 256, 512, 1024, 2048}, {1, 2}})
    ->ArgNames({"n", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The fused Q/K/V projection of MultiHeadAttention: [S, 512] × [512, 1536].
void BM_SgemmAttentionQkv(benchmark::State& state) {
  run_gemm(state, state.range(0), 1536, 512, Transpose::kNo);
}
BENCHMARK(BM_SgemmAttentionQkv)
    ->ArgsProduct({{512, 2048, 4096, 8192}, {1, 2}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The output projection W_O: [S, 512] × [512, 512].
void BM_SgemmAttentionOut(benchmark::State& state) {
  run_gemm(state, state.range(0), 512, 512, Transpose::kNo);
}
BENCHMARK(BM_SgemmAttentionOut)
    ->ArgsProduct({{4096}, {1, 2}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// The same product with B stored as PyTorch's nn.Linear weight [out, in] (transposed B).
void BM_SgemmAttentionQkvTransB(benchmark::State& state) {
  run_gemm(state, state.range(0), 1536, 512, Transpose::kYes);
}
BENCHMARK(BM_SgemmAttentionQkvTransB)
    ->ArgsProduct({{4096}, {1, 2}})
    ->ArgNames({"S", "threads"})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
