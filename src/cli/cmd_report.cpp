// `seqattn report`: the scaling sweep (every built variant over S, at each thread count).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <tuple>
#include <utility>

#include "seqattn/error.hpp"
#include "seqattn/variant_params.hpp"
#include "src/cli/catalogue.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/paged_bench.hpp"
#include "src/cli/read_bandwidth.hpp"
#include "src/cli/report.hpp"
#include "src/cli/report_accuracy.hpp"
#include "src/cli/variant_flags.hpp"

namespace seqattn::cli {
namespace {

// Every row of the variant table, comma-separated.
std::string all_variant_names() {
  std::string names;
  for (const Variant v : concrete_variants()) {
    if (!names.empty()) names += ',';
    names += to_string(v);
  }
  return names;
}

struct ReportFlags {
  std::string out_dir = "report";
  bool full = false;
  std::string threads_list;
  std::string seqs;
  std::string variants = all_variant_names();
  double max_dense_seconds = 0;
  double max_point_seconds = 0;
  int max_repeat = 5;
  Shape shape;
  ParamFlags params;  // each variant's parameters, as run/bench take them
  std::string python;
  std::string plot_script;
  bool no_plot = false;
  std::string decode_seqs;
  bool no_decode = false;
  std::int64_t paged_batch = ReportConfig{}.paged_batch;
  std::string half_seqs;
  bool no_half = false;
  bool no_ring = false;
  std::int64_t ring_seq = 8192;
};

// What is known about one (variant, threads) series while the sweep runs: enough to predict
// the next point's time and to stop the series once it gets too slow.
struct SeriesState {
  std::vector<std::pair<double, double>> measured;  // (S, seconds)
  std::string stopped;                              // reason, once stopped

  std::optional<double> predict(double seq, bool quadratic) const {
    if (measured.empty()) return std::nullopt;
    const auto [s1, t1] = measured.back();
    double exponent = quadratic ? 2.0 : 1.0;
    if (!quadratic && measured.size() >= 2) {
      const auto [s0, t0] = measured[measured.size() - 2];
      exponent = std::clamp(std::log(t1 / t0) / std::log(s1 / s0), 1.0, 2.0);
    }
    return t1 * std::pow(seq / s1, exponent);
  }
};

// Fewer timed runs for slow points keep the sweep inside its budget; the median of 1 is
// reported as such (runs in scaling.json).
int timed_runs(double seconds, int max_repeat) {
  const int runs = seconds < 0.05 ? 5 : seconds < 0.5 ? 3 : 1;
  return std::min(runs, max_repeat);
}

class Sweep {
 public:
  Sweep(const ReportConfig& config, const std::map<std::string, VariantSpec>& specs)
      : config_(config), specs_(specs), start_(std::chrono::steady_clock::now()) {
    total_ = config.seqs.size() * config.variants.size() * config.threads_list.size();
  }

  std::vector<ReportPoint> run() {
    for (const std::int64_t seq : config_.seqs) run_length(seq);
    return points_;
  }

  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  // A variant whose cost grows as S² (the table says which: dense) has its own cap.
  static bool quadratic(const std::string& variant) {
    return grows_quadratically(parse_variant(variant));
  }
  double cap(const std::string& variant) const {
    return quadratic(variant) ? config_.max_dense_seconds : config_.max_point_seconds;
  }

  void run_length(std::int64_t seq) {
    Shape shape = config_.shape;
    shape.seq = seq;
    Workload w(shape);
    dense_out_.clear();
    sampled_.reset();
    for (const std::string& variant : config_.variants) {
      std::optional<ErrorResult> error;
      for (const int threads : config_.threads_list) {
        ReportPoint p = run_point(w, variant, threads, error);
        points_.push_back(p);
        progress(p);
      }
    }
  }

  struct ErrorResult {
    double value;
    std::int64_t rows;
  };

  ReportPoint run_point(Workload& w, const std::string& variant, int threads,
                        std::optional<ErrorResult>& error) {
    ReportPoint p;
    p.seq = w.shape.seq;
    p.variant = variant;
    p.threads = threads;
    SeriesState& state = series_[{variant, threads}];
    const std::optional<double> predicted =
        state.predict(static_cast<double>(p.seq), quadratic(variant));
    if (state.stopped.empty() && predicted && *predicted > cap(variant)) {
      char why[200];
      std::snprintf(why, sizeof why,
                    "predicted %.1f s per run at S=%lld > %.1f s cap (O(N^%s) from S=%.0f)",
                    *predicted, static_cast<long long>(p.seq), cap(variant),
                    quadratic(variant) ? "2" : "p", state.measured.back().first);
      state.stopped = why;
    }
    if (!state.stopped.empty()) {
      p.skip_reason = state.stopped;
      return p;
    }
    if (predicted && *predicted > 1.0) {
      std::cerr << "report: running S=" << p.seq << " " << variant << " on " << threads
                << " thread(s), about " << format_seconds(*predicted) << " per run\n";
    }
    AttentionOptions options;
    options.variant = specs_.at(variant);
    options.threads = threads;
    PeakRss rss;
    rss.reset();
    const Timing warm = time_attend(w, options, 0, 1);
    p.rss_delta = rss.delta_bytes();
    const Timing t =
        time_attend(w, options, 0, timed_runs(warm.median_seconds, config_.max_repeat));
    p.measured = true;
    p.median_seconds = t.median_seconds;
    p.min_seconds = *std::min_element(t.seconds.begin(), t.seconds.end());
    p.runs = static_cast<int>(t.seconds.size());
    p.flops = t.record.flops;
    p.simd_target = t.record.simd_target;
    p.io_bytes = 4.0 * static_cast<double>(w.q.size() + w.k.size() + w.v.size() + w.out.size());
    state.measured.emplace_back(static_cast<double>(p.seq), p.median_seconds);
    if (variant == "dense") {
      if (dense_out_.empty()) dense_out_ = w.out;
    } else {
      if (!error) error = measure_error(w);
      p.relative_error = error->value;
      p.error_rows = error->rows;
    }
    return p;
  }

  // Against the full dense output when dense ran at this length, otherwise against dense on a
  // strided sample of query rows (exact for those rows: the report's masks are non-causal).
  ErrorResult measure_error(const Workload& w) {
    if (!dense_out_.empty()) return {relative_error(w.out, dense_out_), w.shape.seq};
    if (!sampled_) sampled_ = dense_on_rows(w, config_.error_rows, 0);
    return {relative_error(pick_rows(w, w.out, *sampled_), sampled_->out), sampled_->rows};
  }

  void progress(const ReportPoint& p) {
    ++done_;
    char line[256];
    const std::string what = p.measured ? format_seconds(p.median_seconds) : "skipped";
    std::snprintf(line, sizeof line, "report [%3zu/%zu] S=%-6lld %-15s %d thr  %-10s", done_,
                  total_, static_cast<long long>(p.seq), p.variant.c_str(), p.threads,
                  what.c_str());
    std::cerr << line << " elapsed " << format_seconds(elapsed()) << ", ~"
              << format_seconds(remaining_estimate()) << " left\n";
  }

  // Sum of predicted time (first run + timed runs) of every point still to come, in the sweep's
  // order (length, variant, threads).
  double remaining_estimate() const {
    const std::size_t per_length = config_.variants.size() * config_.threads_list.size();
    double total = 0;
    for (std::size_t index = done_; index < total_; ++index) {
      const std::int64_t seq = config_.seqs[index / per_length];
      const std::string& variant =
          config_.variants[index % per_length / config_.threads_list.size()];
      const int threads = config_.threads_list[index % config_.threads_list.size()];
      const auto state = series_.find({variant, threads});
      if (state == series_.end() || !state->second.stopped.empty()) continue;
      const std::optional<double> t =
          state->second.predict(static_cast<double>(seq), quadratic(variant));
      if (t && *t <= cap(variant)) total += *t * (1 + timed_runs(*t, config_.max_repeat));
    }
    return total;
  }

  const ReportConfig& config_;
  const std::map<std::string, VariantSpec>& specs_;
  std::chrono::steady_clock::time_point start_;
  std::map<std::pair<std::string, int>, SeriesState> series_;
  std::vector<ReportPoint> points_;
  std::vector<float> dense_out_;
  std::optional<SampledReference> sampled_;
  std::size_t done_ = 0, total_ = 0;
};

std::vector<int> thread_counts(const std::string& text) {
  std::vector<int> counts;
  if (text.empty()) {
    counts.push_back(1);
    if (hardware_threads() > 1) counts.push_back(hardware_threads());
    return counts;
  }
  for (const std::int64_t n : parse_int_list(text, "--threads-list")) {
    if (n < 1 || n > 4096) {
      throw Error(ErrorKind::kInvalidArgument, "--threads-list", "thread counts in [1, 4096]",
                  text);
    }
    counts.push_back(static_cast<int>(n));
  }
  return counts;
}

std::vector<std::int64_t> lengths(const ReportFlags& f) {
  std::vector<std::int64_t> seqs;
  if (!f.seqs.empty()) {
    seqs = parse_int_list(f.seqs, "--seqs");
  } else {
    for (std::int64_t s = 128; s <= (f.full ? 262144 : 65536); s *= 2) seqs.push_back(s);
  }
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i] < 1 || (i > 0 && seqs[i] <= seqs[i - 1])) {
      throw Error(ErrorKind::kInvalidArgument, "--seqs", "increasing lengths >= 1", f.seqs);
    }
  }
  return seqs;
}

// The lengths `text` lists for `flag` (each >= 1), or `defaults` when it is empty.
std::vector<std::int64_t> positive_lengths(const std::string& text, const std::string& flag,
                                           std::vector<std::int64_t> defaults) {
  if (text.empty()) return defaults;
  std::vector<std::int64_t> list = parse_int_list(text, flag);
  for (const std::int64_t n : list) {
    if (n < 1) throw Error(ErrorKind::kInvalidArgument, flag, "lengths >= 1", text);
  }
  return list;
}

// The cache dtypes of the decode sweep.
constexpr DType kDecodeDtypes[] = {DType::kF32, DType::kBF16, DType::kF16, DType::kI8};

// Batched decode over a PagedKvCache: c.paged_batch (32) sequences spread over 512..the longest
// decode length (at most 8192), bf16 and i8 blocks, two threads, each against a read probe of
// its bytes.
void run_paged_decode(const ReportConfig& c, DecodeReport& d) {
  const std::int64_t longest =
      std::min<std::int64_t>(8192, *std::max_element(c.decode_seqs.begin(), c.decode_seqs.end()));
  for (const DType kv_dtype : {DType::kBF16, DType::kI8}) {
    PagedBenchSpec spec;
    spec.shape = d.shape;
    spec.shape.batch = c.paged_batch;
    spec.shape.kv_dtype = kv_dtype;
    spec.min_len = std::min<std::int64_t>(512, longest);
    spec.max_len = longest;
    spec.options.mask.causal = true;
    spec.options.threads = 2;
    spec.warmup = 2;
    spec.repeat = 11;
    const PagedTiming t = time_paged(spec);
    PagedPoint p{c.paged_batch,
                 spec.min_len,
                 spec.max_len,
                 kv_dtype,
                 t.timing.record.threads,
                 t.timing.median_seconds,
                 static_cast<int>(t.timing.seconds.size()),
                 t.kv_bytes,
                 t.probe.gbps(),
                 std::string(t.timing.record.decode_prefetch)};
    d.paged.push_back(p);
    char line[200];
    std::snprintf(line, sizeof line,
                  "report decode paged %lld x %lld..%lld %-4s %d thr  %.3f ms/step  %.1f GB/s "
                  "K+V (probe %.1f GB/s)",
                  static_cast<long long>(p.batch), static_cast<long long>(p.min_len),
                  static_cast<long long>(p.max_len), std::string(to_string(kv_dtype)).c_str(),
                  p.threads, p.median_seconds * 1e3, p.kv_gbps(), p.probe_gbps);
    std::cerr << line << "\n";
  }
}

// One row of the decode table, and its progress line.
void add_decode_point(DecodeReport& d, const Shape& s, int threads, const Timing& t) {
  DecodePoint p;
  p.seq_k = s.seq;
  p.threads = threads;
  p.kv_dtype = s.kv_dtype;
  p.median_seconds = t.median_seconds;
  p.min_seconds = *std::min_element(t.seconds.begin(), t.seconds.end());
  p.runs = static_cast<int>(t.seconds.size());
  p.kv_bytes = kv_cache_bytes(s);
  p.simd_target = t.record.simd_target;
  p.prefetch = t.record.decode_prefetch;
  d.points.push_back(p);
  char line[200];
  std::snprintf(line, sizeof line,
                "report decode S_k=%-7lld %-4s %d thr  %.3f ms/token  %.1f GB/s K+V",
                static_cast<long long>(p.seq_k), std::string(to_string(p.kv_dtype)).c_str(),
                threads, p.median_seconds * 1e3, p.kv_gbps());
  std::cerr << line << "\n";
}

// Cheap steps get many runs (the cache fill dominates their cost); large caches a few.
int decode_repeat(double kv_bytes) {
  return kv_bytes <= 64.0 * 1048576 ? 51 : kv_bytes <= 512.0 * 1048576 ? 11 : 5;
}

// The decode step over each of `shapes` (one S_k, every dtype) at options.threads, in their
// order. The caches streamed from DRAM (d.from_dram: whatever runs between their steps) are
// timed in turns, at the largest one's count, so that their ratios (int8 against bf16) are not
// the host's swings from one minute to the next; the others alone, each step after one over the
// same cache, as the cache-resident rows they are.
std::vector<Timing> time_decode_row(const DecodeReport& d, const std::vector<Shape>& shapes,
                                    const AttentionOptions& options) {
  std::vector<Shape> streamed;
  std::vector<std::size_t> streamed_at;
  double largest = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const double bytes = kv_cache_bytes(shapes[i]);
    if (!d.from_dram(bytes)) continue;
    streamed.push_back(shapes[i]);
    streamed_at.push_back(i);
    largest = std::max(largest, bytes);
  }
  std::vector<Timing> timings(shapes.size());
  std::vector<Timing> in_turns =
      time_decodes_in_turns(streamed, 1, options, 2, decode_repeat(largest));
  for (std::size_t k = 0; k < streamed.size(); ++k)
    timings[streamed_at[k]] = std::move(in_turns[k]);
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const double bytes = kv_cache_bytes(shapes[i]);
    if (!d.from_dram(bytes))
      timings[i] = time_decode(shapes[i], 1, options, 2, decode_repeat(bytes));
  }
  return timings;
}

// Decode: one new query (S_q = 1) per call against a KvCache of S_k tokens stored in f32, bf16,
// f16 and int8, at 1 and 2 threads (the caches streamed from DRAM timed in turns), then the read
// bandwidth of a cache-resident and a DRAM-sized array as the limit to compare.
DecodeReport run_decode(const ReportConfig& c) {
  const auto start = std::chrono::steady_clock::now();
  DecodeReport d;
  d.shape = Shape{1, 32, 8, 0, 128, 128};
  AttentionOptions one_thread;
  one_thread.mask.causal = true;
  one_thread.threads = 1;
  AttentionOptions two_threads = one_thread;
  two_threads.threads = 2;
  for (const std::int64_t seq_k : c.decode_seqs) {
    std::vector<Shape> shapes;
    for (const DType kv_dtype : kDecodeDtypes) {
      Shape s = d.shape;
      s.seq = seq_k;
      s.kv_dtype = kv_dtype;
      shapes.push_back(s);
    }
    const std::vector<Timing> one = time_decode_row(d, shapes, one_thread),
                              two = time_decode_row(d, shapes, two_threads);
    for (std::size_t i = 0; i < shapes.size(); ++i) {  // rows in the order (dtype, threads)
      add_decode_point(d, shapes[i], 1, one[i]);
      add_decode_point(d, shapes[i], 2, two[i]);
    }
  }
  run_paged_decode(c, d);
  for (const auto& [kind, mib, repeat] :
       {std::tuple{"cache", std::size_t{32}, 21}, std::tuple{"dram", std::size_t{512}, 5}}) {
    for (const int threads : {1, 2}) {
      const ReadBandwidth bw = measure_read_bandwidth(mib * 1048576, threads, repeat);
      d.bandwidths.push_back({kind, static_cast<double>(bw.bytes), threads, bw.runs, bw.gbps()});
      char line[200];
      std::snprintf(line, sizeof line, "report read bandwidth %-5s %4zu MiB %d thr  %.1f GB/s",
                    kind, mib, threads, bw.gbps());
      std::cerr << line << "\n";
    }
  }
  d.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return d;
}

// Dense with q, k, v and out in f32, bf16 and f16, and f32 under fp32_precision = bf16, at a few
// lengths and every thread count; each output is compared with the f32 output of the same
// (unrounded) random inputs.
HalfReport run_half(const ReportConfig& c) {
  const auto start = std::chrono::steady_clock::now();
  HalfReport r;
  r.shape = c.shape;
  AttentionOptions options;
  options.variant = DenseSpec{};
  for (const std::int64_t seq : c.half_seqs) {
    for (const int threads : c.threads_list) {
      options.threads = threads;
      std::vector<float> f32_out;
      for (const int row : {0, 1, 2, 3}) {
        const DType dtype = row == 1 ? DType::kBF16 : row == 2 ? DType::kF16 : DType::kF32;
        options.fp32_precision = row == 3 ? Fp32Precision::kBf16 : Fp32Precision::kIeee;
        Shape s = c.shape;
        s.seq = seq;
        s.dtype = s.kv_dtype = dtype;
        Workload w(s);
        const Timing warm = time_attend(w, options, 0, 1);
        const Timing t = time_attend(w, options, 0, timed_runs(warm.median_seconds, 5));
        HalfPoint p{seq,
                    dtype,
                    row == 3,
                    threads,
                    t.median_seconds,
                    static_cast<int>(t.seconds.size()),
                    t.record.flops,
                    0,
                    std::string(t.record.simd_target),
                    std::string(t.record.compute_path)};
        if (row == 0) {
          f32_out = w.out;
        } else {
          p.error_vs_f32 = relative_error(w.out_values(), f32_out);
        }
        r.points.push_back(p);
        char line[200];
        std::snprintf(
            line, sizeof line, "report dense %-4s%s S=%-6lld %d thr  %s  %.1f GFLOP/s, %s",
            std::string(to_string(dtype)).c_str(), row == 3 ? " (fp32_precision=bf16)" : "",
            static_cast<long long>(seq), threads, format_seconds(p.median_seconds).c_str(),
            p.gflops(), p.compute_path.c_str());
        std::cerr << line << "\n";
      }
    }
  }
  r.elapsed_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

ReportConfig configure(const ReportFlags& f, std::map<std::string, VariantSpec>& specs);

void report(const ReportFlags& f) {
  std::map<std::string, VariantSpec> specs;
  const ReportConfig config = configure(f, specs);
  for (const auto& [variant, why] : config.not_built) {
    std::cerr << "report: skipping " << variant << ": " << why << "\n";
  }
  Sweep sweep(config, specs);
  const std::vector<ReportPoint> points = sweep.run();
  const double elapsed = sweep.elapsed();
  const AccuracyReport accuracy = run_accuracy(config, specs, points);
  const DecodeReport decode = config.decode_seqs.empty() ? DecodeReport{} : run_decode(config);
  const HalfReport half = config.half_seqs.empty() ? HalfReport{} : run_half(config);
  const RingReport ring = config.ring_seq > 0
                              ? run_ring(config.shape, config.ring_seq, config.ring_seq_per_rank)
                              : RingReport{};
  std::cout << write_report(config, points, elapsed, decode, half, ring, &accuracy);
}

ReportConfig configure(const ReportFlags& f, std::map<std::string, VariantSpec>& specs) {
  for (const auto& [value, name] : {std::pair{f.shape.batch, "--batch"},
                                    {f.shape.heads, "--heads"},
                                    {f.shape.dim, "--dim"},
                                    {f.paged_batch, "--paged-batch"},
                                    {std::int64_t{f.max_repeat}, "--max-repeat"}}) {
    if (value < 1) throw Error(ErrorKind::kInvalidArgument, name, ">= 1", std::to_string(value));
  }
  ReportConfig c;
  c.shape = f.shape;
  c.shape.kv_heads = c.shape.heads;
  c.shape.dim_v = c.shape.dim;
  c.seqs = lengths(f);
  c.threads_list = thread_counts(f.threads_list);
  c.max_dense_seconds = f.max_dense_seconds > 0 ? f.max_dense_seconds : (f.full ? 30.0 : 2.0);
  c.max_point_seconds = f.max_point_seconds > 0 ? f.max_point_seconds : (f.full ? 60.0 : 4.0);
  c.out_dir = f.out_dir;
  c.max_repeat = f.max_repeat;
  c.python = f.python;
  c.plot_script = f.plot_script;
  c.plot = !f.no_plot;
  if (!f.no_decode) {
    std::vector<std::int64_t> defaults{512, 4096, 32768};
    if (f.full) defaults.push_back(131072);
    c.decode_seqs = positive_lengths(f.decode_seqs, "--decode-seqs", std::move(defaults));
  }
  c.paged_batch = f.paged_batch;
  if (!f.no_half) c.half_seqs = positive_lengths(f.half_seqs, "--half-seqs", {1024, 4096});
  if (f.ring_seq < 4)
    throw Error(ErrorKind::kInvalidArgument, "--ring-seq", ">= 4", std::to_string(f.ring_seq));
  c.ring_seq = f.no_ring ? 0 : f.ring_seq;
  c.ring_seq_per_rank = f.ring_seq / 4;
  const std::vector<std::string> wanted = [&] {
    std::vector<std::string> names;
    std::size_t start = 0;
    while (start <= f.variants.size()) {
      const std::size_t comma = std::min(f.variants.find(',', start), f.variants.size());
      names.push_back(f.variants.substr(start, comma - start));
      start = comma + 1;
    }
    return names;
  }();
  for (const std::string& name : wanted) parse_variant(name, "--variants");
  for (const CatalogueEntry& e : catalogue(given_params(f.params))) {
    if (std::find(wanted.begin(), wanted.end(), e.name) == wanted.end()) continue;
    if (const std::optional<std::string> why = not_built_reason(e.spec)) {
      c.not_built[e.name] = *why;
      continue;
    }
    c.variants.push_back(e.name);
    c.parameters[e.name] = e.parameters;
    specs[e.name] = as_variant_spec(e.spec);
  }
  if (c.variants.empty()) {
    throw Error(ErrorKind::kInvalidArgument, "--variants", "at least one built variant",
                f.variants);
  }
  return c;
}

}  // namespace

void add_report_command(CLI::App& app) {
  auto flags = std::make_shared<ReportFlags>();
  CLI::App* cmd = app.add_subcommand(
      "report", "scaling report: every built variant over S = 128..65536 at 1 and all threads");
  cmd->add_option("--out-dir", flags->out_dir, "directory for scaling.{json,md,png}")
      ->capture_default_str();
  cmd->add_flag("--full", flags->full, "S up to 262144 and larger per-point time caps");
  cmd->add_option("--threads-list", flags->threads_list, "thread counts (default 1,all cores)");
  cmd->add_option("--max-dense-seconds", flags->max_dense_seconds,
                  "skip dense points predicted (O(N^2)) to run longer (default 2, --full 30)");
  cmd->add_option("--max-point-seconds", flags->max_point_seconds,
                  "the same cap for the other variants (default 4, --full 60)");
  cmd->add_option("--seqs", flags->seqs, "lengths instead of the powers of 2 from 128");
  cmd->add_option("--variants", flags->variants, "variants to include")->capture_default_str();
  cmd->add_option("--max-repeat", flags->max_repeat, "most timed runs per point")
      ->capture_default_str();
  cmd->add_option("--batch", flags->shape.batch, "batch B")->capture_default_str();
  cmd->add_option("--heads", flags->shape.heads, "heads H")->capture_default_str();
  cmd->add_option("--dim", flags->shape.dim, "head dimension D")->capture_default_str();
  add_param_flags(*cmd, flags->params);  // --window, --feature-map, --proj-len, --block, ...
  cmd->add_option("--python", flags->python, "python with matplotlib (default /usr/bin/python3)");
  cmd->add_option("--plot-script", flags->plot_script, "path of scripts/plot_scaling.py");
  cmd->add_flag("--no-plot", flags->no_plot, "skip scaling.png");
  cmd->add_option("--decode-seqs", flags->decode_seqs,
                  "KV-cache lengths of the decode sweep (default 512,4096,32768; --full adds "
                  "131072)");
  cmd->add_flag("--no-decode", flags->no_decode, "skip the decode sweep and bandwidth runs");
  cmd->add_option("--paged-batch", flags->paged_batch,
                  "sequences of the paged decode rows (lengths 512..the longest decode length)")
      ->capture_default_str();
  cmd->add_option("--half-seqs", flags->half_seqs,
                  "S of the dense f32/bf16/f16 rows (default 1024,4096)");
  cmd->add_flag("--no-half", flags->no_half, "skip the dense f32/bf16/f16 rows");
  cmd->add_flag("--no-ring", flags->no_ring, "skip the ring-attention (MPI) section");
  cmd->add_option("--ring-seq", flags->ring_seq,
                  "ring attention: S of the strong scaling (weak: S/4 per process)")
      ->capture_default_str();
  cmd->callback([flags] { report(*flags); });
}

}  // namespace seqattn::cli
