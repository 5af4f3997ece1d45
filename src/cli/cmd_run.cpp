// `seqattn run`: attention over q/k/v .npy files, written to .npy outputs.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>

#include "seqattn/error.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/npy.hpp"
#include "src/cli/positional_flags.hpp"
#include "src/cli/variant_flags.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/element_types.hpp"

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
  std::string fp32_precision = "ieee";
  // Of out; not given: q's. "bf16" also reads '<u2' inputs as bfloat16 bits. Optional, so that
  // an empty value is refused instead of taken for "not given".
  std::optional<std::string> dtype;
  bool json = false;
  VariantFlags variant;
  PositionalFlags positional;
};

// A [B, H, S, D] view of any dtype over `data`: rank 4 in the chosen layout, or rank 2 [S, D].
template <class Elem>
TensorView<Elem> view_of(Elem* data, const std::vector<std::int64_t>& s, bool bshd_layout) {
  if (s.size() == 2) return matrix(data, s[0], s[1]);
  return bshd_layout ? bshd(data, s[0], s[1], s[2], s[3]) : bhsd(data, s[0], s[1], s[2], s[3]);
}

// An input file and its [B, H, S, D] view.
struct Input {
  npy::Array array;
  AnyConstTensor view;
};

Input load_input(const std::string& path, const std::string& argument, bool bshd_layout,
                 bool u2_is_bf16) {
  Input in{npy::load(path, argument, u2_is_bf16), {}};
  const std::vector<std::int64_t>& s = in.array.shape;
  if (in.array.rank() != 2 && in.array.rank() != 4) {
    throw Error(ErrorKind::kInvalidArgument, argument,
                bshd_layout ? "rank 4 [B, S, H, D] or rank 2 [S, D]"
                            : "rank 4 [B, H, S, D] or rank 2 [S, D]",
                "rank " + std::to_string(in.array.rank()) + " shape " + npy::shape_text(s) +
                    " in '" + path + "'");
  }
  detail::visit_element(in.array.dtype, [&](auto elem) {
    in.view = view_of(static_cast<const decltype(elem)*>(in.array.raw()), s, bshd_layout);
  });
  return in;
}

// An output file's array (its shape is the file's) and the [B, H, S, D] view over it.
struct Output {
  npy::Array array;
  AnyTensor view;

  Tensor f32_view() const { return view.as<float>(); }
  void stage(npy::StagedOutputs& staged, const std::string& path, const char* argument) const {
    staged.stage_npy(path, array.shape, array.dtype, array.raw(), argument);
  }
};

Output make_output(std::int64_t b, std::int64_t h, std::int64_t s, std::int64_t d, bool as_matrix,
                   bool bshd_layout, DType dtype = DType::kF32) {
  Output o;
  o.array.dtype = dtype;
  if (as_matrix) {
    o.array.shape = {s, d};
  } else if (bshd_layout) {
    o.array.shape = {b, s, h, d};
  } else {
    o.array.shape = {b, h, s, d};
  }
  // q and v are files of any size, so the output's product of their extents is checked.
  const std::int64_t count = detail::checked_product({b, h, s, d}, "--out (B x H x S_q x D_v)");
  if (dtype == DType::kF32) {
    o.array.data = detail::checked_vector<float>(count, "--out");
  } else {
    o.array.bits = detail::checked_vector<std::uint16_t>(count, "--out");
  }
  detail::visit_element(dtype, [&](auto elem) {
    using T = decltype(elem);
    o.view = view_of(static_cast<T*>(o.array.raw()), o.array.shape, bshd_layout);
  });
  return o;
}

void run(const RunFlags& f) {
  if (f.layout != "bhsd" && f.layout != "bshd") {
    throw Error(ErrorKind::kInvalidArgument, "--layout", "bhsd or bshd", "'" + f.layout + "'");
  }
  const bool bshd_layout = f.layout == "bshd";
  npy::check_output_paths({{"--out", f.out}, {"--weights", f.weights}, {"--lse", f.lse}});
  AttentionOptions options;
  options.variant = make_spec(f.variant);
  apply_positional(f.positional, options);
  options.mask.causal = f.causal;
  if (!f.key_lengths.empty())
    options.mask.key_lengths = parse_int_list(f.key_lengths, "--key-lengths");
  if (f.scale_opt->count() > 0) options.scale = f.scale;
  options.threads = f.threads;
  options.fp32_precision = parse_fp32_precision(f.fp32_precision, "--fp32-precision");

  // Parsed before any file is read, so a bad value is named first.
  const bool dtype_given = f.dtype.has_value();
  const DType wanted = dtype_given ? parse_dtype(*f.dtype, "--dtype") : DType::kF32;
  const bool bf16 = dtype_given && wanted == DType::kBF16;
  const Input q = load_input(f.q, "--q", bshd_layout, bf16);
  const Input k = load_input(f.k, "--k", bshd_layout, bf16);
  const Input v = load_input(f.v, "--v", bshd_layout, bf16);
  const std::int64_t batch = q.view.shape[0], heads = q.view.shape[1], seq_q = q.view.shape[2];
  const std::int64_t seq_k = k.view.shape[2];
  const bool as_matrix = q.array.rank() == 2;
  const DType out_dtype = dtype_given ? wanted : q.array.dtype;

  Output out = make_output(batch, heads, seq_q, v.view.shape[3], as_matrix, bshd_layout, out_dtype);
  std::optional<Output> weights, lse;
  if (!f.weights.empty()) {
    weights = make_output(batch, heads, seq_q, seq_k, as_matrix, false);
    options.weights = weights->f32_view();
  }
  if (!f.lse.empty()) {
    lse = make_output(batch, heads, seq_q, 1, false, false);
    lse->array.shape = as_matrix ? std::vector<std::int64_t>{seq_q}
                                 : std::vector<std::int64_t>{batch, heads, seq_q};
    options.lse = lse->f32_view();
  }

  const RunRecord record = attend(q.view, k.view, v.view, out.view, options);

  npy::StagedOutputs staged;
  out.stage(staged, f.out, "--out");
  if (weights) weights->stage(staged, f.weights, "--weights");
  if (lse) lse->stage(staged, f.lse, "--lse");
  staged.commit();

  if (f.json) {
    nlohmann::json j = record_json(record);
    j["out"] = f.out;
    j["out_shape"] = out.array.shape;
    std::cout << j.dump(2) << std::endl;
  } else {
    std::cerr << "seqattn run: " << record_line(record) << "\n";
  }
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto flags = std::make_shared<RunFlags>();
  CLI::App* cmd =
      app.add_subcommand("run", "attention over q/k/v .npy files (float32, float16, bfloat16)");
  cmd->add_option("--q", flags->q, "queries .npy [B,H,S_q,D] or [S_q,D]")->required();
  cmd->add_option("--k", flags->k, "keys .npy [B,H_kv,S_k,D] or [S_k,D]")->required();
  cmd->add_option("--v", flags->v, "values .npy [B,H_kv,S_k,D_v] or [S_k,D_v]")->required();
  cmd->add_option("--out", flags->out, "output .npy, same layout as q")->required();
  cmd->add_option("--weights", flags->weights, "also write the attention weights [B,H,S_q,S_k]");
  cmd->add_option("--lse", flags->lse, "also write the per-row log-sum-exp [B,H,S_q]");
  cmd->add_flag("--causal", flags->causal, "causal mask (key j visible iff j <= i + S_k - S_q)");
  cmd->add_option("--key-lengths", flags->key_lengths, "valid keys per batch, e.g. 5,3");
  flags->scale_opt = cmd->add_option(
      "--scale", flags->scale,
      "score scale, finite and > 0 (default 1/sqrt(D); linear elu1/relu: unscaled, favor: "
      "1/sqrt(D))");
  cmd->add_option("--threads", flags->threads, "threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--layout", flags->layout, "rank-4 file layout: bhsd or bshd")
      ->capture_default_str();
  cmd->add_option("--dtype", flags->dtype,
                  "dtype of --out: f32, bf16 or f16 (default q's); bf16 also reads '<u2' inputs "
                  "as raw bfloat16 bits and writes --out as '<u2'");
  add_fp32_precision_flag(*cmd, flags->fp32_precision);
  cmd->add_flag("--json", flags->json, "print the run record as JSON on stdout");
  add_variant_flags(*cmd, flags->variant);
  add_positional_flags(*cmd, flags->positional);
  cmd->callback([flags] { run(*flags); });
}

nlohmann::json number_or_null(double value) {
  return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(nullptr);
}

nlohmann::json timing_json(const Timing& t) {
  nlohmann::json j = record_json(t.record);
  j.erase("ms");
  j["median_ms"] = t.median_seconds * 1e3;
  j["min_ms"] = *std::min_element(t.seconds.begin(), t.seconds.end()) * 1e3;
  j["gflops"] = number_or_null(t.gflops());
  return j;
}

nlohmann::json record_json(const RunRecord& r) {
  return {{"variant", std::string(to_string(r.variant))},
          {"reason", r.reason},
          {"ms", r.seconds * 1e3},
          {"gflops", number_or_null(r.seconds > 0 ? r.flops / r.seconds * 1e-9 : 0)},
          {"flops", r.flops},
          {"bytes", r.bytes},
          {"threads", r.threads},
          {"simd_target", r.simd_target},
          {"compute_path", r.compute_path},
          {"decode_prefetch",
           r.decode_prefetch.empty() ? nlohmann::json() : nlohmann::json(r.decode_prefetch)}};
}

void add_fp32_precision_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--fp32-precision", value,
                 "ieee (exact fp32) or bf16 (round f32 q/k/v to bf16 and run the bf16 compute "
                 "path)")
      ->capture_default_str();
}

std::string record_line(const RunRecord& r) {
  char text[200];
  std::snprintf(text, sizeof text, "%.3f ms, %.2f GFLOP/s, %d thread%s, %s, %s compute",
                r.seconds * 1e3, r.seconds > 0 ? r.flops / r.seconds * 1e-9 : 0.0, r.threads,
                r.threads == 1 ? "" : "s", std::string(r.simd_target).c_str(),
                std::string(r.compute_path).c_str());
  return std::string(to_string(r.variant)) + " (" + std::string(r.reason) + "): " + text;
}

}  // namespace seqattn::cli
