// The flash kernel of the xsimd backend through attend(), on every compiled xsimd arch the
// CPU supports (forced one at a time): the shared cases of flash_kernel_cases.hpp, plus the
// reported target and exp2 accuracy.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "src/kernel/flash_attention_xsimd.hpp"
#include "src/simd/xsimd_dispatch.hpp"
#include "tests/dense/flash_kernel_cases.hpp"

namespace flash_test {
namespace {
using seqattn::simd::XsimdArch;

class FlashKernelXsimdTest : public ::testing::TestWithParam<XsimdArch> {
 protected:
  void SetUp() override { seqattn::simd::force_xsimd_arch_for_test(GetParam()); }
  void TearDown() override { seqattn::simd::force_xsimd_arch_for_test(std::nullopt); }
};

// The flash kernel's arch first, then the Highway target of the other kernels.
TEST_P(FlashKernelXsimdTest, ReportsForcedArch) {
  const std::string prefix =
      std::string("xsimd:") + seqattn::simd::xsimd_arch_name(GetParam()) + "+highway:";
  const std::string reported = seqattn::simd_target();
  EXPECT_EQ(reported.substr(0, prefix.size()), prefix);
  EXPECT_GT(reported.size(), prefix.size());
  seqattn::testing::FlashCase c;
  EXPECT_EQ(seqattn::testing::run_flash_case(c, false).record.simd_target, reported);
}

TEST_P(FlashKernelXsimdTest, Shapes) { cases::TestShapes(); }
TEST_P(FlashKernelXsimdTest, LayoutsGqaAndCrossAttention) {
  cases::TestLayoutsGqaAndCrossAttention();
}
TEST_P(FlashKernelXsimdTest, Masks) { cases::TestMasks(); }
TEST_P(FlashKernelXsimdTest, FullyMaskedRowsGiveZeros) { cases::TestFullyMaskedRowsGiveZeros(); }
TEST_P(FlashKernelXsimdTest, PaddingPastKeyLengthsIsNeverRead) {
  cases::TestPaddingPastKeyLengthsIsNeverRead();
}
TEST_P(FlashKernelXsimdTest, WeightsOutput) { cases::TestWeightsOutput(); }
TEST_P(FlashKernelXsimdTest, MergePartialsOverKeyHalves) {
  cases::TestMergePartialsOverKeyHalves();
}
TEST_P(FlashKernelXsimdTest, DeterministicAcrossThreadCounts) {
  cases::TestDeterministicAcrossThreadCounts();
}
TEST_P(FlashKernelXsimdTest, SlidingWindow) { cases::TestSlidingWindow(); }
TEST_P(FlashKernelXsimdTest, WideWindowEqualsDense) { cases::TestWideWindowEqualsDense(); }
TEST_P(FlashKernelXsimdTest, NonFiniteInputStaysInItsRow) {
  cases::TestNonFiniteInputStaysInItsRow();
}

// Same bound as the Highway test; n = 1001 also covers the padded tail.
TEST_P(FlashKernelXsimdTest, Exp2Accuracy) {
  const auto exp2 = seqattn::detail::current_xsimd_flash().exp2_non_positive;
  constexpr int kSteps = 126 * 4096;
  std::vector<float> in(kSteps + 1), out(in.size());
  for (int step = 0; step <= kSteps; ++step) in[step] = -static_cast<float>(step) / 4096.0f;
  exp2(in.data(), out.data(), in.size());
  double worst = 0;
  for (size_t n = 0; n < in.size(); ++n) {
    const double exact = std::exp2(static_cast<double>(in[n]));
    worst = std::max(worst, std::abs(out[n] - exact) / exact);
  }
  EXPECT_LE(worst, 2.5e-7);
  in.assign(1001, -std::numeric_limits<float>::infinity());
  out.assign(1001, 1.0f);
  exp2(in.data(), out.data(), in.size());
  for (const float x : out) EXPECT_EQ(x, 0.0f);
}

INSTANTIATE_TEST_SUITE_P(CompiledArchs, FlashKernelXsimdTest,
                         ::testing::ValuesIn(seqattn::simd::supported_xsimd_archs()),
                         [](const ::testing::TestParamInfo<XsimdArch>& info) {
                           switch (info.param) {
                             case XsimdArch::kSse4_2:
                               return std::string("sse4_2");
                             case XsimdArch::kAvx2Fma:
                               return std::string("avx2_fma");
                             case XsimdArch::kAvx512f:
                               return std::string("avx512f");
                           }
                           return std::string("unknown");
                         });

}  // namespace
}  // namespace flash_test
