// `seqattn bench`: timing on random inputs, one shape or a sweep over sequence lengths.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "seqattn/error.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/measure.hpp"
#include "src/cli/paged_bench.hpp"
#include "src/cli/positional_flags.hpp"
#include "src/cli/ring_bench.hpp"
#include "src/cli/variant_flags.hpp"

namespace seqattn::cli {
namespace {

struct BenchFlags {
  Shape shape;
  CLI::Option* seq_opt = nullptr;
  CLI::Option* dim_v_opt = nullptr;
  CLI::Option* kv_heads_opt = nullptr;
  CLI::Option* seq_q_opt = nullptr;
  std::int64_t seq_q = 0;     // with --seq-q: new queries over a KvCache of S_k = --seq tokens
  std::string dtype = "f32";  // q and out (and k/v unless --kv-dtype)
  // k/v, or the KvCache's dtype with --seq-q; not given: --dtype ('' is refused, not default).
  std::optional<std::string> kv_dtype;
  std::string fp32_precision = "ieee";
  bool causal = false;
  int threads = 0;
  int repeat = 5;
  int warmup = 1;
  bool json = false;
  bool sweep = false;
  bool ring = false;  // under mpirun: ring attention over the ranks (S = --seq in total)
  bool baseline = false;
  bool paged = false;  // batched decode over a PagedKvCache (paged_bench.hpp)
  std::string seq_lens = "512:8192";
  std::string seqs = "128,256,512,1024,2048,4096,8192";
  VariantFlags variant;
  PositionalFlags positional;
};

void check_positive(std::int64_t value, const char* argument) {
  if (value < 1) throw Error(ErrorKind::kInvalidArgument, argument, ">= 1", std::to_string(value));
}

nlohmann::json point_json(const BenchFlags& f, const Shape& s, const Timing& t) {
  nlohmann::json j = timing_json(t);
  j["requested"] = f.variant.variant;
  j["batch"] = s.batch;
  j["heads"] = s.heads;
  j["kv_heads"] = s.kv_heads;
  j["seq"] = s.seq;
  if (f.seq_q_opt->count() > 0) {
    j["seq_q"] = f.seq_q;
    j["kv_cache"] = true;
    j["kv_bytes"] = kv_cache_bytes(s);
    j["kv_gbps"] = number_or_null(kv_cache_bytes(s) / t.median_seconds * 1e-9);
  }
  j["dim"] = s.dim;
  j["dim_v"] = s.dim_v;
  j["dtype"] = std::string(to_string(s.dtype));
  j["kv_dtype"] = std::string(to_string(s.kv_dtype));
  j["causal"] = f.causal;
  j["repeat"] = f.repeat;
  j["warmup"] = f.warmup;
  return j;
}

Timing bench_point(const BenchFlags& f, const Shape& s, const AttentionOptions& options) {
  if (f.seq_q_opt->count() > 0) return time_decode(s, f.seq_q, options, f.warmup, f.repeat);
  Workload workload(s);
  return time_attend(workload, options, f.warmup, f.repeat);
}

void bench(BenchFlags f) {
  for (const auto& [value, name] : {std::pair{f.shape.batch, "--batch"},
                                    {f.shape.heads, "--heads"},
                                    {f.shape.dim, "--dim"},
                                    {static_cast<std::int64_t>(f.repeat), "--repeat"}}) {
    check_positive(value, name);
  }
  if (f.warmup < 0)
    throw Error(ErrorKind::kInvalidArgument, "--warmup", ">= 0", std::to_string(f.warmup));
  if (f.dim_v_opt->count() == 0) f.shape.dim_v = f.shape.dim;
  if (f.kv_heads_opt->count() == 0) f.shape.kv_heads = f.shape.heads;
  if (f.seq_q_opt->count() > 0) check_positive(f.seq_q, "--seq-q");
  f.shape.dtype = parse_dtype(f.dtype, "--dtype");
  f.shape.kv_dtype = f.kv_dtype ? parse_dtype(*f.kv_dtype, "--kv-dtype", true) : f.shape.dtype;
  if (f.shape.kv_dtype == DType::kI8 && f.seq_q_opt->count() == 0 && !f.paged) {
    throw Error(ErrorKind::kUnsupported, "--kv-dtype",
                "f32, bf16 or f16 without --seq-q or --paged (i8 is a KV cache's storage)", "i8",
                "add --seq-q N (or --paged) to bench attention over an int8 cache");
  }
  const std::string dtypes = std::string(to_string(f.shape.dtype)) + "/" +
                             std::string(to_string(f.shape.kv_dtype)) + " (q,out/k,v)";
  AttentionOptions options;
  options.variant = make_spec(f.variant);
  apply_positional(f.positional, options);
  options.mask.causal = f.causal;
  options.threads = f.threads;
  options.fp32_precision = parse_fp32_precision(f.fp32_precision, "--fp32-precision");

  if (f.paged) {
    if (f.ring || f.sweep || f.seq_opt->count() > 0) {
      throw Error(ErrorKind::kUnsupported, "--paged", "--seq-lens A:B, no --seq, --ring or --sweep",
                  "other flags", "e.g. seqattn bench --paged --batch 32 --seq-lens 512:8192");
    }
    PagedBenchSpec spec{
        f.shape, f.seq_q_opt->count() > 0 ? f.seq_q : 1, 0, 0, options, f.warmup, f.repeat, f.json};
    parse_seq_lens(f.seq_lens, "--seq-lens", spec.min_len, spec.max_len);
    bench_paged(spec);
    return;
  }
  if (f.ring) {
    if (f.seq_opt->count() == 0 || f.sweep || f.seq_q_opt->count() > 0 ||
        f.shape.dtype != DType::kF32 || f.shape.kv_dtype != DType::kF32)
      throw Error(ErrorKind::kUnsupported, "--ring", "one --seq, f32, no --seq-q or --sweep",
                  "other flags", "run it as mpirun -np P seqattn bench --ring --seq S ...");
    check_positive(f.shape.seq, "--seq");
    bench_ring({f.shape, options, f.warmup, f.repeat, f.json, f.baseline});
    return;
  }
  if (f.seq_opt->count() > 0 && !f.sweep) {
    check_positive(f.shape.seq, "--seq");
    const Timing t = bench_point(f, f.shape, options);
    if (f.json) {
      std::cout << point_json(f, f.shape, t).dump(2) << std::endl;
      return;
    }
    if (f.seq_q_opt->count() > 0) {
      std::printf(
          "%s over a %s KV cache  B=%lld H=%lld H_kv=%lld S_q=%lld S_k=%lld D=%lld: median %.3f "
          "ms, K+V %.2f GB/s, %.2f GFLOP/s (%d threads, %s, %s compute, prefetch into %s)\n",
          std::string(to_string(t.record.variant)).c_str(),
          std::string(to_string(f.shape.kv_dtype)).c_str(), static_cast<long long>(f.shape.batch),
          static_cast<long long>(f.shape.heads), static_cast<long long>(f.shape.kv_heads),
          static_cast<long long>(f.seq_q), static_cast<long long>(f.shape.seq),
          static_cast<long long>(f.shape.dim), t.median_seconds * 1e3,
          kv_cache_bytes(f.shape) / t.median_seconds * 1e-9, t.gflops(), t.record.threads,
          std::string(t.record.simd_target).c_str(), std::string(t.record.compute_path).c_str(),
          std::string(t.record.decode_prefetch).c_str());
      return;
    }
    std::printf(
        "%s %s  B=%lld H=%lld S=%lld D=%lld: median %.3f ms, %.2f GFLOP/s (%d threads, %s, %s "
        "compute)\n",
        std::string(to_string(t.record.variant)).c_str(), dtypes.c_str(),
        static_cast<long long>(f.shape.batch), static_cast<long long>(f.shape.heads),
        static_cast<long long>(f.shape.seq), static_cast<long long>(f.shape.dim),
        t.median_seconds * 1e3, t.gflops(), t.record.threads,
        std::string(t.record.simd_target).c_str(), std::string(t.record.compute_path).c_str());
    return;
  }

  nlohmann::json rows = nlohmann::json::array();
  if (!f.json) {
    std::printf("seqattn bench sweep: %s %s, B=%lld H=%lld D=%lld%s, median of %d\n",
                f.variant.variant.c_str(), dtypes.c_str(), static_cast<long long>(f.shape.batch),
                static_cast<long long>(f.shape.heads), static_cast<long long>(f.shape.dim),
                f.causal ? ", causal" : "", f.repeat);
    std::printf("%8s  %-15s %12s %10s %8s\n", "S", "variant", "median ms", "GFLOP/s", "threads");
  }
  for (const std::int64_t seq : parse_int_list(f.seqs, "--seqs")) {
    check_positive(seq, "--seqs");
    Shape s = f.shape;
    s.seq = seq;
    const Timing t = bench_point(f, s, options);
    if (f.json) {
      rows.push_back(point_json(f, s, t));
      continue;
    }
    std::printf("%8lld  %-15s %12.3f %10.2f %8d\n", static_cast<long long>(seq),
                std::string(to_string(t.record.variant)).c_str(), t.median_seconds * 1e3,
                t.gflops(), t.record.threads);
    std::fflush(stdout);
  }
  if (f.json) std::cout << nlohmann::json{{"sweep", rows}}.dump(2) << std::endl;
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app.add_subcommand(
      "bench", "time a variant on random inputs (no --seq: sweep S over 128..8192)");
  cmd->add_option("--batch", flags->shape.batch, "batch B")->capture_default_str();
  cmd->add_option("--heads", flags->shape.heads, "query heads H")->capture_default_str();
  flags->kv_heads_opt =
      cmd->add_option("--kv-heads", flags->shape.kv_heads, "key/value heads (default H)");
  flags->seq_opt =
      cmd->add_option("--seq", flags->shape.seq,
                      "sequence length S (S_q = S_k; with --seq-q the cache length S_k)");
  flags->seq_q_opt = cmd->add_option(
      "--seq-q", flags->seq_q,
      "new queries over a KV cache of --seq tokens (decode: 1), through a plan and a KvCache");
  cmd->add_option("--dim", flags->shape.dim, "head dimension D")->capture_default_str();
  flags->dim_v_opt = cmd->add_option("--dim-v", flags->shape.dim_v, "value dimension (default D)");
  cmd->add_option("--dtype", flags->dtype, "element type of q and out (and k, v): f32, bf16, f16")
      ->capture_default_str();
  cmd->add_option("--kv-dtype", flags->kv_dtype,
                  "element type of k and v, or of the KV cache with --seq-q (default --dtype; "
                  "i8: an int8 cache, --seq-q only)");
  add_fp32_precision_flag(*cmd, flags->fp32_precision);
  cmd->add_flag("--paged", flags->paged,
                "batched decode over a PagedKvCache: --batch sequences of --seq-lens lengths, "
                "compared with a read probe of the same bytes");
  cmd->add_option("--seq-lens", flags->seq_lens,
                  "with --paged: lengths A:B, spread evenly (fixed shuffle) over the batch")
      ->capture_default_str();
  cmd->add_flag("--causal", flags->causal, "causal mask");
  cmd->add_option("--threads", flags->threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--repeat", flags->repeat, "timed runs (median reported)")->capture_default_str();
  cmd->add_option("--warmup", flags->warmup, "untimed runs first")->capture_default_str();
  cmd->add_flag("--json", flags->json, "print JSON on stdout");
  cmd->add_flag("--sweep", flags->sweep, "sweep S over --seqs (the default without --seq)");
  cmd->add_option("--seqs", flags->seqs, "sweep lengths")->capture_default_str();
  cmd->add_flag("--ring", flags->ring,
                "ring attention over MPI: run as mpirun -np P seqattn bench --ring --seq S "
                "(dense: contiguous shards, causal: zig-zag; sliding-window: band exchange)");
  cmd->add_flag("--baseline", flags->baseline,
                "with --ring: rank 0 also times one process over the whole sequence, "
                "interleaved, and prints the speed-up");
  add_variant_flags(*cmd, flags->variant);
  add_positional_flags(*cmd, flags->positional);
  cmd->callback([flags] { bench(*flags); });
}

}  // namespace seqattn::cli
