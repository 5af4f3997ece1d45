// Variant selection by sequence length: the document's default thresholds and JSON profiles.
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

TEST(Policy, JsonRoundTripAndErrors) {
  const std::string path = ::testing::TempDir() + "seqattn_policy.json";
  SelectionPolicy p;
  p.dense_max_seq = 1000;
  p.sparse_max_seq = 4000;
  p.window = 128;
  p.feature_map = "favor";
  p.save_json(path);
  const SelectionPolicy loaded = SelectionPolicy::load_json(path);
  EXPECT_EQ(loaded.dense_max_seq, 1000);
  EXPECT_EQ(loaded.sparse_max_seq, 4000);
  EXPECT_EQ(loaded.window, 128);
  EXPECT_EQ(loaded.feature_map, "favor");
  EXPECT_EQ(select_variant(loaded, 900).variant, Variant::kDense);
  EXPECT_NE(select_variant(loaded, 5000).reason.find(path), std::string::npos);

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
  EXPECT_NE(r.reason.find("dense_max_seq=512"), std::string::npos) << r.reason;
}

}  // namespace
}  // namespace seqattn
