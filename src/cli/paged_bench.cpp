// `seqattn bench --paged` (paged_bench.hpp).
#include "src/cli/paged_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "seqattn/error.hpp"
#include "seqattn/paged_kv_cache.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/workspace.hpp"
#include "src/cli/commands.hpp"

namespace seqattn::cli {
namespace {

// K + V bytes the pool stores for the sequences' tokens (what a step reads).
double paged_kv_bytes(const Shape& s, const std::vector<std::int64_t>& lengths) {
  Shape one = s;
  one.batch = 1;
  one.seq = std::accumulate(lengths.begin(), lengths.end(), std::int64_t{0});
  return kv_cache_bytes(one);
}

}  // namespace

void parse_seq_lens(const std::string& text, const std::string& argument, std::int64_t& lo,
                    std::int64_t& hi) {
  const std::size_t colon = text.find(':');
  try {
    if (colon == std::string::npos) throw std::invalid_argument("no colon");
    std::size_t used = 0;
    lo = std::stoll(text.substr(0, colon), &used);
    if (used != colon) throw std::invalid_argument("trailing");
    const std::string rest = text.substr(colon + 1);
    hi = std::stoll(rest, &used);
    if (used != rest.size()) throw std::invalid_argument("trailing");
  } catch (const std::exception&) {
    throw Error(ErrorKind::kInvalidArgument, argument, "A:B, two lengths, e.g. 512:8192",
                "'" + text + "'");
  }
  if (lo < 1 || hi < lo) {
    throw Error(ErrorKind::kInvalidArgument, argument, "1 <= A <= B", "'" + text + "'");
  }
}

std::vector<std::int64_t> spread_lengths(std::int64_t n, std::int64_t lo, std::int64_t hi) {
  std::vector<std::int64_t> lengths;
  for (std::int64_t i = 0; i < n; ++i)
    lengths.push_back(n == 1 ? hi : lo + (hi - lo) * i / (n - 1));
  std::mt19937 gen(2026);
  std::shuffle(lengths.begin(), lengths.end(), gen);
  return lengths;
}

PagedTiming time_paged(const PagedBenchSpec& spec) {
  const Shape& s = spec.shape;
  PagedTiming result;
  result.lengths = spread_lengths(s.batch, spec.min_len, spec.max_len);
  std::int64_t blocks = 0;
  for (const std::int64_t len : result.lengths) {
    blocks += (len + kPagedBlockTokens - 1) / kPagedBlockTokens;
  }
  PagedKvCache pool({s.kv_heads, s.dim, s.dim_v, blocks, s.kv_dtype, spec.options.rope});
  std::vector<PagedKvCache::SequenceId> ids;
  for (const std::int64_t len : result.lengths) {
    ids.push_back(pool.add());
    // f32 tokens, converted to the pool's dtype as they are appended.
    const Workload tokens(Shape{1, s.kv_heads, s.kv_heads, len, s.dim, s.dim_v},
                          static_cast<std::uint64_t>(ids.size()));
    pool.append(ids.back(), tokens.k_view(), tokens.v_view());
  }
  Shape queries = s;
  queries.seq = spec.seq_q;
  queries.kv_heads = s.heads;
  queries.dim_v = s.dim;
  queries.kv_dtype = DType::kF32;
  Workload w(queries, 7);
  std::vector<float> out(static_cast<std::size_t>(s.batch * s.heads * spec.seq_q * s.dim_v));
  const AttentionPlan plan = make_plan(
      paged_shape(pool.shape(), s.batch, s.heads, spec.seq_q, spec.max_len), spec.options);
  WorkspaceBuffer workspace;
  const std::span<std::byte> ws = workspace.get(plan.workspace_bytes());
  const Tensor ov = bhsd(out.data(), s.batch, s.heads, spec.seq_q, s.dim_v);
  Timing& t = result.timing;
  result.kv_bytes = paged_kv_bytes(s, result.lengths);
  // Untimed runs first (at least one: its record gives the team the probe reads with).
  int threads = 1;
  for (int i = 0; i < std::max(spec.warmup, 1); ++i) {
    threads = plan.run(w.q_view(), pool, ids, ov, {.workspace = ws}).threads;
  }
  // A probe of as many bytes and threads, each read right after a kernel run: interleaved, so
  // that a busy moment of a shared host slows both medians, not one of them.
  ReadProbe probe(static_cast<std::size_t>(result.kv_bytes), threads);
  probe.time_one();  // untimed: warms the probe's threads
  std::vector<double> probe_seconds;
  for (int i = 0; i < spec.repeat; ++i) {
    t.record = plan.run(w.q_view(), pool, ids, ov, {.workspace = ws});
    t.seconds.push_back(t.record.seconds);
    probe_seconds.push_back(probe.time_one());
  }
  while (probe_seconds.size() < 3) probe_seconds.push_back(probe.time_one());  // a median of 3+
  t.median_seconds = median(t.seconds);
  result.probe.bytes = probe.bytes();
  result.probe.threads = probe.threads();
  result.probe.runs = static_cast<int>(probe_seconds.size());
  result.probe.median_seconds = median(probe_seconds);
  return result;
}

void bench_paged(const PagedBenchSpec& spec) {
  const Shape& s = spec.shape;
  const PagedTiming p = time_paged(spec);
  const Timing& t = p.timing;
  const double gbps = p.kv_gbps(), probe = p.probe.gbps();
  if (spec.json) {
    nlohmann::json j = timing_json(t);
    j["paged"] = true;
    j["batch"] = s.batch;
    j["heads"] = s.heads;
    j["kv_heads"] = s.kv_heads;
    j["seq_q"] = spec.seq_q;
    j["seq_lens"] = p.lengths;
    j["dim"] = s.dim;
    j["dim_v"] = s.dim_v;
    j["kv_dtype"] = std::string(to_string(s.kv_dtype));
    j["kv_bytes"] = p.kv_bytes;
    j["kv_gbps"] = number_or_null(gbps);
    j["probe_gbps"] = number_or_null(probe);
    j["percent_of_probe"] = number_or_null(100.0 * gbps / probe);
    j["repeat"] = spec.repeat;
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::printf(
      "%s over a paged %s KV cache  %lld sequences of %lld..%lld tokens, H=%lld H_kv=%lld "
      "S_q=%lld D=%lld: median %.3f ms, K+V %.2f GB/s (%.0f%% of a %.0f MiB read probe, %.2f "
      "GB/s), %.2f GFLOP/s (%d threads, %s, prefetch into %s)\n",
      std::string(to_string(t.record.variant)).c_str(), std::string(to_string(s.kv_dtype)).c_str(),
      static_cast<long long>(s.batch), static_cast<long long>(spec.min_len),
      static_cast<long long>(spec.max_len), static_cast<long long>(s.heads),
      static_cast<long long>(s.kv_heads), static_cast<long long>(spec.seq_q),
      static_cast<long long>(s.dim), t.median_seconds * 1e3, gbps, 100.0 * gbps / probe,
      p.kv_bytes / 1048576.0, probe, t.gflops(), t.record.threads,
      std::string(t.record.simd_target).c_str(), std::string(t.record.decode_prefetch).c_str());
}

}  // namespace seqattn::cli
