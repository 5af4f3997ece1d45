// seqattn select and calibrate end to end: thresholds, profiles, overrides, and the choice
// within an error budget measured on a chosen input family.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "seqattn/policy.hpp"
#include "tests/cli/cli_fixture.hpp"

namespace seqattn {
namespace {

TEST_F(CliTest, SelectFollowsTheDefaultThresholds) {
  const std::vector<std::pair<int, std::string>> expected = {
      {1, "dense"},     {512, "dense"},  {513, "sliding-window"}, {2048, "sliding-window"},
      {2049, "linear"}, {3000, "linear"}};
  for (const auto& [seq, variant] : expected) {
    const Result r = run("select --json --seq " + std::to_string(seq));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const nlohmann::json j = nlohmann::json::parse(r.out);
    EXPECT_EQ(j["variant"], variant) << "S=" << seq;
    EXPECT_FALSE(j["reason"].get<std::string>().empty());
  }
  const Result text = run("select --seq 3000");
  EXPECT_NE(text.out.find("variant: linear"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("S_k=3000 > 2048: rule 3 of 3"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("feature map elu1"), std::string::npos) << text.out;
}

TEST_F(CliTest, SelectUsesAProfileAndOverrides) {
  std::ofstream(path("p.json")) << R"({"dense_max_seq": 100, "sparse_max_seq": 200, "window": 32})";
  auto variant_at = [&](const std::string& args) {
    const Result r = run("select --json " + args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["variant"].get<std::string>();
  };
  const std::string profile = "--profile " + path("p.json");
  EXPECT_EQ(variant_at(profile + " --seq 100"), "dense");
  EXPECT_EQ(variant_at(profile + " --seq 150"), "sliding-window");
  EXPECT_EQ(variant_at(profile + " --seq 201"), "linear");
  EXPECT_EQ(variant_at(profile + " --dense-max-seq 180 --seq 150"), "dense");
  EXPECT_EQ(variant_at("--dense-max-seq 4096 --seq 3000"), "dense");
  const Result bad = run("select --seq 10 --dense-max-seq 300 --sparse-max-seq 200");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("rules[1].max_seq"), std::string::npos) << bad.err;
  const Result missing = run("select --seq 10 --profile " + path("none.json"));
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("profile"), std::string::npos) << missing.err;
}

TEST_F(CliTest, CalibrateWritesALoadableProfile) {
  const Result r = run("calibrate --seqs 32,64 --heads 1 --dim 16 --threads 1 --repeat 1 --out " +
                       path("profile.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const SelectionPolicy policy = SelectionPolicy::load_json(path("profile.json"));
  EXPECT_LE(*policy.max_seq_of(Variant::kDense), *policy.max_seq_of(Variant::kSlidingWindow));
  const nlohmann::json j = nlohmann::json::parse(read(path("profile.json")));
  ASSERT_TRUE(j.contains("measurements"));
  EXPECT_TRUE(j["measurements"]["variants"].contains("dense"));
  ASSERT_EQ(j["rules"].size(), 3u);
  EXPECT_EQ(j["measurements"]["variants"]["hierarchical"]["params"]["block"], 64);
  EXPECT_EQ(j["measurements"]["seqs"], (std::vector<int>{32, 64}));
}

// calibrate measures errors on the chosen inputs (fixed seeds) and stores the budget; select
// then picks, at every S, the fastest measured variant whose error is within it.
TEST_F(CliTest, CalibrateWithABudgetGivesChoicesWithinIt) {
  const Result r =
      run("calibrate --seqs 64,600 --heads 2 --dim 16 --threads 1 --repeat 1 --window 32 "
          "--inputs decaying --max-error 0.2 --out " +
          path("budget.json"));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json profile = nlohmann::json::parse(read(path("budget.json")));
  EXPECT_EQ(profile["max_error"], 0.2);
  EXPECT_EQ(profile["measurements"]["inputs"], "decaying");
  for (const int seq : {50, 64, 300, 600, 5000}) {
    const Result s =
        run("select --json --seq " + std::to_string(seq) + " --profile " + path("budget.json"));
    ASSERT_EQ(s.exit_code, 0) << s.err;
    const nlohmann::json j = nlohmann::json::parse(s.out);
    ASSERT_FALSE(j["candidates"].empty()) << j;
    double fastest_within = 1e300;
    std::string expected;
    for (const auto& c : j["candidates"]) {
      if (c["relative_error"].get<double>() <= 0.2 &&
          c["median_ms"].get<double>() < fastest_within) {
        fastest_within = c["median_ms"].get<double>();
        expected = c["variant"].get<std::string>();
      }
    }
    EXPECT_EQ(j["variant"], expected) << j;
  }
  EXPECT_EQ(run("calibrate --seqs 64 --inputs gaussian --out " + path("x.json")).exit_code, 2);
  EXPECT_EQ(run("calibrate --seqs 64 --max-error -1 --out " + path("x.json")).exit_code, 2);
}

}  // namespace
}  // namespace seqattn
