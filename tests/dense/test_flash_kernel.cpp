// The flash kernel (dense and sliding window) through attend(), on every compiled Highway
// target: the shared cases of flash_kernel_cases.hpp, plus the dispatched target's name, exp2
// accuracy and the K packing's block transpose.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/dense/test_flash_kernel.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/tests/hwy_gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "src/simd/exp2-inl.h"
#include "src/simd/highway_ops-inl.h"
#include "tests/dense/flash_kernel_cases.hpp"

HWY_BEFORE_NAMESPACE();
namespace flash_test::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace seqattn;           // NOLINT
using namespace seqattn::testing;  // NOLINT

void TestReportsDispatchedTarget() {
  EXPECT_EQ(simd_target(), std::string("highway:") + hwy::TargetName(HWY_TARGET));
  FlashCase c;
  EXPECT_EQ(run_flash_case(c, false).record.simd_target, simd_target());
}

void TestShapes() { cases::TestShapes(); }
void TestLayoutsGqaAndCrossAttention() { cases::TestLayoutsGqaAndCrossAttention(); }
void TestMasks() { cases::TestMasks(); }
void TestFullyMaskedRowsGiveZeros() { cases::TestFullyMaskedRowsGiveZeros(); }
void TestPaddingPastKeyLengthsIsNeverRead() { cases::TestPaddingPastKeyLengthsIsNeverRead(); }
void TestWeightsOutput() { cases::TestWeightsOutput(); }
void TestMergePartialsOverKeyHalves() { cases::TestMergePartialsOverKeyHalves(); }
void TestDeterministicAcrossThreadCounts() { cases::TestDeterministicAcrossThreadCounts(); }
void TestSlidingWindow() { cases::TestSlidingWindow(); }
void TestWideWindowEqualsDense() { cases::TestWideWindowEqualsDense(); }
void TestNonFiniteInputStaysInItsRow() { cases::TestNonFiniteInputStaysInItsRow(); }

void TestExp2Accuracy() {
  const hn::ScalableTag<float> df;
  const size_t lanes = hn::Lanes(df);
  std::vector<float> in(lanes), out(lanes);
  double worst = 0;
  for (int step = 0; step <= 126 * 4096; step += static_cast<int>(lanes)) {
    for (size_t n = 0; n < lanes; ++n)
      in[n] = -static_cast<float>(step + static_cast<int>(n)) / 4096.0f;
    hn::StoreU(seqattn::simd::HWY_NAMESPACE::Exp2NonPositive(df, hn::LoadU(df, in.data())), df,
               out.data());
    for (size_t n = 0; n < lanes; ++n) {
      // Below -126 the result is exactly 0 (never a denormal, see exp2_body.inc).
      if (in[n] < -126.0f) {
        EXPECT_EQ(out[n], 0.0f) << in[n];
        continue;
      }
      EXPECT_GE(out[n], std::numeric_limits<float>::min()) << in[n];
      const double exact = std::exp2(static_cast<double>(in[n]));
      worst = std::max(worst, std::abs(out[n] - exact) / exact);
    }
  }
  EXPECT_LE(worst, 2.5e-7);
  in.assign(lanes, -std::numeric_limits<float>::infinity());
  hn::StoreU(seqattn::simd::HWY_NAMESPACE::Exp2NonPositive(df, hn::LoadU(df, in.data())), df,
             out.data());
  EXPECT_EQ(out[0], 0.0f);
}

// The K packing's block transpose: lane j of row i comes back as lane i of row j, for the
// target's whole vector (1 lane on the scalar target, where it changes nothing).
void TestTransposeSquare() {
  using Ops = seqattn::simd::HWY_NAMESPACE::FloatOps;
  constexpr size_t n = Ops::kLanes;
  alignas(64) float block[n * n];
  for (size_t i = 0; i < n * n; ++i) block[i] = static_cast<float>(i);
  Ops::V rows[n];
  for (size_t i = 0; i < n; ++i) rows[i] = Ops::Load(block + i * n);
  Ops::TransposeSquare(rows);
  alignas(64) float row[n];
  for (size_t i = 0; i < n; ++i) {
    Ops::Store(rows[i], row);
    for (size_t j = 0; j < n; ++j) EXPECT_EQ(row[j], block[j * n + i]) << i << ", " << j;
  }
}

}  // namespace flash_test::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace flash_test {
HWY_BEFORE_TEST(FlashKernelTest);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestReportsDispatchedTarget);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestShapes);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestLayoutsGqaAndCrossAttention);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestMasks);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestFullyMaskedRowsGiveZeros);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestPaddingPastKeyLengthsIsNeverRead);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestWeightsOutput);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestMergePartialsOverKeyHalves);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestDeterministicAcrossThreadCounts);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestSlidingWindow);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestWideWindowEqualsDense);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestNonFiniteInputStaysInItsRow);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestExp2Accuracy);
HWY_EXPORT_AND_TEST_P(FlashKernelTest, TestTransposeSquare);

}  // namespace flash_test
#endif  // HWY_ONCE
