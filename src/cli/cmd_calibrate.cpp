// `seqattn calibrate`: measures each variant's time and its error against dense on this
// machine, on a chosen input family, and writes a selection profile that
// SelectionPolicy::load_json reads: speed-only thresholds, the measurements, and an optional
// error budget that makes auto choose the fastest variant within it.
#include <CLI/CLI.hpp>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <memory>

#include "seqattn/error.hpp"
#include "src/cli/catalogue.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/input_families.hpp"
#include "src/cli/measure.hpp"
#include "src/cli/npy.hpp"
#include "src/cli/scaling_math.hpp"
#include "src/cli/variant_flags.hpp"

namespace seqattn::cli {
namespace {

constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();

struct CalibrateFlags {
  Shape shape;
  int threads = 0;
  int repeat = 3;
  std::string seqs = "256,512,1024,2048,4096";
  ParamFlags params;  // each variant's parameters, as run/bench take them
  std::string out;
  std::string inputs = "uniform";
  double max_error = -1;  // < 0: no budget in the profile
  CLI::Option* max_error_opt = nullptr;
};

struct Series {
  std::vector<double> seconds;  // NaN where not measured
  std::vector<double> errors;   // relative error vs dense
  std::optional<std::string> skipped;
};

// Measures every built variant at every length; dense's output is each length's reference.
std::map<std::string, Series> measure_all(const CalibrateFlags& f,
                                          const std::vector<CatalogueEntry>& entries,
                                          const std::vector<std::int64_t>& seqs) {
  std::map<std::string, Series> series;
  for (const CatalogueEntry& e : entries) series[e.name].skipped = not_built_reason(e.spec);
  for (const std::int64_t seq : seqs) {
    Shape shape = f.shape;
    shape.seq = seq;
    Workload w(shape);
    // A fixed seed per length: the same profile from the same machine and flags.
    fill_inputs(w, parse_input_family(f.inputs, "--inputs"), 11 + static_cast<std::uint64_t>(seq));
    std::vector<float> dense_out;
    for (const CatalogueEntry& e : entries) {
      Series& s = series[e.name];
      if (s.skipped) {
        s.seconds.push_back(NAN);
        s.errors.push_back(NAN);
        continue;
      }
      AttentionOptions options;
      options.variant = as_variant_spec(e.spec);
      options.threads = f.threads;
      const Timing t = time_attend(w, options, 1, f.repeat);
      if (e.name == "dense") dense_out = w.out;
      s.seconds.push_back(t.median_seconds);
      s.errors.push_back(relative_error(w.out, dense_out));
      std::cerr << "calibrate: S=" << seq << " " << e.name << " "
                << format_seconds(t.median_seconds) << ", relative error vs dense "
                << s.errors.back() << "\n";
    }
  }
  return series;
}

std::int64_t threshold(const Crossover& c) {
  return c.n ? static_cast<std::int64_t>(std::floor(*c.n)) : kNever;
}

const ConcreteSpec& spec_named(const std::vector<CatalogueEntry>& entries,
                               const std::string& name) {
  for (const CatalogueEntry& e : entries) {
    if (e.name == name) return e.spec;
  }
  throw Error(ErrorKind::kInvalidArgument, "variant", "a row of the variant table", name);
}

// The document's three bands as rules: dense up to the first crossover of sliding window or
// linear, sliding window up to where linear overtakes it; a variant that is not built or
// never wins gets an empty band. Every other variant's crossover with dense is recorded.
SelectionPolicy derive_policy(const std::vector<CatalogueEntry>& entries,
                              const std::vector<double>& n,
                              const std::map<std::string, Series>& series,
                              nlohmann::json& crossovers) {
  auto versus = [&](const std::string& name, const std::string& baseline) {
    const Series& s = series.at(name);
    const Crossover c = s.skipped ? Crossover{std::nullopt, "not built"}
                                  : find_crossover(n, s.seconds, series.at(baseline).seconds);
    crossovers[name + " vs " + baseline] = {
        {"seq", c.n ? nlohmann::json(*c.n) : nlohmann::json(nullptr)}, {"note", c.note}};
    return c;
  };
  for (const auto& [name, s] : series) {
    if (name != "dense" && name != "sliding-window" && name != "linear") versus(name, "dense");
  }
  const Crossover sliding = versus("sliding-window", "dense");
  const Crossover linear = versus("linear", "dense");
  const std::int64_t dense_max = std::min(threshold(sliding), threshold(linear));
  std::int64_t sparse_max = dense_max;
  if (sliding.n && !series.at("linear").skipped) {
    sparse_max = std::max(dense_max, threshold(versus("linear", "sliding-window")));
  } else if (sliding.n) {
    sparse_max = kNever;  // linear is not built: never hand it a problem
  }
  SelectionPolicy p;
  p.rules = {{dense_max, DenseSpec{}},
             {sparse_max, spec_named(entries, "sliding-window")},
             {std::nullopt, spec_named(entries, "linear")}};
  p.source = "seqattn calibrate";
  return p;
}

std::vector<std::int64_t> checked_lengths(const CalibrateFlags& f) {
  if (f.out.empty()) throw Error(ErrorKind::kInvalidArgument, "--out", "a profile path", "''");
  for (const auto& [value, name] : {std::pair{f.shape.batch, "--batch"},
                                    {f.shape.heads, "--heads"},
                                    {f.shape.dim, "--dim"},
                                    {std::int64_t{f.repeat}, "--repeat"}}) {
    if (value < 1) throw Error(ErrorKind::kInvalidArgument, name, ">= 1", std::to_string(value));
  }
  const std::vector<std::int64_t> seqs = parse_int_list(f.seqs, "--seqs");
  for (std::size_t i = 0; i < seqs.size(); ++i) {
    if (seqs[i] < 1 || (i > 0 && seqs[i] <= seqs[i - 1])) {
      throw Error(ErrorKind::kInvalidArgument, "--seqs", "increasing lengths >= 1", f.seqs);
    }
  }
  return seqs;
}

// What the profile records beyond the policy's own fields: how it was measured, the
// crossovers, each variant's parameters as text and why a variant was skipped.
void add_context(const CalibrateFlags& f, const std::vector<CatalogueEntry>& entries,
                 const std::map<std::string, Series>& series, nlohmann::json& m) {
  m["shape"] = {{"batch", f.shape.batch}, {"heads", f.shape.heads}, {"dim", f.shape.dim}};
  m["threads"] = f.threads == 0 ? hardware_threads() : f.threads;
  m["repeat"] = f.repeat;
  m["simd_target"] = simd_target();
  m["inputs"] = f.inputs;
  m["error_metric"] = "max |out - dense| / max |dense| on the same inputs (family 'inputs')";
  for (const CatalogueEntry& e : entries) {
    nlohmann::json& row = m["variants"][e.name];
    row["parameters"] = e.parameters;
    if (const Series& s = series.at(e.name); s.skipped) row["skipped"] = *s.skipped;
  }
}

void calibrate(CalibrateFlags f) {
  const std::vector<std::int64_t> seqs = checked_lengths(f);
  parse_input_family(f.inputs, "--inputs");
  const bool budget = f.max_error_opt->count() > 0;
  if (budget && !(f.max_error >= 0)) {
    throw Error(ErrorKind::kInvalidArgument, "--max-error", "a number >= 0",
                std::to_string(f.max_error));
  }
  f.shape.kv_heads = f.shape.heads;
  f.shape.dim_v = f.shape.dim;
  const std::vector<CatalogueEntry> entries = catalogue(given_params(f.params));
  const std::map<std::string, Series> series = measure_all(f, entries, seqs);

  nlohmann::json crossovers = nlohmann::json::object();
  SelectionPolicy policy =
      derive_policy(entries, std::vector<double>(seqs.begin(), seqs.end()), series, crossovers);
  policy.inputs = f.inputs;
  if (budget) policy.max_error = f.max_error;
  for (const CatalogueEntry& e : entries) {
    const Series& s = series.at(e.name);
    for (std::size_t i = 0; i < seqs.size() && !s.skipped; ++i) {
      if (std::isfinite(s.seconds[i]) && std::isfinite(s.errors[i])) {
        policy.measurements.push_back({e.name, seqs[i], s.seconds[i], s.errors[i], e.spec});
      }
    }
  }
  nlohmann::json profile = nlohmann::json::parse(policy.to_json());
  add_context(f, entries, series, profile["measurements"]);
  profile["measurements"]["crossovers"] = crossovers;
  npy::write_file_atomically(f.out, profile.dump(2) + "\n", "--out");
  std::cerr << "calibrate: dense up to " << *policy.rules[0].max_seq << ", sliding window up to "
            << *policy.rules[1].max_seq << " -> " << f.out << "\n";
}

}  // namespace

void add_calibrate_command(CLI::App& app) {
  auto flags = std::make_shared<CalibrateFlags>();
  CLI::App* cmd = app.add_subcommand("calibrate", "measure crossovers and write a profile");
  cmd->add_option("--out", flags->out, "profile .json to write")->required();
  cmd->add_option("--batch", flags->shape.batch, "batch B")->capture_default_str();
  cmd->add_option("--heads", flags->shape.heads, "heads H")->capture_default_str();
  cmd->add_option("--dim", flags->shape.dim, "head dimension D")->capture_default_str();
  cmd->add_option("--threads", flags->threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--repeat", flags->repeat, "timed runs per point")->capture_default_str();
  cmd->add_option("--seqs", flags->seqs, "lengths to measure")->capture_default_str();
  add_param_flags(*cmd, flags->params);  // --window, --feature-map, --proj-len, --block, ...
  cmd->add_option(
         "--inputs", flags->inputs,
         "input family the errors are measured on: decaying|anchors|lowrank|clustered|uniform")
      ->capture_default_str();
  flags->max_error_opt = cmd->add_option(
      "--max-error", flags->max_error,
      "error budget stored in the profile: auto then picks the fastest variant within it");
  cmd->callback([flags] { calibrate(*flags); });
}

}  // namespace seqattn::cli
