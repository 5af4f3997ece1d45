// scaling.json, scaling.md and scaling.png (the latter drawn by scripts/plot_scaling.py).
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/npy.hpp"
#include "src/cli/report.hpp"
#include "src/cli/report_accuracy.hpp"
#include "src/cli/scaling_math.hpp"

extern char** environ;

namespace seqattn::cli {
namespace {

struct SeriesKey {
  std::string variant;
  int threads;
};

struct SeriesFit {
  SeriesKey key;
  std::optional<PowerFit> fit;
  std::int64_t from = 0, to = 0;  // S range fitted
};

struct SeriesCrossover {
  SeriesKey key;
  Crossover crossover;
};

std::vector<SeriesKey> series_keys(const ReportConfig& c) {
  std::vector<SeriesKey> keys;
  for (const std::string& v : c.variants) {
    for (const int t : c.threads_list) keys.push_back({v, t});
  }
  return keys;
}

// Median seconds per configured length for one series; NaN where not measured.
std::vector<double> series_seconds(const ReportConfig& c, const std::vector<ReportPoint>& points,
                                   const SeriesKey& key) {
  std::vector<double> seconds(c.seqs.size(), NAN);
  for (const ReportPoint& p : points) {
    if (p.variant != key.variant || p.threads != key.threads || !p.measured) continue;
    for (std::size_t i = 0; i < c.seqs.size(); ++i) {
      if (c.seqs[i] == p.seq) seconds[i] = p.median_seconds;
    }
  }
  return seconds;
}

// Fitted over S >= fit_min_seq (small S is dominated by fixed costs); over every measured point
// when that leaves fewer than two.
SeriesFit fit_series(const ReportConfig& c, const std::vector<double>& seconds, SeriesKey key) {
  SeriesFit result{std::move(key), std::nullopt, 0, 0};
  for (const std::int64_t min_seq : {c.fit_min_seq, std::int64_t{0}}) {
    std::vector<double> n, t;
    for (std::size_t i = 0; i < c.seqs.size(); ++i) {
      if (c.seqs[i] < min_seq || std::isnan(seconds[i])) continue;
      n.push_back(static_cast<double>(c.seqs[i]));
      t.push_back(seconds[i]);
    }
    result.fit = fit_power_law(n, t);
    if (result.fit) {
      result.from = static_cast<std::int64_t>(n.front());
      result.to = static_cast<std::int64_t>(n.back());
      return result;
    }
  }
  return result;
}

std::string big_o(const std::optional<PowerFit>& fit) {
  if (!fit) return "n/a";
  char text[32];
  std::snprintf(text, sizeof text, "O(N^%.2f)", fit->exponent);
  return text;
}

nlohmann::json point_json(const ReportPoint& p) {
  nlohmann::json j = {{"seq", p.seq},
                      {"variant", p.variant},
                      {"threads", p.threads},
                      {"status", p.measured ? "measured" : "skipped"}};
  if (!p.measured) {
    j["skip_reason"] = p.skip_reason;
    j["median_ms"] = nullptr;
    j["gflops"] = nullptr;
    j["relative_error"] = nullptr;
    return j;
  }
  j["median_ms"] = p.median_seconds * 1e3;
  j["min_ms"] = p.min_seconds * 1e3;
  j["runs"] = p.runs;
  j["gflops"] = number_or_null(p.gflops());
  j["flops"] = p.flops;
  j["io_mb"] = p.io_bytes / 1048576.0;
  j["rss_delta_mb"] = p.rss_delta ? nlohmann::json(static_cast<double>(*p.rss_delta) / 1048576.0)
                                  : nlohmann::json(nullptr);
  j["relative_error"] =
      p.relative_error ? number_or_null(*p.relative_error) : nlohmann::json(nullptr);
  if (p.relative_error) j["error_rows"] = p.error_rows;
  return j;
}

std::string fixed(double value, int digits) {
  char text[48];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

std::string sci(double value) {
  char text[48];
  std::snprintf(text, sizeof text, "%.2e", value);
  return text;
}

const ReportPoint* find_point(const std::vector<ReportPoint>& points, std::int64_t seq,
                              const std::string& variant, int threads) {
  for (const ReportPoint& p : points) {
    if (p.seq == seq && p.variant == variant && p.threads == threads) return &p;
  }
  return nullptr;
}

void time_table(std::ostream& md, const ReportConfig& c, const std::vector<ReportPoint>& points) {
  md << "Median kernel time in ms (GFLOP/s in parentheses; FLOPs are each variant's own count). "
     << "`-` = skipped (predicted to exceed the per-run cap: " << fixed(c.max_dense_seconds, 1)
     << " s for dense by the O(N^2) rule, " << fixed(c.max_point_seconds, 1)
     << " s for the others).\n\n| S |";
  const std::vector<SeriesKey> keys = series_keys(c);
  for (const SeriesKey& k : keys) md << " " << k.variant << " " << k.threads << "T |";
  md << "\n|---:|";
  for (std::size_t i = 0; i < keys.size(); ++i) md << "---:|";
  md << "\n";
  for (const std::int64_t seq : c.seqs) {
    md << "| " << seq << " |";
    for (const SeriesKey& k : keys) {
      const ReportPoint* hit = find_point(points, seq, k.variant, k.threads);
      if (hit == nullptr || !hit->measured) {
        md << " - |";
      } else {
        md << " " << fixed(hit->median_seconds * 1e3, 3) << " (" << fixed(hit->gflops(), 1)
           << ") |";
      }
    }
    md << "\n";
  }
}

}  // namespace

void approximation_table(std::ostream& md, const std::vector<std::string>& variants,
                         const std::vector<std::int64_t>& seqs,
                         const std::function<std::string(std::int64_t, const std::string&)>& cell) {
  md << "| S |";
  for (const std::string& v : variants) {
    if (v != "dense") md << " " << v << " |";
  }
  md << "\n|---:|";
  for (std::size_t i = 1; i < variants.size(); ++i) md << "---:|";
  md << "\n";
  for (const std::int64_t seq : seqs) {
    md << "| " << seq << " |";
    for (const std::string& v : variants) {
      if (v != "dense") md << " " << cell(seq, v) << " |";
    }
    md << "\n";
  }
}

namespace {

void error_table(std::ostream& md, const ReportConfig& c, const std::vector<ReportPoint>& points) {
  md << "\n## Relative error vs exact dense\n\nmax |out - dense| / max |dense| on the same "
        "random inputs (uniform [-1, 1)). Where dense itself was skipped, dense is computed on "
     << c.error_rows << " evenly spaced query rows only (exact for those rows) and the error is "
     << "over those rows (marked *).\n\n";
  approximation_table(md, c.variants, c.seqs, [&](std::int64_t seq, const std::string& v) {
    std::string cell = "-";
    for (const ReportPoint& p : points) {
      if (p.seq != seq || p.variant != v || !p.relative_error) continue;
      char text[48];
      std::snprintf(text, sizeof text, "%.2e%s", *p.relative_error, p.error_rows < seq ? "*" : "");
      cell = text;
    }
    return cell;
  });
  md << "\nSliding window is exact while S <= 2·window + 1. Beyond that, and for linear and "
        "Linformer at any S, these are different functions from softmax attention, not rounding: "
        "with uniform random inputs every query spreads its weight over many keys, so the dense "
        "output is an average with small max |dense| (about 1/sqrt(S)), and Linformer's untrained "
        "N(0, 1/k) projections scale K' and V' by about sqrt(S/k). Read the column as how far "
        "each variant is from exact attention on unstructured data.\n";
}

void fit_and_crossover_tables(std::ostream& md, const ReportConfig& c,
                              const std::vector<SeriesFit>& fits,
                              const std::vector<SeriesCrossover>& crossovers) {
  md << "\n## Complexity fits\n\nLeast squares of log(time) against log(S) over S >= "
     << c.fit_min_seq << " (all measured points when fewer than two qualify).\n\n"
     << "| variant | threads | parameters | fit | points | S range |\n"
     << "|---|---:|---|---|---:|---|\n";
  for (const SeriesFit& f : fits) {
    md << "| " << f.key.variant << " | " << f.key.threads << " | " << c.parameters.at(f.key.variant)
       << " | " << big_o(f.fit) << " | " << (f.fit ? f.fit->points : 0) << " | " << f.from << "–"
       << f.to << " |\n";
  }
  md << "\n## Crossovers (where a variant becomes faster than dense)\n\n"
     << "| variant | threads | S | how |\n|---|---:|---:|---|\n";
  for (const SeriesCrossover& x : crossovers) {
    md << "| " << x.key.variant << " | " << x.key.threads << " | "
       << (x.crossover.n ? fixed(*x.crossover.n, 0) : std::string("-")) << " | " << x.crossover.note
       << " |\n";
  }
}

// The bandwidth a decode point is compared with: DRAM for caches larger than
// dram_above_bytes, otherwise the cache-resident one, at the same thread count.
const BandwidthPoint* matching_bandwidth(const DecodeReport& d, const DecodePoint& p) {
  const std::string kind = d.from_dram(p.kv_bytes) ? "dram" : "cache";
  for (const BandwidthPoint& b : d.bandwidths) {
    if (b.kind == kind && b.threads == p.threads) return &b;
  }
  return nullptr;
}

// What the kernel's software prefetches asked for: one choice a process
// (SEQATTN_DECODE_PREFETCH is read once), so the first row's record says it for every row.
std::string prefetch_sentence(const DecodeReport& d) {
  if (d.points.empty() || d.points.front().prefetch.empty()) return "";
  const std::string& choice = d.points.front().prefetch;  // "l2", "l2+far128", "l2+near16+paced", …
  std::string sentence = std::string("The kernel prefetched the blocks ahead into ") +
                         (choice.starts_with("l1") ? "L1" : "L2");
  if (choice.find("+far") != std::string::npos)
    sentence += ", N bytes of each key row ahead where the name says +far<N> (else 256)";
  if (choice.find("+near") != std::string::npos)
    sentence += " and rows a little further on into L1";
  if (choice.ends_with("+paced")) sentence += ", spreading an int8 tile's requests over its passes";
  return sentence + " (decode_prefetch " + choice +
         " in the JSON: this CPU's measured choice, or SEQATTN_DECODE_PREFETCH's). ";
}

void decode_table(std::ostream& md, const DecodeReport& d) {
  const Shape& s = d.shape;
  md << "\n## Decode against a KV cache\n\nOne new query per call (S_q = 1) against a KvCache "
        "of S_k tokens (B="
     << s.batch << ", H=" << s.heads << ", H_kv=" << s.kv_heads << ", D=D_v=" << s.dim
     << ", fp32 queries, causal, dense; the cache stored in f32, bf16, f16 or i8 — int8 with "
        "one fp32 scale per token and kv head for K and for V): ms/token is the "
        "median plan.run time, K+V GB/s is the bytes(dtype)·B·H_kv·S_k·(D+D_v) bytes of K and V "
        "the cache stores (i8: plus 8 bytes of scales a token and kv head), read once per step, "
        "over that time, and % is of the read bandwidth "
        "measured by summing a float array at the same thread count (the DRAM figure for caches "
        "larger than "
     << fixed(d.dram_above_bytes / 1048576.0, 0)
     << " MiB, else the cache-resident one). The caches larger than that of one S_k and thread "
        "count are timed in turns (each round runs each dtype once), so their ratios do not "
        "follow the host's swings; the others alone. "
     << prefetch_sentence(d) << "Took " << fixed(d.elapsed_seconds, 1) << " s.\n\n"
     << "| S_k | K/V dtype | threads | K+V MiB | ms/token | K+V GB/s | % of read bandwidth |\n"
     << "|---:|---|---:|---:|---:|---:|---:|\n";
  for (const DecodePoint& p : d.points) {
    const BandwidthPoint* b = matching_bandwidth(d, p);
    md << "| " << p.seq_k << " | " << to_string(p.kv_dtype) << " | " << p.threads << " | "
       << fixed(p.kv_bytes / 1048576.0, 0) << " | " << fixed(p.median_seconds * 1e3, 3) << " | "
       << fixed(p.kv_gbps(), 1) << " | "
       << (b != nullptr && b->gbps > 0 ? fixed(100.0 * p.kv_gbps() / b->gbps, 0) + "% of " + b->kind
                                       : std::string("-"))
       << " |\n";
  }
  if (!d.paged.empty()) {
    md << "\nBatched decode over a PagedKvCache (" << d.paged.front().batch
       << " sequences, lengths spread evenly over the range, one new query each, the same heads; "
          "K+V bytes over the median step, and % of "
          "a read probe of the same bytes at the same thread count, in huge pages as the pool, "
          "each of its reads right after a kernel run):\n\n"
       << "| sequences | lengths | K/V dtype | threads | K+V MiB | ms/step | K+V GB/s | % of "
          "probe |\n|---:|---|---|---:|---:|---:|---:|---:|\n";
    for (const PagedPoint& p : d.paged) {
      md << "| " << p.batch << " | " << p.min_len << ".." << p.max_len << " | "
         << to_string(p.kv_dtype) << " | " << p.threads << " | " << fixed(p.kv_bytes / 1048576.0, 0)
         << " | " << fixed(p.median_seconds * 1e3, 3) << " | " << fixed(p.kv_gbps(), 1) << " | "
         << (p.probe_gbps > 0 ? fixed(100.0 * p.kv_gbps() / p.probe_gbps, 0) + "%"
                              : std::string("-"))
         << " |\n";
    }
  }
  md << "\nRead bandwidth (sum of a float array, median of several runs):";
  for (const BandwidthPoint& b : d.bandwidths) {
    md << " " << b.kind << " (" << fixed(b.bytes / 1048576.0, 0) << " MiB) " << b.threads << "T "
       << fixed(b.gbps, 1) << " GB/s;";
  }
  md << "\n";
}

// The row's operands: "f32", "bf16", "f16" or "f32, fp32_precision=bf16".
std::string half_label(const HalfPoint& p) {
  const std::string dtype(to_string(p.dtype));
  return p.bf16_precision ? dtype + ", fp32_precision=bf16" : dtype;
}

// Dense in f32, bf16 and f16 (and f32 rounded to bf16 by fp32_precision) at the same lengths:
// GFLOP/s, the ratio to f32, the compute path and the error.
void half_table(std::ostream& md, const HalfReport& h) {
  md << "\n## Half precision and the bf16 compute path (dense)\n\nq, k, v and out all f32, bf16 "
        "or f16, and f32 under fp32_precision = bf16 (B="
     << h.shape.batch << ", H=" << h.shape.heads << ", D=" << h.shape.dim
     << ", non-causal). The compute path column is RunRecord::compute_path: `fp32` computes in "
        "fp32 on exactly widened inputs; `amx-bf16` and `avx512-bf16` are the bf16 products where "
        "the CPU and the build have them (docs/architecture.md, Compute paths). The error is "
        "max |out - out_f32| / max |out_f32| against the f32 run on the unrounded inputs, so it "
        "includes the rounding of q, k, v and out. Took "
     << fixed(h.elapsed_seconds, 1) << " s.\n\n"
     << "| S | operands | threads | compute path | median | GFLOP/s | vs f32 | error vs f32 |\n"
     << "|---:|---|---:|---|---:|---:|---:|---:|\n";
  for (const HalfPoint& p : h.points) {
    double f32_gflops = 0;
    for (const HalfPoint& q : h.points) {
      if (q.seq == p.seq && q.threads == p.threads && q.dtype == DType::kF32 && !q.bf16_precision)
        f32_gflops = q.gflops();
    }
    const bool exact = p.dtype == DType::kF32 && !p.bf16_precision;
    md << "| " << p.seq << " | " << half_label(p) << " | " << p.threads << " | " << p.compute_path
       << " | " << format_seconds(p.median_seconds) << " | " << fixed(p.gflops(), 1) << " | "
       << (f32_gflops > 0 ? fixed(p.gflops() / f32_gflops, 2) + "x" : std::string("-")) << " | "
       << (exact ? std::string("-") : sci(p.error_vs_f32)) << " |\n";
  }
}

std::string markdown(const ReportConfig& c, const std::vector<ReportPoint>& points,
                     const std::vector<SeriesFit>& fits,
                     const std::vector<SeriesCrossover>& crossovers, const DecodeReport& decode,
                     const HalfReport& half, const RingReport& ring, const std::string& target,
                     double elapsed) {
  std::ostringstream md;
  md << "# seqattn scaling report\n\n"
     << "B=" << c.shape.batch << ", H=" << c.shape.heads << ", D=" << c.shape.dim
     << ", fp32, non-causal, S_q = S_k = S; SIMD target " << target << "; sweep took "
     << fixed(elapsed, 1) << " s.\n\n";
  time_table(md, c, points);
  error_table(md, c, points);
  fit_and_crossover_tables(md, c, fits, crossovers);
  if (!decode.points.empty()) decode_table(md, decode);
  if (!half.points.empty()) half_table(md, half);
  if (c.ring_seq > 0) ring_table(md, ring);
  if (!c.not_built.empty()) {
    md << "\n## Not built (skipped)\n\n";
    for (const auto& [v, why] : c.not_built) md << "- " << v << ": " << why << "\n";
  }
  md << "\nMemory: `rss_delta_mb` in scaling.json is the growth of the peak resident set during "
        "each point's first run (inputs and output are allocated before; memory the allocator "
        "reuses is not counted); `io_mb` is the size of q, k, v and out.\n\n"
        "![scaling](scaling.png)\n";
  return md.str();
}

bool is_file(const std::string& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode);
}

// The plot script: --plot-script, $SEQATTN_PLOT_SCRIPT, <prefix>/share/seqattn next to an
// installed binary, or the source tree this binary was built from.
std::string plot_script(const ReportConfig& c) {
  if (!c.plot_script.empty()) return c.plot_script;
  if (const char* env = std::getenv("SEQATTN_PLOT_SCRIPT")) return env;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n > 0) {
    std::string dir(exe, static_cast<std::size_t>(n));
    dir = dir.substr(0, dir.rfind('/'));
    const std::string installed = dir + "/../share/seqattn/plot_scaling.py";
    if (is_file(installed)) return installed;
  }
  return SEQATTN_PLOT_SCRIPT;
}

void run_plot(const ReportConfig& c, const std::string& json_path, const std::string& png_path) {
  std::string python = c.python;
  if (python.empty()) python = is_file("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const std::string script = plot_script(c);
  if (!is_file(script)) {
    throw Error(ErrorKind::kIo, "--plot-script", "the path of scripts/plot_scaling.py",
                "'" + script + "' (not found)", "pass --plot-script or --no-plot");
  }
  const std::string temp_png = png_path + ".tmp.png";
  std::vector<std::string> args = {python, script, json_path, temp_png};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = 0;
  int status = 0;
  const int spawned = ::posix_spawnp(&pid, python.c_str(), nullptr, nullptr, argv.data(), environ);
  const bool ok = spawned == 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
                  WEXITSTATUS(status) == 0;
  if (!ok || std::rename(temp_png.c_str(), png_path.c_str()) != 0) {
    std::remove(temp_png.c_str());
    throw Error(ErrorKind::kIo, "plot", "'" + python + " " + script + "' to write " + png_path,
                spawned != 0 ? "cannot start " + python : "exit status " + std::to_string(status),
                "scaling.json and scaling.md were written; pass --no-plot to skip the figure");
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  return text;
}

nlohmann::json meta_json(const ReportConfig& c, const std::string& target, double elapsed) {
  return {{"batch", c.shape.batch},
          {"heads", c.shape.heads},
          {"dim", c.shape.dim},
          {"seqs", c.seqs},
          {"threads_list", c.threads_list},
          {"variants", c.variants},
          {"parameters", c.parameters},
          {"not_built", c.not_built},
          {"simd_target", target},
          {"date", utc_now()},
          {"elapsed_seconds", elapsed},
          {"max_dense_seconds", c.max_dense_seconds},
          {"max_point_seconds", c.max_point_seconds},
          {"fit_min_seq", c.fit_min_seq},
          {"error_metric",
           "max|out-dense|/max|dense|; error_rows < seq means dense on evenly spaced sampled "
           "query rows"},
          {"memory", "rss_delta_mb: peak RSS growth during the first run of a point"}};
}

nlohmann::json fit_json(const SeriesFit& f) {
  return {{"variant", f.key.variant},
          {"threads", f.key.threads},
          {"exponent", f.fit ? nlohmann::json(f.fit->exponent) : nlohmann::json()},
          {"coefficient", f.fit ? nlohmann::json(f.fit->coefficient) : nlohmann::json()},
          {"points", f.fit ? f.fit->points : 0},
          {"from_seq", f.from},
          {"to_seq", f.to},
          {"label", big_o(f.fit)}};
}

nlohmann::json crossover_json(const SeriesCrossover& x) {
  return {{"variant", x.key.variant},
          {"threads", x.key.threads},
          {"seq", x.crossover.n ? nlohmann::json(*x.crossover.n) : nlohmann::json()},
          {"note", x.crossover.note}};
}

nlohmann::json decode_json(const DecodeReport& d) {
  nlohmann::json j = {{"batch", d.shape.batch},
                      {"heads", d.shape.heads},
                      {"kv_heads", d.shape.kv_heads},
                      {"dim", d.shape.dim},
                      {"dim_v", d.shape.dim_v},
                      {"seq_q", 1},
                      {"causal", true},
                      {"variant", "dense"},
                      {"kv_bytes", "bytes(kv_dtype)*B*H_kv*S_k*(D+D_v) per step"},
                      {"dram_above_mb", d.dram_above_bytes / 1048576.0},
                      {"elapsed_seconds", d.elapsed_seconds},
                      {"points", nlohmann::json::array()},
                      {"bandwidth", nlohmann::json::array()}};
  j["paged"] = nlohmann::json::array();
  for (const PagedPoint& p : d.paged) {
    j["paged"].push_back({{"sequences", p.batch},
                          {"min_len", p.min_len},
                          {"max_len", p.max_len},
                          {"kv_dtype", std::string(to_string(p.kv_dtype))},
                          {"threads", p.threads},
                          {"median_ms", p.median_seconds * 1e3},
                          {"runs", p.runs},
                          {"kv_mb", p.kv_bytes / 1048576.0},
                          {"kv_gbps", p.kv_gbps()},
                          {"probe_gbps", p.probe_gbps},
                          {"decode_prefetch", p.prefetch}});
  }
  for (const DecodePoint& p : d.points) {
    const BandwidthPoint* b = matching_bandwidth(d, p);
    j["points"].push_back(
        {{"seq_k", p.seq_k},
         {"kv_dtype", std::string(to_string(p.kv_dtype))},
         {"threads", p.threads},
         {"median_ms", p.median_seconds * 1e3},
         {"min_ms", p.min_seconds * 1e3},
         {"runs", p.runs},
         {"kv_mb", p.kv_bytes / 1048576.0},
         {"kv_gbps", number_or_null(p.kv_gbps())},
         {"compared_with", b != nullptr ? nlohmann::json(b->kind) : nlohmann::json()},
         {"percent_of_bandwidth", b != nullptr && b->gbps > 0
                                      ? number_or_null(100.0 * p.kv_gbps() / b->gbps)
                                      : nlohmann::json()},
         {"simd_target", p.simd_target},
         {"decode_prefetch", p.prefetch}});
  }
  for (const BandwidthPoint& b : d.bandwidths) {
    j["bandwidth"].push_back({{"kind", b.kind},
                              {"mb", b.bytes / 1048576.0},
                              {"threads", b.threads},
                              {"runs", b.runs},
                              {"gbps", number_or_null(b.gbps)}});
  }
  return j;
}

}  // namespace

nlohmann::json half_json(const HalfReport& h) {
  nlohmann::json rows = nlohmann::json::array();
  for (const HalfPoint& p : h.points) {
    const bool exact = p.dtype == DType::kF32 && !p.bf16_precision;
    rows.push_back({{"seq", p.seq},
                    {"dtype", std::string(to_string(p.dtype))},
                    {"fp32_precision", p.bf16_precision ? "bf16" : "ieee"},
                    {"compute_path", p.compute_path},
                    {"threads", p.threads},
                    {"median_ms", p.median_seconds * 1e3},
                    {"runs", p.runs},
                    {"gflops", number_or_null(p.gflops())},
                    {"error_vs_f32", exact ? nlohmann::json() : number_or_null(p.error_vs_f32)},
                    {"simd_target", p.simd_target}});
  }
  return {{"variant", "dense"},
          {"batch", h.shape.batch},
          {"heads", h.shape.heads},
          {"dim", h.shape.dim},
          {"elapsed_seconds", h.elapsed_seconds},
          {"points", rows}};
}

std::string write_report(const ReportConfig& c, const std::vector<ReportPoint>& points,
                         double elapsed, const DecodeReport& decode, const HalfReport& half,
                         const RingReport& ring, const AccuracyReport* accuracy) {
  std::vector<SeriesFit> fits;
  std::vector<SeriesCrossover> crossovers;
  const std::vector<double> n(c.seqs.begin(), c.seqs.end());
  for (const SeriesKey& key : series_keys(c)) {
    const std::vector<double> seconds = series_seconds(c, points, key);
    fits.push_back(fit_series(c, seconds, key));
    if (key.variant == "dense") continue;
    const std::vector<double> dense = series_seconds(c, points, {"dense", key.threads});
    crossovers.push_back({key, find_crossover(n, seconds, dense)});
  }
  const std::string target = simd_target();
  nlohmann::json j = {{"meta", meta_json(c, target, elapsed)},
                      {"points", nlohmann::json::array()},
                      {"fits", nlohmann::json::array()},
                      {"crossovers", nlohmann::json::array()}};
  for (const ReportPoint& p : points) j["points"].push_back(point_json(p));
  for (const SeriesFit& f : fits) j["fits"].push_back(fit_json(f));
  for (const SeriesCrossover& x : crossovers) j["crossovers"].push_back(crossover_json(x));
  if (!decode.points.empty()) j["decode"] = decode_json(decode);
  if (!half.points.empty()) j["half_precision"] = half_json(half);
  if (c.ring_seq > 0) j["ring"] = ring_json(ring);
  if (accuracy != nullptr) {
    j["accuracy_by_family"] = accuracy_json(*accuracy, points);
    j["lsh_error_by_hashes"] = lsh_hashes_json(*accuracy);
  }

  ::mkdir(c.out_dir.c_str(), 0777);  // an existing directory is fine; errors surface below
  const std::string json_path = c.out_dir + "/scaling.json";
  std::string md = markdown(c, points, fits, crossovers, decode, half, ring, target, elapsed);
  if (accuracy != nullptr) {
    std::ostringstream section;
    accuracy_markdown(section, c, *accuracy, points);
    md += section.str();
  }
  npy::StagedOutputs staged;
  staged.stage(json_path, j.dump(2) + "\n", "--out-dir");
  staged.stage(c.out_dir + "/scaling.md", md, "--out-dir");
  staged.commit();
  if (c.plot) run_plot(c, json_path, c.out_dir + "/scaling.png");
  return md;
}

}  // namespace seqattn::cli
