// Variant selection by sequence length: the document's default thresholds and JSON profiles.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

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
