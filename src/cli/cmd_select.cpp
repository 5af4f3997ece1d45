// `seqattn select`: the variant the policy picks for a sequence length, without running it.
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli/commands.hpp"
#include "cli/variant_flags.hpp"
#include "seqattn/error.hpp"
#include "seqattn/options.hpp"

namespace seqattn::cli {
namespace {

struct SelectFlags {
  std::int64_t seq = 0;
  bool json = false;
  PolicyFlags policy;
};

// What the chosen variant would be run with, as attend() resolves it.
std::string parameters_text(const SelectionPolicy& policy, Variant variant) {
  switch (variant) {
    case Variant::kSlidingWindow:
      return "window " + std::to_string(policy.window) + " on each side";
    case Variant::kLinear:
      return "feature map " + policy.feature_map +
             (policy.num_features > 0 ? ", " + std::to_string(policy.num_features) + " features"
                                      : std::string());
    default:
      return "exact softmax";
  }
}

void select(const SelectFlags& f) {
  if (f.seq < 1) {
    throw Error(ErrorKind::kInvalidArgument, "--seq", ">= 1", std::to_string(f.seq));
  }
  const SelectionPolicy policy = make_policy(f.policy);
  const Selection selection = select_variant(policy, f.seq);
  const std::string parameters = parameters_text(policy, selection.variant);
  if (f.json) {
    const nlohmann::json j = {{"seq", f.seq},
                              {"variant", std::string(to_string(selection.variant))},
                              {"reason", selection.reason},
                              {"parameters", parameters},
                              {"policy",
                               {{"dense_max_seq", policy.dense_max_seq},
                                {"sparse_max_seq", policy.sparse_max_seq},
                                {"window", policy.window},
                                {"feature_map", policy.feature_map},
                                {"num_features", policy.num_features},
                                {"source", policy.source}}}};
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::cout << "variant: " << to_string(selection.variant) << " (" << parameters << ")\n"
            << "reason: " << selection.reason << "\n";
}

}  // namespace

void add_select_command(CLI::App& app) {
  auto flags = std::make_shared<SelectFlags>();
  CLI::App* cmd = app.add_subcommand("select", "print the variant the policy picks for S");
  cmd->add_option("--seq", flags->seq, "key sequence length S_k")->required();
  cmd->add_flag("--json", flags->json, "print the decision as JSON");
  add_policy_flags(*cmd, flags->policy);
  cmd->callback([flags] { select(*flags); });
}

}  // namespace seqattn::cli
