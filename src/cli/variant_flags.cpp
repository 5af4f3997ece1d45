#include "src/cli/variant_flags.hpp"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <map>

#include "seqattn/error.hpp"
#include "src/cli/npy.hpp"

namespace seqattn::cli {
namespace {

bool given(const CLI::Option* option) { return option != nullptr && option->count() > 0; }

// Spellings kept from before the flags came from the table.
const std::map<std::string, std::string> kAliases = {{"global_tokens", "--global"}};

std::string flags_text(const std::vector<ParameterInfo>& parameters) {
  std::string text;
  for (const ParameterInfo& p : parameters) {
    if (!text.empty()) text += ", ";
    text += flag_of(p.name);
  }
  return text.empty() ? "none" : text;
}

std::string given_text(const CLI::Option& option) {
  std::string text = option.get_name();
  for (const std::string& value : option.results()) text += " " + value;
  return text;
}

[[noreturn]] void refuse(const CLI::Option& option, const std::string& variant,
                         const std::string& honoured) {
  throw Error(ErrorKind::kUnsupported, option.get_name(),
              "only options variant '" + variant + "' honours (" + honoured + ")",
              given_text(option), "drop the flag or choose the variant it belongs to");
}

void refuse_policy_flags(const PolicyFlags& p, const std::string& variant,
                         const std::string& honoured) {
  for (const CLI::Option* option : {p.profile_opt, p.dense_max_opt, p.sparse_max_opt}) {
    if (given(option)) refuse(*option, variant, honoured);
  }
}

// Each given parameter applies to the rules whose variant takes it; one that no rule takes is
// refused.
AutoSpec auto_spec(const VariantFlags& f) {
  AutoSpec spec;
  spec.policy = make_policy(f.policy);
  for (const auto& [name, value] : given_params(f.params)) {
    bool used = false;
    for (PolicyRule& rule : spec.policy.rules) {
      for (const ParameterInfo& p : parameters_of(variant_of(rule.spec))) {
        if (p.name != name) continue;
        rule.spec = with_params(rule.spec, {{name, value}});
        used = true;
      }
    }
    if (!used) {
      refuse(*f.params.options.at(name), "auto",
             "--profile, --dense-max-seq, --sparse-max-seq and the parameters of the policy's "
             "rules");
    }
  }
  select_variant(spec.policy, 1);  // validates the policy now, naming its fields
  return spec;
}

// R from --rotations into f.rotations, viewed by the spec as [hashes * D, buckets / 2]; the
// variant checks the rows against D when it runs.
void load_rotations(const VariantFlags& f, LshSpec& spec) {
  const npy::Array a = npy::load(f.rotations_path, "--rotations");
  const std::string expected = "a float32 array [hashes, D, buckets/2] or [hashes*D, buckets/2]";
  if (a.dtype != DType::kF32 || (a.rank() != 2 && a.rank() != 3)) {
    throw Error(ErrorKind::kInvalidArgument, "--rotations", expected,
                std::string(to_string(a.dtype)) + " " + npy::shape_text(a.shape) + " in '" +
                    f.rotations_path + "'");
  }
  if (a.rank() == 3 && a.shape[0] != spec.hashes) {
    throw Error(ErrorKind::kInvalidArgument, "--rotations",
                "shape[0] = hashes = " + std::to_string(spec.hashes),
                npy::shape_text(a.shape) + " in '" + f.rotations_path + "'",
                "set --hashes to the file's rounds, or pass [hashes*D, buckets/2]");
  }
  const std::int64_t cols = a.shape.back();
  f.rotations = a.data;
  spec.rotations = {f.rotations.data(),
                    cols == 0 ? 0 : a.shape[0] * (a.rank() == 3 ? a.shape[1] : 1), cols, cols};
}

}  // namespace

std::string flag_of(const std::string& parameter) {
  std::string flag = "--" + parameter;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return flag;
}

void add_policy_flags(CLI::App& command, PolicyFlags& flags) {
  flags.profile_opt = command.add_option("--profile", flags.profile,
                                         "selection profile written by `seqattn calibrate`");
  flags.dense_max_opt = command.add_option("--dense-max-seq", flags.dense_max_seq,
                                           "auto: the dense rule's max S_k (default 512)");
  flags.sparse_max_opt =
      command.add_option("--sparse-max-seq", flags.sparse_max_seq,
                         "auto: the sliding-window rule's max S_k (default 2048)");
}

void add_param_flags(CLI::App& command, ParamFlags& flags) {
  std::map<std::string, std::string> help;
  std::vector<std::string> order;
  for (const Variant v : concrete_variants()) {
    for (const ParameterInfo& p : parameters_of(v)) {
      if (!help.count(p.name)) order.push_back(p.name);
      std::string& text = help[p.name];
      if (!text.empty()) text += "; ";
      text += std::string(to_string(v)) + ": " + p.help;
    }
  }
  for (const std::string& name : order) {
    const auto alias = kAliases.find(name);
    const std::string names =
        alias == kAliases.end() ? flag_of(name) : alias->second + "," + flag_of(name);
    flags.options[name] = command.add_option(names, flags.values[name], help[name])->delimiter(',');
  }
}

void add_variant_flags(CLI::App& command, VariantFlags& flags) {
  std::string names;
  for (const Variant v : concrete_variants()) names += std::string(to_string(v)) + "|";
  command.add_option("--variant", flags.variant, names + "auto")->capture_default_str();
  add_param_flags(command, flags.params);
  add_policy_flags(command, flags.policy);
  flags.rotations_opt = command.add_option(
      "--rotations", flags.rotations_path,
      "lsh: rotations R, float32 .npy [hashes, D, buckets/2] or [hashes*D, buckets/2]");
}

VariantParams given_params(const ParamFlags& flags) {
  VariantParams params;
  for (const auto& [name, option] : flags.options) {
    if (!given(option)) continue;
    std::string& text = params[name];
    for (const std::string& value : flags.values.at(name)) {
      if (!text.empty()) text += ',';
      text += value;
    }
  }
  return params;
}

SelectionPolicy make_policy(const PolicyFlags& flags) {
  SelectionPolicy policy;
  if (given(flags.profile_opt)) policy = SelectionPolicy::load_json(flags.profile);
  if (given(flags.dense_max_opt)) {
    policy.set_max_seq(Variant::kDense, flags.dense_max_seq);
    policy.source += ", --dense-max-seq";
  }
  if (given(flags.sparse_max_opt)) {
    policy.set_max_seq(Variant::kSlidingWindow, flags.sparse_max_seq);
    policy.source += ", --sparse-max-seq";
  }
  if (given(flags.dense_max_opt) && !given(flags.sparse_max_opt)) {
    const std::optional<std::int64_t> sparse = policy.max_seq_of(Variant::kSlidingWindow);
    if (sparse && *sparse < flags.dense_max_seq) {
      policy.set_max_seq(Variant::kSlidingWindow, flags.dense_max_seq);  // an empty band
    }
  }
  select_variant(policy, 1);  // validates the rules now, naming the policy fields
  return policy;
}

VariantSpec make_spec(const VariantFlags& f) {
  const Variant v = parse_variant(f.variant, "--variant");
  if (given(f.rotations_opt) && v != Variant::kLsh)
    refuse(*f.rotations_opt, f.variant, "--variant lsh");
  if (v == Variant::kAuto) return auto_spec(f);
  const std::vector<ParameterInfo> taken = parameters_of(v);
  const std::string honoured = flags_text(taken);
  refuse_policy_flags(f.policy, f.variant, honoured);
  const VariantParams params = given_params(f.params);
  for (const auto& given_param : params) {  // not a structured binding: clang 14 cannot capture one
    const bool takes = std::any_of(taken.begin(), taken.end(), [&](const ParameterInfo& p) {
      return p.name == given_param.first;
    });
    if (!takes) refuse(*f.params.options.at(given_param.first), f.variant, honoured);
  }
  ConcreteSpec spec = seqattn::make_spec(v, params);
  if (given(f.rotations_opt)) load_rotations(f, std::get<LshSpec>(spec));
  return as_variant_spec(spec);
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

DType parse_dtype(const std::string& text, const std::string& argument, bool cache_storage) {
  for (const DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    if (text == to_string(t)) return t;
  }
  if (cache_storage && text == to_string(DType::kI8)) return DType::kI8;
  throw Error(ErrorKind::kInvalidArgument, argument,
              cache_storage ? "f32, bf16, f16 or i8" : "f32, bf16 or f16", "'" + text + "'");
}

}  // namespace seqattn::cli
