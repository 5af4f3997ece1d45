// `seqattn run`: attention over q/k/v .npy files, written to .npy outputs.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "cli/commands.hpp"
#include "cli/npy.hpp"
#include "cli/variant_flags.hpp"
#include "seqattn/error.hpp"

namespace seqattn::cli {
namespace {

struct RunFlags {
  std::string q, k, v, out, weights, lse;
  bool causal = false;
  std::string key_lengths;
  float scale = 0;
  CLI::Option* scale_opt = nullptr;
  int threads = 0;
  std::string layout = "bhsd";
  bool json = false;
  VariantFlags variant;
};

// An input file and its [B, H, S, D] view: rank 4 in the chosen layout, or rank 2 [S, D].
struct Input {
  npy::Array array;
  ConstTensor view;
};

Input load_input(const std::string& path, const std::string& argument, bool bshd_layout) {
  Input in{npy::load(path, argument), {}};
  const std::vector<std::int64_t>& s = in.array.shape;
  const float* data = in.array.data.data();
  if (in.array.rank() == 2) {
    in.view = matrix(data, s[0], s[1]);
  } else if (in.array.rank() == 4) {
    in.view = bshd_layout ? bshd(data, s[0], s[1], s[2], s[3]) : bhsd(data, s[0], s[1], s[2], s[3]);
  } else {
    throw Error(ErrorKind::kInvalidArgument, argument,
                bshd_layout ? "rank 4 [B, S, H, D] or rank 2 [S, D]"
                            : "rank 4 [B, H, S, D] or rank 2 [S, D]",
                "rank " + std::to_string(in.array.rank()) + " shape " + npy::shape_text(s) +
                    " in '" + path + "'");
  }
  return in;
}

// An output buffer with the file shape it is saved under and its [B, H, S, D] view.
struct Output {
  std::vector<float> data;
  std::vector<std::int64_t> file_shape;
  Tensor view;
};

Output make_output(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool as_matrix,
                   bool bshd_layout) {
  Output o;
  o.data.assign(static_cast<std::size_t>(b * h * s * d), 0.0f);
  if (as_matrix) {
    o.file_shape = {s, d};
    o.view = matrix(o.data.data(), s, d);
  } else if (bshd_layout) {
    o.file_shape = {b, s, h, d};
    o.view = bshd(o.data.data(), b, s, h, d);
  } else {
    o.file_shape = {b, h, s, d};
    o.view = bhsd(o.data.data(), b, h, s, d);
  }
  return o;
}

void run(const RunFlags& f) {
  if (f.layout != "bhsd" && f.layout != "bshd") {
    throw Error(ErrorKind::kInvalidArgument, "--layout", "bhsd or bshd", "'" + f.layout + "'");
  }
  const bool bshd_layout = f.layout == "bshd";
  AttentionOptions options;
  options.variant = make_spec(f.variant);
  options.mask.causal = f.causal;
  if (!f.key_lengths.empty())
    options.mask.key_lengths = parse_int_list(f.key_lengths, "--key-lengths");
  if (f.scale_opt->count() > 0) options.scale = f.scale;
  options.threads = f.threads;

  const Input q = load_input(f.q, "--q", bshd_layout);
  const Input k = load_input(f.k, "--k", bshd_layout);
  const Input v = load_input(f.v, "--v", bshd_layout);
  const std::int64_t batch = q.view.batch(), heads = q.view.heads(), seq_q = q.view.seq();
  const std::int64_t seq_k = k.view.seq();
  const bool as_matrix = q.array.rank() == 2;

  Output out = make_output(batch, heads, seq_q, v.view.dim(), as_matrix, bshd_layout);
  std::optional<Output> weights, lse;
  if (!f.weights.empty()) {
    weights = make_output(batch, heads, seq_q, seq_k, as_matrix, false);
    options.weights = weights->view;
  }
  if (!f.lse.empty()) {
    lse = make_output(batch, heads, seq_q, 1, false, false);
    lse->file_shape = as_matrix ? std::vector<std::int64_t>{seq_q}
                                : std::vector<std::int64_t>{batch, heads, seq_q};
    options.lse = lse->view;
  }

  const RunRecord record = attend(q.view, k.view, v.view, out.view, options);

  npy::StagedOutputs staged;
  staged.stage_npy(f.out, out.file_shape, out.data.data(), "--out");
  if (weights) staged.stage_npy(f.weights, weights->file_shape, weights->data.data(), "--weights");
  if (lse) staged.stage_npy(f.lse, lse->file_shape, lse->data.data(), "--lse");
  staged.commit();

  if (f.json) {
    nlohmann::json j = record_json(record);
    j["out"] = f.out;
    j["out_shape"] = out.file_shape;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cerr << "seqattn run: " << record_line(record) << "\n";
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd = app.add_subcommand("run", "attention over q/k/v .npy files (float32)");
  cmd->add_option("--q", flags->q, "queries .npy [B,H,S_q,D] or [S_q,D]")->required();
  cmd->add_option("--k", flags->k, "keys .npy [B,H_kv,S_k,D] or [S_k,D]")->required();
  cmd->add_option("--v", flags->v, "values .npy [B,H_kv,S_k,D_v] or [S_k,D_v]")->required();
  cmd->add_option("--out", flags->out, "output .npy, same layout as q")->required();
  cmd->add_option("--weights", flags->weights, "also write the attention weights [B,H,S_q,S_k]");
  cmd->add_option("--lse", flags->lse, "also write the per-row log-sum-exp [B,H,S_q]");
  cmd->add_flag("--causal", flags->causal, "causal mask (key j visible iff j <= i + S_k - S_q)");
  cmd->add_option("--key-lengths", flags->key_lengths, "valid keys per batch, e.g. 5,3");
  flags->scale_opt = cmd->add_option("--scale", flags->scale, "score scale (default 1/sqrt(D))");
  cmd->add_option("--threads", flags->threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--layout", flags->layout, "rank-4 file layout: bhsd or bshd")
      ->capture_default_str();
  cmd->add_flag("--json", flags->json, "print the run record as JSON on stdout");
  add_variant_flags(*cmd, flags->variant);
  cmd->callback([flags] { run(*flags); });
}

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json record_json(const RunRecord& r) {
  return {{"variant", std::string(to_string(r.variant))},
          {"reason", r.reason},
          {"ms", r.seconds * 1e3},
          {"gflops", number_or_null(r.seconds > 0 ? r.flops / r.seconds * 1e-9 : 0)},
          {"flops", r.flops},
          {"bytes", r.bytes},
          {"threads", r.threads},
          {"simd_target", r.simd_target}};
}

std::string record_line(const RunRecord& r) {
  char text[160];
  std::snprintf(text, sizeof text, "%.3f ms, %.2f GFLOP/s, %d thread%s, %s", r.seconds * 1e3,
                r.seconds > 0 ? r.flops / r.seconds * 1e-9 : 0.0, r.threads,
                r.threads == 1 ? "" : "s", r.simd_target.c_str());
  return std::string(to_string(r.variant)) + " (" + r.reason + "): " + text;
}

}  // namespace seqattn::cli
