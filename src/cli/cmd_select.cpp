// `seqattn select`: the variant the policy picks for a sequence length, without running it.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>

#include "seqattn/error.hpp"
#include "seqattn/options.hpp"
#include "seqattn/variant_params.hpp"
#include "src/cli/commands.hpp"
#include "src/cli/variant_flags.hpp"

namespace seqattn::cli {
namespace {

struct SelectFlags {
  std::int64_t seq = 0;
  bool json = false;
  double max_error = 0;
  CLI::Option* max_error_opt = nullptr;
  PolicyFlags policy;
};

void select(const SelectFlags& f) {
  if (f.seq < 1) {
    throw Error(ErrorKind::kInvalidArgument, "--seq", ">= 1", std::to_string(f.seq));
  }
  const SelectionPolicy policy = make_policy(f.policy);
  const std::optional<double> budget =
      f.max_error_opt->count() > 0 ? std::optional<double>(f.max_error) : std::nullopt;
  const Selection selection = select_variant(policy, f.seq, budget);
  const std::string parameters = describe(selection.spec);
  if (f.json) {
    nlohmann::json j = {{"seq", f.seq},
                        {"variant", std::string(to_string(selection.variant))},
                        {"reason", selection.reason},
                        {"parameters", parameters},
                        {"params", params_of(selection.spec)},
                        {"policy", nlohmann::json::parse(policy.to_json())},
                        {"candidates", nlohmann::json::array()}};
    for (const PolicyMeasurement& m : selection.candidates) {
      j["candidates"].push_back({{"variant", m.variant},
                                 {"seq", m.seq},
                                 {"median_ms", m.seconds * 1e3},
                                 {"relative_error", m.error}});
    }
    j["policy"]["source"] = policy.source;
    std::cout << j.dump(2) << std::endl;
    return;
  }
  std::cout << "variant: " << to_string(selection.variant) << " (" << parameters << ")\n"
            << "reason: " << selection.reason << "\n";
  for (const PolicyMeasurement& m : selection.candidates) {
    char line[160];
    std::snprintf(line, sizeof line, "  %-15s S=%-7lld %10.3f ms  error %.2e\n", m.variant.c_str(),
                  static_cast<long long>(m.seq), m.seconds * 1e3, m.error);
    std::cout << line;
  }
}

}  // namespace

void add_select_command(CLI::App& app) {
  auto flags = std::make_shared<SelectFlags>();
  CLI::App* cmd = app.add_subcommand("select", "print the variant the policy picks for S");
  cmd->add_option("--seq", flags->seq, "key sequence length S_k")->required();
  cmd->add_flag("--json", flags->json, "print the decision as JSON");
  flags->max_error_opt = cmd->add_option(
      "--max-error", flags->max_error,
      "error budget: the fastest profiled variant within it (overrides the profile's)");
  add_policy_flags(*cmd, flags->policy);
  cmd->callback([flags] { select(*flags); });
}

}  // namespace seqattn::cli
