// A read-bandwidth probe: the sum of a float array with the widest vectors Highway dispatches
// to, four independent accumulators so that the adds never limit the loads. The decode
// kernel is read-bound, and its benchmark and report measure it against this.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "src/simd/sum_floats.cc"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#include <cstdint>

#include "src/simd/sum_floats.hpp"

HWY_BEFORE_NAMESPACE();
namespace seqattn::detail::HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

float SumFloats(const float* HWY_RESTRICT data, std::int64_t count) {
  const hn::ScalableTag<float> df;
  const std::int64_t lanes = static_cast<std::int64_t>(hn::Lanes(df));
  auto a0 = hn::Zero(df), a1 = a0, a2 = a0, a3 = a0;
  std::int64_t i = 0;
  for (; i + 4 * lanes <= count; i += 4 * lanes) {
    a0 = hn::Add(a0, hn::LoadU(df, data + i));
    a1 = hn::Add(a1, hn::LoadU(df, data + i + lanes));
    a2 = hn::Add(a2, hn::LoadU(df, data + i + 2 * lanes));
    a3 = hn::Add(a3, hn::LoadU(df, data + i + 3 * lanes));
  }
  float total = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(a0, a1), hn::Add(a2, a3))));
  for (; i < count; ++i) total += data[i];
  return total;
}

}  // namespace seqattn::detail::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace seqattn::detail {

HWY_EXPORT(SumFloats);

float sum_floats(const float* data, std::int64_t count) {
  return HWY_DYNAMIC_DISPATCH(SumFloats)(data, count);
}

}  // namespace seqattn::detail
#endif  // HWY_ONCE
