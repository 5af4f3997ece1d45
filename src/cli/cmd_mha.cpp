// `seqattn mha`: a multi-head attention layer (projections + any variant) over .npy files.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "seqattn/error.hpp"
#include "seqattn/mha.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/npy.hpp"
#include "src/cli/variant_flags.hpp"
#include "src/runtime/checked_size.hpp"

namespace seqattn::cli {
namespace {

struct MhaFlags {
  std::string x, wq, wk, wv, wo, out, weights;
  std::string bias_q, bias_k, bias_v, bias_o;
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  bool causal = false;
  std::string key_lengths;
  int threads = 0;
  std::string fp32_precision = "ieee";
  bool json = false;
  VariantFlags variant;
};

npy::Array load_rank(const std::string& path, const std::string& argument, std::int64_t rank,
                     const std::string& expected) {
  npy::Array a = npy::load(path, argument);
  if (a.rank() != rank) {
    throw Error(ErrorKind::kInvalidArgument, argument, expected,
                "shape " + npy::shape_text(a.shape) + " in '" + path + "'");
  }
  return a;
}

void set_projection(MultiHeadAttention& layer, Projection which, const std::string& path,
                    const std::string& argument) {
  const npy::Array w = load_rank(path, argument, 2, "a rank-2 weight [in, out]");
  layer.set_weights(which, w.data.data(), w.shape[0], w.shape[1]);
}

void set_bias(MultiHeadAttention& layer, Projection which, const std::string& path,
              const std::string& argument) {
  const npy::Array b = load_rank(path, argument, 1, "a rank-1 bias [out]");
  layer.set_bias(which, b.data.data(), b.shape[0]);
}

// The biases are all given or none (MhaConfig::bias covers every projection present).
bool biases_given(const MhaFlags& f) {
  const bool with_output = !f.wo.empty();
  if (!with_output && !f.bias_o.empty()) {
    throw Error(ErrorKind::kUnsupported, "--bias-o", "--wo to go with it", "no --wo");
  }
  const std::vector<std::string> biases = {f.bias_q, f.bias_k, f.bias_v, f.bias_o};
  const auto given =
      std::count_if(biases.begin(), biases.end(), [](const std::string& b) { return !b.empty(); });
  if (given != 0 && given != (with_output ? 4 : 3)) {
    throw Error(ErrorKind::kInvalidArgument, "--bias-q/--bias-k/--bias-v/--bias-o",
                with_output ? "all four biases or none" : "--bias-q, --bias-k, --bias-v or none",
                std::to_string(given) + " given");
  }
  return given > 0;
}

MultiHeadAttention make_layer(const MhaFlags& f, std::int64_t d_model) {
  MhaConfig config;
  config.d_model = d_model;
  config.num_heads = f.heads;
  config.num_kv_heads = f.kv_heads;
  config.bias = biases_given(f);
  config.output_projection = !f.wo.empty();
  config.variant = make_spec(f.variant);
  config.threads = f.threads;
  config.fp32_precision = parse_fp32_precision(f.fp32_precision, "--fp32-precision");
  MultiHeadAttention layer(config);
  set_projection(layer, Projection::kQuery, f.wq, "--wq");
  set_projection(layer, Projection::kKey, f.wk, "--wk");
  set_projection(layer, Projection::kValue, f.wv, "--wv");
  if (config.output_projection) set_projection(layer, Projection::kOutput, f.wo, "--wo");
  if (config.bias) {
    set_bias(layer, Projection::kQuery, f.bias_q, "--bias-q");
    set_bias(layer, Projection::kKey, f.bias_k, "--bias-k");
    set_bias(layer, Projection::kValue, f.bias_v, "--bias-v");
    if (config.output_projection) set_bias(layer, Projection::kOutput, f.bias_o, "--bias-o");
  }
  return layer;
}

void print_record(const MhaRecord& record, bool json) {
  if (json) {
    nlohmann::json j = record_json(record.attention);
    j["projection_ms"] = record.projection_seconds * 1e3;
    j["attention_ms"] = record.attention_seconds * 1e3;
    j["total_ms"] = record.total_seconds * 1e3;
    j["projection_flops"] = record.projection_flops;
    j["projection_path"] = record.projection_path;
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::cerr << "seqattn mha: " << record_line(record.attention) << "; projections "
            << record.projection_seconds * 1e3 << " ms, total " << record.total_seconds * 1e3
            << " ms\n";
}

void run_mha(const MhaFlags& f) {
  npy::check_output_paths({{"--out", f.out}, {"--weights", f.weights}});
  npy::Array x = npy::load(f.x, "--x");
  const bool matrix_input = x.rank() == 2;
  if (matrix_input) x.shape.insert(x.shape.begin(), 1);
  if (x.rank() != 3) {
    throw Error(ErrorKind::kInvalidArgument, "--x", "[B, S, d_model] or [S, d_model]",
                "shape " + npy::shape_text(x.shape) + " in '" + f.x + "'");
  }
  const std::int64_t batch = x.shape[0], seq = x.shape[1], d_model = x.shape[2];
  MultiHeadAttention layer = make_layer(f, d_model);
  Mask mask;
  mask.causal = f.causal;
  if (!f.key_lengths.empty()) mask.key_lengths = parse_int_list(f.key_lengths, "--key-lengths");

  std::vector<float> out = detail::checked_vector<float>(
      detail::checked_product({batch, seq, d_model}, "--x (batch x seq x d_model)"), "--x");
  std::vector<float> weights;
  std::optional<Tensor> weights_view;
  if (!f.weights.empty()) {
    weights = detail::checked_vector<float>(
        detail::checked_product({batch, f.heads, seq, seq}, "--weights (B x H x S x S)"),
        "--weights");
    weights_view = bhsd(weights.data(), batch, f.heads, seq, seq);
  }
  const MhaRecord record =
      layer.forward(SequenceView<const float>{x.data.data(), batch, seq, d_model, 0},
                    SequenceView<float>{out.data(), batch, seq, d_model, 0}, mask, weights_view);
  npy::StagedOutputs staged;
  staged.stage_npy(f.out,
                   matrix_input ? std::vector<std::int64_t>{seq, d_model}
                                : std::vector<std::int64_t>{batch, seq, d_model},
                   out.data(), "--out");
  if (weights_view)
    staged.stage_npy(f.weights, {batch, f.heads, seq, seq}, weights.data(), "--weights");
  staged.commit();

  print_record(record, f.json);
}

}  // namespace

void add_mha_command(CLI::App& app) {
  auto flags = std::make_shared<MhaFlags>();
  CLI::App* cmd = app.add_subcommand("mha", "multi-head attention layer over .npy files");
  cmd->add_option("--x", flags->x, "input .npy [B,S,d_model] or [S,d_model]")->required();
  cmd->add_option("--wq", flags->wq, "W_Q .npy [d_model, d_model] ([in, out])")->required();
  cmd->add_option("--wk", flags->wk, "W_K .npy [d_model, kv_heads*d_k]")->required();
  cmd->add_option("--wv", flags->wv, "W_V .npy [d_model, kv_heads*d_k]")->required();
  cmd->add_option("--wo", flags->wo, "W_O .npy [d_model, d_model] (omit: no output projection)");
  cmd->add_option("--bias-q", flags->bias_q, "b_Q .npy [d_model]");
  cmd->add_option("--bias-k", flags->bias_k, "b_K .npy [kv_heads*d_k]");
  cmd->add_option("--bias-v", flags->bias_v, "b_V .npy [kv_heads*d_k]");
  cmd->add_option("--bias-o", flags->bias_o, "b_O .npy [d_model]");
  cmd->add_option("--heads", flags->heads, "attention heads H")->required();
  cmd->add_option("--kv-heads", flags->kv_heads, "key/value heads (GQA/MQA; default H)");
  cmd->add_option("--out", flags->out, "output .npy, same shape as x")->required();
  cmd->add_option("--weights", flags->weights, "also write attention weights [B,H,S,S]");
  cmd->add_flag("--causal", flags->causal, "causal mask");
  cmd->add_option("--key-lengths", flags->key_lengths, "valid keys per batch, e.g. 5,3");
  cmd->add_option("--threads", flags->threads, "threads (0 = all cores)")->capture_default_str();
  add_fp32_precision_flag(*cmd, flags->fp32_precision);
  cmd->add_flag("--json", flags->json, "print the record as JSON on stdout");
  add_variant_flags(*cmd, flags->variant);
  cmd->callback([flags] { run_mha(*flags); });
}

}  // namespace seqattn::cli
