// Variant selection by sequence length: the document's default rules, ordered rules, and JSON
// profiles (the rules format and the threshold format written before it).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"

namespace seqattn {
namespace {

TEST(Policy, DefaultFollowsReferenceDocument) {
  const SelectionPolicy p;
  EXPECT_EQ(select_variant(p, 1).variant, Variant::kDense);
  EXPECT_EQ(select_variant(p, 512).variant, Variant::kDense);
  EXPECT_EQ(select_variant(p, 513).variant, Variant::kSlidingWindow);
  EXPECT_EQ(select_variant(p, 2048).variant, Variant::kSlidingWindow);
  EXPECT_EQ(select_variant(p, 2049).variant, Variant::kLinear);
  const Selection s = select_variant(p, 3000);
  EXPECT_NE(s.reason.find("S_k=3000"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("2048"), std::string::npos) << s.reason;
}

TEST(Policy, RulesDecideInOrder) {
  SelectionPolicy p;
  p.rules = {{100, DenseSpec{}},
             {100, SlidingWindowSpec{8, 8, {}}},  // an empty band: never chosen
             {5000, HierarchicalSpec{32, 0}},
             {std::nullopt, LinformerSpec{}}};
  EXPECT_EQ(select_variant(p, 100).variant, Variant::kDense);
  const Selection h = select_variant(p, 101);
  EXPECT_EQ(h.variant, Variant::kHierarchical);
  EXPECT_EQ(std::get<HierarchicalSpec>(h.spec).block, 32);
  EXPECT_NE(h.reason.find("rule 3 of 4"), std::string::npos) << h.reason;
  EXPECT_NE(h.reason.find("block 32"), std::string::npos) << h.reason;
  EXPECT_EQ(select_variant(p, 5001).variant, Variant::kLinformer);
  EXPECT_EQ(*p.max_seq_of(Variant::kHierarchical), 5000);
  EXPECT_FALSE(p.max_seq_of(Variant::kLinformer).has_value());
  EXPECT_THROW(p.max_seq_of(Variant::kLinear), Error);
  // Broken orders are Errors naming the rule.
  for (const std::vector<PolicyRule>& rules : std::vector<std::vector<PolicyRule>>{
           {},
           {{10, DenseSpec{}}},
           {{std::nullopt, DenseSpec{}}, {std::nullopt, LinearSpec{}}},
           {{10, DenseSpec{}}, {5, LinearSpec{}}, {std::nullopt, LinearSpec{}}},
           {{-1, DenseSpec{}}, {std::nullopt, LinearSpec{}}}}) {
    SelectionPolicy bad;
    bad.rules = rules;
    try {
      select_variant(bad, 1);
      ADD_FAILURE() << rules.size() << " rules accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("rules"), std::string::npos) << e.what();
    }
  }
}

TEST(Policy, JsonRoundTripAndErrors) {
  const std::string path = ::testing::TempDir() + "seqattn_policy.json";
  SelectionPolicy p;
  LinearSpec favor;
  favor.feature_map = FeatureMap::kFavor;
  favor.num_features = 48;
  favor.seed = 9;
  p.rules = {{1000, DenseSpec{}},
             {4000, SlidingWindowSpec{128, 64, {0, 3}}},
             {9000, HierarchicalSpec{16, 2}},
             {std::nullopt, favor}};
  p.save_json(path);
  const SelectionPolicy loaded = SelectionPolicy::load_json(path);
  ASSERT_EQ(loaded.rules.size(), 4u);
  EXPECT_EQ(*loaded.rules[0].max_seq, 1000);
  const auto& w = std::get<SlidingWindowSpec>(loaded.rules[1].spec);
  EXPECT_EQ(w.left, 128);
  EXPECT_EQ(w.right, 64);
  EXPECT_EQ(w.global_tokens, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(std::get<HierarchicalSpec>(loaded.rules[2].spec).levels, 2);
  const auto& l = std::get<LinearSpec>(loaded.rules[3].spec);
  EXPECT_EQ(l.feature_map, FeatureMap::kFavor);
  EXPECT_EQ(l.num_features, 48);
  EXPECT_EQ(l.seed, 9u);
  EXPECT_FALSE(loaded.rules[3].max_seq.has_value());
  EXPECT_EQ(select_variant(loaded, 900).variant, Variant::kDense);
  EXPECT_NE(select_variant(loaded, 10000).reason.find(path), std::string::npos);
  EXPECT_EQ(loaded.to_json(), p.to_json());

  std::ofstream(path) << R"({"rules": [{"max_seq": 10, "variant": "dense"}]})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);  // the last rule has a bound
  std::ofstream(path) << R"({"rules": [{"variant": "auto"}]})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::ofstream(path) << R"({"rules": [{"variant": "dense", "params": {"window": 3}}]})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);  // dense takes no window
  std::ofstream(path) << R"({"rules": [{"variant": "dense"}], "window": 3})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);  // old keys next to rules
}

// A profile written before the rules loads as the equivalent three rules.
TEST(Policy, ThresholdProfilesStillLoad) {
  const std::string path = ::testing::TempDir() + "seqattn_policy_old.json";
  std::ofstream(path) << R"({"dense_max_seq": 1000, "sparse_max_seq": 4000, "window": 128,
      "feature_map": "favor", "num_features": 32, "hierarchical_block": 16,
      "measurements": {"seqs": [64], "variants": {"hierarchical":
        {"median_ms": [1.0], "relative_error": [0.1]}, "linformer":
        {"median_ms": [0.5], "relative_error": [0.01]}}}})";
  const SelectionPolicy loaded = SelectionPolicy::load_json(path);
  ASSERT_EQ(loaded.rules.size(), 3u);
  EXPECT_EQ(*loaded.max_seq_of(Variant::kDense), 1000);
  EXPECT_EQ(*loaded.max_seq_of(Variant::kSlidingWindow), 4000);
  EXPECT_EQ(std::get<SlidingWindowSpec>(loaded.rules[1].spec).right, 128);
  EXPECT_EQ(std::get<LinearSpec>(loaded.rules[2].spec).num_features, 32);
  // Linformer is not a variant auto chooses; hierarchical keeps the old block key.
  ASSERT_EQ(loaded.measurements.size(), 1u);
  const Selection s = select_variant(loaded, 64, 0.5);
  EXPECT_EQ(std::get<HierarchicalSpec>(s.spec).block, 16);

  std::ofstream(path) << R"({"dense_max_seq": 100, "sparse_max_seq": 50})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::ofstream(path) << R"({"window": "wide"})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::ofstream(path) << "not json";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::remove(path.c_str());
  try {
    SelectionPolicy::load_json(path);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos);
  }
  // A directory opens as a stream on Linux and fails only when read: still an Error(kIo).
  try {
    SelectionPolicy::load_json(::testing::TempDir());
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kIo);
    EXPECT_NE(std::string(e.what()).find("cannot be read"), std::string::npos) << e.what();
  }
}

// Hand-made measurements: at S = 1024 sliding window (error 0.05) is the fastest within 0.1,
// linear (error 0.9) only within 1; at S = 4096 nothing but dense is within 0.1.
SelectionPolicy measured_policy() {
  SelectionPolicy p;
  p.inputs = "decaying";
  p.measurements = {{"dense", 1024, 0.040, 0.0},          {"sliding-window", 1024, 0.010, 0.05},
                    {"linear", 1024, 0.002, 0.9},         {"dense", 4096, 0.600, 0.0},
                    {"sliding-window", 4096, 0.040, 0.3}, {"linear", 4096, 0.008, 1.0}};
  return p;
}

TEST(Policy, ErrorBudgetPicksTheFastestVariantWithinIt) {
  const SelectionPolicy p = measured_policy();
  EXPECT_EQ(select_variant(p, 1000, 0.1).variant, Variant::kSlidingWindow);
  EXPECT_EQ(select_variant(p, 1000, 1.0).variant, Variant::kLinear);
  EXPECT_EQ(select_variant(p, 1000, 0.0).variant, Variant::kDense);
  EXPECT_EQ(select_variant(p, 2000, 0.1).variant, Variant::kDense);  // judged at S = 4096
  EXPECT_EQ(select_variant(p, 2000, 0.5).variant, Variant::kSlidingWindow);
  EXPECT_EQ(select_variant(p, 100000, 0.5).variant, Variant::kSlidingWindow);  // largest S
  const Selection s = select_variant(p, 1000, 0.1);
  ASSERT_EQ(s.candidates.size(), 3u);
  for (const PolicyMeasurement& m : s.candidates) EXPECT_EQ(m.seq, 1024);
  EXPECT_NE(s.reason.find("decaying"), std::string::npos) << s.reason;
  EXPECT_NE(s.reason.find("0.1"), std::string::npos) << s.reason;
  // No budget: the thresholds; a budget without measurements: the thresholds, and it says so.
  EXPECT_EQ(select_variant(p, 1000).variant, Variant::kSlidingWindow);
  EXPECT_TRUE(select_variant(p, 1000).candidates.empty());
  const Selection none = select_variant(SelectionPolicy{}, 3000, 0.1);
  EXPECT_EQ(none.variant, Variant::kLinear);
  EXPECT_NE(none.reason.find("no measured errors"), std::string::npos) << none.reason;
  EXPECT_THROW(select_variant(p, 1000, -1.0), Error);
  EXPECT_THROW(select_variant(p, 1000, std::nan("")), Error);
  // The profile's own budget applies unless the caller gives one.
  SelectionPolicy budgeted = p;
  budgeted.max_error = 0.1;
  EXPECT_EQ(select_variant(budgeted, 1000).variant, Variant::kSlidingWindow);
  EXPECT_EQ(select_variant(budgeted, 1000, 1.0).variant, Variant::kLinear);
}

TEST(Policy, MeasurementsAndBudgetRoundTripThroughJson) {
  const std::string path = ::testing::TempDir() + "seqattn_policy_measured.json";
  SelectionPolicy p = measured_policy();
  p.max_error = 0.25;
  p.save_json(path);
  const SelectionPolicy loaded = SelectionPolicy::load_json(path);
  EXPECT_EQ(loaded.inputs, "decaying");
  ASSERT_TRUE(loaded.max_error.has_value());
  EXPECT_EQ(*loaded.max_error, 0.25);
  ASSERT_EQ(loaded.measurements.size(), p.measurements.size());
  EXPECT_EQ(select_variant(loaded, 3000).variant, Variant::kDense);  // 0.3 > 0.25 at 4096
  // Measurements keep the spec they were taken with.
  SelectionPolicy narrow = p;
  narrow.measurements[1].spec = narrow.measurements[4].spec = SlidingWindowSpec{3, 4, {}};
  narrow.save_json(path);
  const Selection w = select_variant(SelectionPolicy::load_json(path), 1000, 0.1);
  EXPECT_EQ(std::get<SlidingWindowSpec>(w.spec).right, 4);
  narrow.measurements[4].spec = SlidingWindowSpec{};  // two specs for one variant
  EXPECT_THROW(narrow.save_json(path), Error);
  narrow.measurements[1].spec = DenseSpec{};  // not the named variant
  EXPECT_THROW(select_variant(narrow, 1000, 0.1), Error);
  // AutoSpec's budget reaches the plan's choice.
  std::vector<float> x(1024 * 8, 0.5f), out(x.size());
  AttentionOptions options;
  options.variant = AutoSpec{loaded, 1.0};
  const RunRecord r =
      attend(matrix<const float>(x.data(), 1024, 8), matrix<const float>(x.data(), 1024, 8),
             matrix<const float>(x.data(), 1024, 8), matrix(out.data(), 1024, 8), options);
  EXPECT_EQ(r.variant, Variant::kLinear) << r.reason;
  std::ofstream(path) << R"({"max_error": -2})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::ofstream(path) << R"({"measurements": {"seqs": [64, 128], "variants": {"linear":
      {"median_ms": [1.0], "relative_error": [0.5, 0.6]}}}})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::ofstream(path) << R"({"measurements": {"seqs": [64], "variants": {"linear":
      {"median_ms": [1.0], "relative_error": [-0.5]}}}})";
  EXPECT_THROW(SelectionPolicy::load_json(path), Error);
  std::remove(path.c_str());
}

TEST(Policy, AutoRunsTheSelectedVariantAndSaysWhy) {
  std::vector<float> x(64 * 8, 0.5f), out(64 * 8);
  AttentionOptions options;
  options.variant = AutoSpec{};
  const RunRecord r =
      attend(matrix<const float>(x.data(), 64, 8), matrix<const float>(x.data(), 64, 8),
             matrix<const float>(x.data(), 64, 8), matrix(out.data(), 64, 8), options);
  EXPECT_EQ(r.variant, Variant::kDense);
  EXPECT_NE(r.reason.find("S_k=64 <= 512: rule 1 of 3, dense"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace seqattn
