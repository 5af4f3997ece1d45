#include "cli/variant_flags.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>

#include "seqattn/error.hpp"

namespace seqattn::cli {
namespace {

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

// Every variant flag given must be one of `used`: a flag is never silently ignored.
void reject_unused(const VariantFlags& f, const std::string& variant,
                   std::initializer_list<const CLI::Option*> used, const std::string& uses) {
  const PolicyFlags& p = f.policy;
  for (const CLI::Option* option :
       {f.window_opt, f.window_right_opt, f.global_opt, f.feature_map_opt, f.features_opt,
        f.seed_opt, f.proj_len_opt, f.block_opt, f.levels_opt, p.profile_opt, p.dense_max_opt,
        p.sparse_max_opt}) {
    if (!given(option) || std::find(used.begin(), used.end(), option) != used.end()) continue;
    std::string text = option->get_name();
    for (const std::string& value : option->results()) text += " " + value;
    throw Error(ErrorKind::kUnsupported, option->get_name(),
                "only options variant '" + variant + "' honours (" + uses + ")", text,
                "drop the flag or choose the variant it belongs to");
  }
}

SlidingWindowSpec sliding_window_spec(const VariantFlags& f) {
  reject_unused(f, "sliding-window", {f.window_opt, f.window_right_opt, f.global_opt},
                "--window, --window-right, --global");
  SlidingWindowSpec spec;
  if (given(f.window_opt)) spec.left = spec.right = f.window;
  if (given(f.window_right_opt)) spec.right = f.window_right;
  spec.global_tokens = f.global_tokens;
  return spec;
}

LinearSpec linear_spec(const VariantFlags& f) {
  LinearSpec spec;
  spec.feature_map = parse_feature_map(f.feature_map, "--feature-map");
  if (spec.feature_map == FeatureMap::kFavor) {
    reject_unused(f, "linear", {f.feature_map_opt, f.features_opt, f.seed_opt},
                  "--feature-map, --features, --seed");
  } else {
    reject_unused(f, "linear with --feature-map " + f.feature_map, {f.feature_map_opt},
                  "--feature-map; --features and --seed need --feature-map favor");
  }
  spec.num_features = f.features;
  spec.seed = f.seed;
  return spec;
}

LinformerSpec linformer_spec(const VariantFlags& f) {
  reject_unused(f, "linformer", {f.proj_len_opt, f.seed_opt}, "--proj-len, --seed");
  LinformerSpec spec;
  spec.proj_len = f.proj_len;
  spec.seed = f.seed;
  return spec;
}

HierarchicalSpec hierarchical_spec(const VariantFlags& f) {
  reject_unused(f, "hierarchical", {f.block_opt, f.levels_opt}, "--block, --levels");
  return HierarchicalSpec{f.block, f.levels};
}

AutoSpec auto_spec(const VariantFlags& f) {
  const PolicyFlags& p = f.policy;
  reject_unused(f, "auto",
                {p.profile_opt, p.dense_max_opt, p.sparse_max_opt, f.window_opt, f.feature_map_opt,
                 f.features_opt},
                "--profile, --dense-max-seq, --sparse-max-seq, --window, --feature-map, "
                "--features");
  AutoSpec spec;
  spec.policy = make_policy(p);
  if (given(f.window_opt)) spec.policy.window = f.window;
  if (given(f.feature_map_opt)) spec.policy.feature_map = f.feature_map;
  if (given(f.features_opt)) spec.policy.num_features = f.features;
  select_variant(spec.policy, 1);  // validates the overridden fields
  return spec;
}

}  // namespace

void add_policy_flags(CLI::App& command, PolicyFlags& flags) {
  flags.profile_opt = command.add_option("--profile", flags.profile,
                                         "selection profile written by `seqattn calibrate`");
  flags.dense_max_opt = command.add_option("--dense-max-seq", flags.dense_max_seq,
                                           "auto: dense up to this S_k (default 512)");
  flags.sparse_max_opt = command.add_option("--sparse-max-seq", flags.sparse_max_seq,
                                            "auto: sliding window up to this S_k (default 2048)");
}

void add_variant_flags(CLI::App& command, VariantFlags& flags) {
  command
      .add_option("--variant", flags.variant,
                  "dense|sliding-window|linear|linformer|hierarchical|auto")
      ->capture_default_str();
  flags.window_opt = command.add_option("--window", flags.window,
                                        "sliding-window: keys on each side (auto: policy window)");
  flags.window_right_opt = command.add_option("--window-right", flags.window_right,
                                              "sliding-window: keys on the right (0 = causal)");
  flags.global_opt = command
                         .add_option("--global", flags.global_tokens,
                                     "sliding-window: global token positions, e.g. 0,1")
                         ->delimiter(',');
  flags.feature_map_opt =
      command.add_option("--feature-map", flags.feature_map, "linear: elu1|relu|favor");
  flags.features_opt =
      command.add_option("--features", flags.features, "linear favor: random features m (0 = D)");
  flags.seed_opt = command.add_option("--seed", flags.seed, "favor / linformer random seed");
  flags.proj_len_opt =
      command.add_option("--proj-len", flags.proj_len, "linformer: projected length k");
  flags.block_opt = command.add_option("--block", flags.block, "hierarchical: block size b (even)");
  flags.levels_opt = command.add_option(
      "--levels", flags.levels, "hierarchical: coarse levels (0 = as many as the length needs)");
  add_policy_flags(command, flags.policy);
}

SelectionPolicy make_policy(const PolicyFlags& flags) {
  SelectionPolicy policy;
  if (given(flags.profile_opt)) policy = SelectionPolicy::load_json(flags.profile);
  if (given(flags.dense_max_opt)) {
    policy.dense_max_seq = flags.dense_max_seq;
    policy.source += ", --dense-max-seq";
  }
  if (given(flags.sparse_max_opt)) {
    policy.sparse_max_seq = flags.sparse_max_seq;
    policy.source += ", --sparse-max-seq";
  }
  if (given(flags.dense_max_opt) && !given(flags.sparse_max_opt) &&
      policy.sparse_max_seq < policy.dense_max_seq) {
    policy.sparse_max_seq = policy.dense_max_seq;  // an empty sliding-window band
  }
  select_variant(policy, 1);  // validates the thresholds now, naming the policy fields
  return policy;
}

VariantSpec make_spec(const VariantFlags& f) {
  switch (parse_variant(f.variant, "--variant")) {
    case Variant::kDense:
      reject_unused(f, "dense", {}, "none");
      return DenseSpec{};
    case Variant::kSlidingWindow:
      return sliding_window_spec(f);
    case Variant::kLinear:
      return linear_spec(f);
    case Variant::kLinformer:
      return linformer_spec(f);
    case Variant::kHierarchical:
      return hierarchical_spec(f);
    case Variant::kAuto:
      return auto_spec(f);
  }
  throw Error(ErrorKind::kInvalidArgument, "--variant", "a known variant", f.variant);
}

std::vector<std::int64_t> parse_int_list(const std::string& text, const std::string& argument) {
  std::vector<std::int64_t> values;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    const char* first = text.data() + start;
    const char* last = text.data() + comma;
    std::int64_t value = 0;
    const auto [end, error] = std::from_chars(first, last, value);
    if (first == last || error != std::errc() || end != last) {
      throw Error(ErrorKind::kInvalidArgument, argument, "comma-separated integers such as 128,256",
                  "'" + text + "'");
    }
    values.push_back(value);
    start = comma + 1;
  }
  return values;
}

DType parse_dtype(const std::string& text, const std::string& argument) {
  for (const DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (text == to_string(t)) return t;
  }
  throw Error(ErrorKind::kInvalidArgument, argument, "f32, bf16 or f16", "'" + text + "'");
}

}  // namespace seqattn::cli
