// The int8 KV cache's portable micro-kernels on every compiled Highway target, exact against
// int64 references: QuadDotTile (Q·Kᵀ over key quads) and PairDotTile (P·V over value pairs)
// over the target's ops family of src/simd/int8_ops-inl.h (the pmaddwd pairs, or the int32
// lanes on SCALAR), for 1-6 rows, odd depths and widths (passes and their edges),
// extreme values and strided rows; and the int16 quantisation of the probabilities (round to
// nearest even, the same on every target).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "tests/kv_cache/test_int8_kernels.cpp"
#include <hwy/aligned_allocator.h>
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>
#include <hwy/tests/hwy_gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "src/kernel/decode/paced_requests.hpp"
#include "src/simd/int8_ops-inl.h"
#include "src/simd/prefetch.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::int8_test::HWY_NAMESPACE {
// clang-format off
#include "src/kernel/decode/int8_products-inl.h"  // IWYU pragma: keep
// clang-format on
using simd::HWY_NAMESPACE::Int8PairOps;
using simd::HWY_NAMESPACE::Int8QuadOps;
using simd::HWY_NAMESPACE::PairOps;

constexpr size_t kBlock = 64;  // keys of a cache block: a quad row is 4·64 bytes

template <class QOps, size_t kRows, size_t kVecs>
void CheckQuadTile(std::mt19937& gen, size_t quads) {
  constexpr size_t kKeys = kVecs * QOps::kLanes;
  constexpr size_t kQuadRow = 4 * std::max(kBlock, kKeys);  // a block's, or wider for the tile
  const size_t q_stride = quads * 4 + 5;
  std::uniform_int_distribution<int> byte(-127, 127);
  std::vector<std::int8_t> k(quads * kQuadRow), q(kRows * q_stride);
  for (auto& x : k) x = static_cast<std::int8_t>(byte(gen));
  for (auto& x : q) x = static_cast<std::int8_t>(byte(gen));
  for (size_t d = 0; d < quads * 4; ++d) {  // key 0 all -127 against row 0 all +127 and the
    k[d / 4 * kQuadRow + d % 4] = -127;     // last row all -127 (the largest pair sums, both
    q[d] = 127;                             // signs, once the bytes are paired)
    q[(kRows - 1) * q_stride + d] = kRows > 1 ? -127 : 127;
  }
  const size_t f_stride = quads * QOps::kParts + 3;  // the rows' factors, strided too
  std::vector<std::int32_t> factors(kRows * f_stride);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < quads; ++c)
      QOps::QueryFactors(&q[r * q_stride + 4 * c], &factors[r * f_stride + c * QOps::kParts]);
  }
  auto out = hwy::AllocateAligned<float>(kRows * kKeys);
  // Far requests for the first half of the quad rows (never faulting) and near ones for all.
  const simd::Prefetch ahead{static_cast<std::ptrdiff_t>(k.size()), simd::CacheLevel::kL2,
                             static_cast<std::int32_t>(kQuadRow)};
  QuadDotTile<QOps, kRows, kVecs>(factors.data(), f_stride, k.data(), kQuadRow, quads, out.get(),
                                  kKeys, ahead, quads / 2);
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t t = 0; t < kKeys; ++t) {
      std::int64_t sum = 0;
      for (size_t d = 0; d < quads * 4; ++d)
        sum += q[r * q_stride + d] * k[d / 4 * kQuadRow + 4 * t + d % 4];
      ASSERT_EQ(out[r * kKeys + t], static_cast<float>(sum))
          << "rows " << kRows << " vecs " << kVecs << " quads " << quads << " at " << r << ", "
          << t;
    }
  }
}

template <class POps, size_t kRows>
void CheckPairTile(std::mt19937& gen, size_t pairs, size_t cols) {
  const size_t pair_stride = 2 * cols + 32, w_stride = 2 * pairs + 1;
  std::uniform_int_distribution<int> byte(-127, 127), weight(0, 32767);
  std::vector<std::int8_t> v(pairs * pair_stride);
  std::vector<std::int16_t> w(kRows * w_stride);
  for (auto& x : v) x = static_cast<std::int8_t>(byte(gen));
  for (auto& x : w) x = static_cast<std::int16_t>(weight(gen));
  for (size_t t = 0; t < 2 * pairs; ++t) {      // column 1 all -127 against row 0 all 32767,
    v[t / 2 * pair_stride + 2 + t % 2] = -127;  // column 0 all 127 (beyond 2^24 at 32 pairs the
    v[t / 2 * pair_stride + t % 2] = 127;       // floats compare the integers to within 16)
    w[t] = 32767;
  }
  auto out = hwy::AllocateAligned<float>(kRows * cols);
  // Far requests (from pair pairs / 2 on; requests never fault), near ones and paced lines of
  // another run: no result changes.
  const simd::Prefetch far{static_cast<std::ptrdiff_t>(v.size()), simd::CacheLevel::kL2,
                           static_cast<std::int32_t>(pair_stride)};
  alignas(64) static std::int8_t key_lines[64 * 4096];
  detail::PacedLines keys(key_lines, sizeof key_lines, far);
  PairDotTile<POps, kRows>(w.data(), w_stride, v.data(), pair_stride, pairs, cols, out.get(), cols,
                           detail::PairRequests{far, pairs / 2, keys});
  // One line of `keys` per pass over a pair in all (taken a request group of pairs at a time),
  // carried across the column passes.
  constexpr size_t kPass = (POps::kLanes >= 16 ? 4 : 2) * POps::kLanes;
  EXPECT_EQ(keys.taken_bytes(), 64 * pairs * (cols / kPass + cols % kPass / POps::kLanes));
  for (size_t r = 0; r < kRows; ++r) {
    for (size_t c = 0; c < cols; ++c) {
      std::int64_t sum = 0;
      for (size_t t = 0; t < 2 * pairs; ++t)
        sum += w[r * w_stride + t] * v[t / 2 * pair_stride + 2 * c + t % 2];
      ASSERT_EQ(out[r * cols + c], static_cast<float>(sum))
          << "rows " << kRows << " pairs " << pairs << " cols " << cols << " at " << r << ", " << c;
    }
  }
}

template <class QOps>
void CheckQuadTiles(std::mt19937& gen) {
  for (const size_t quads : {1, 3, 5, 32, 33}) {
    CheckQuadTile<QOps, 1, 1>(gen, quads);
    CheckQuadTile<QOps, 4, 2>(gen, quads);
    CheckQuadTile<QOps, 6, 2>(gen, quads);
    CheckQuadTile<QOps, 3, 4>(gen, quads);
    CheckQuadTile<QOps, 5, 1>(gen, quads);
    CheckQuadTile<QOps, 2, 5>(gen, quads);  // two-vector passes and a one-vector edge on AVX2
    constexpr size_t kTile = kBlock / QOps::kLanes;  // the worker's 64-key tile, every row count
    CheckQuadTile<QOps, 1, kTile>(gen, quads);       // (the passes: 4, 2 or 1 vectors)
    CheckQuadTile<QOps, 2, kTile>(gen, quads);
    CheckQuadTile<QOps, 3, kTile>(gen, quads);
    CheckQuadTile<QOps, 4, kTile>(gen, quads);
    CheckQuadTile<QOps, 5, kTile>(gen, quads);
    CheckQuadTile<QOps, 6, kTile>(gen, quads);
  }
}

// Each target's own family (Int8QuadOps, Int8PairOps): the pmaddwd pairs on every target but
// SCALAR, whose family is the int32 lanes. The int32 lanes were also tested on the other
// targets, where no kernel uses them: the release compile of this file took 48.8 s of a Zen 3
// core with them, 33.7 s without.
void TestQuadDotTileIsExact() {
  std::mt19937 gen(11);
  CheckQuadTiles<Int8QuadOps>(gen);
}

template <class POps>
void CheckPairTiles(std::mt19937& gen) {
  const size_t lanes = POps::kLanes;
  for (const size_t pairs : {1, 4, 32, 33}) {  // 33: a partial request group after a full one
    for (const size_t vecs : {1, 3, 5, 9}) {   // odd widths take the one-vector edge pass
      CheckPairTile<POps, 1>(gen, pairs, vecs * lanes);
      CheckPairTile<POps, 2>(gen, pairs, vecs * lanes);
      CheckPairTile<POps, 3>(gen, pairs, vecs * lanes);
      CheckPairTile<POps, 4>(gen, pairs, vecs * lanes);
      CheckPairTile<POps, 5>(gen, pairs, vecs * lanes);
      CheckPairTile<POps, 6>(gen, pairs, vecs * lanes);
    }
  }
}

void TestPairDotTileIsExact() {
  std::mt19937 gen(12);
  CheckPairTiles<Int8PairOps>(gen);
}

void TestWeightsRoundToNearestEven() {
  const size_t lanes = PairOps::kLanes;
  const float cases[][2] = {{0.5f, 0},   {1.5f, 2},         {2.5f, 2},
                            {3.49f, 3},  {32767.0f, 32767}, {0.0f, 0},
                            {1e-30f, 0}, {16383.5f, 16384}, {32766.5f, 32766}};
  auto w = hwy::AllocateAligned<float>(lanes);
  std::vector<std::int16_t> out(lanes);
  for (const auto& c : cases) {
    for (size_t i = 0; i < lanes; ++i) w[i] = c[0];
    PairOps::QuantizeWeights(w.get(), 1.0f, out.data());
    for (size_t i = 0; i < lanes; ++i) ASSERT_EQ(out[i], static_cast<std::int16_t>(c[1])) << c[0];
  }
}

}  // namespace seqattn::int8_test::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seqattn::int8_test {
HWY_BEFORE_TEST(Int8KernelTest);
HWY_EXPORT_AND_TEST_P(Int8KernelTest, TestQuadDotTileIsExact);
HWY_EXPORT_AND_TEST_P(Int8KernelTest, TestPairDotTileIsExact);
HWY_EXPORT_AND_TEST_P(Int8KernelTest, TestWeightsRoundToNearestEven);
}  // namespace seqattn::int8_test
#endif  // HWY_ONCE
