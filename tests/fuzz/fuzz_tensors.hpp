// Tensors for the structured fuzzer: a view with fuzzer-chosen extents and strides over a
// buffer that holds exactly the elements the view can reach, so that AddressSanitizer reports
// any access outside it. Unreached elements hold a sentinel, which lets the fuzzer check that
// an output view's gaps and a refused call's outputs stay untouched.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <variant>
#include <vector>

#include "seqattn/tensor.hpp"

namespace seqattn::fuzz {

// A buffer is capped so that a fuzzer-chosen shape never allocates much; a view that would
// need more gets a small buffer, and the library must refuse it before reading past it.
constexpr std::int64_t kMaxElements = 1 << 22;  // far above any small case (B, H <= 9, S <= 64)

// An extent from the fuzzer: usually small, sometimes one of the values that break size
// arithmetic (zero, negative, products that overflow 64 bits). Never a large extent that
// could be valid: the library cannot know a buffer's size, so a view it accepts must fit.
inline std::int64_t fuzz_extent(FuzzedDataProvider& fdp, std::int64_t small_max) {
  if (fdp.ConsumeIntegralInRange<int>(0, 31) != 0) {
    return fdp.ConsumeIntegralInRange<std::int64_t>(1, small_max);
  }
  constexpr std::int64_t kWild[] = {0,
                                    -1,
                                    -7,
                                    std::numeric_limits<std::int64_t>::max(),
                                    std::numeric_limits<std::int64_t>::min(),
                                    std::int64_t{1} << 62,
                                    (std::int64_t{1} << 61) + 3,
                                    std::numeric_limits<std::int64_t>::max() / 2};
  return kWild[fdp.ConsumeIntegralInRange<int>(0, 7)];
}

// The lowest and highest element offsets a view reaches, or nullopt when the arithmetic
// overflows or the view needs more than kMaxElements.
inline std::optional<std::array<std::int64_t, 2>> reach(
    const std::array<std::int64_t, 4>& shape, const std::array<std::int64_t, 4>& strides) {
  std::int64_t lo = 0, hi = 0;
  for (int a = 0; a < 4; ++a) {
    if (shape[a] <= 0)
      return shape[a] == 0 ? std::optional(std::array<std::int64_t, 2>{0, -1}) : std::nullopt;
  }
  for (int a = 0; a < 4; ++a) {
    std::int64_t step = 0;
    if (__builtin_mul_overflow(shape[a] - 1, strides[a], &step)) return std::nullopt;
    if (__builtin_add_overflow(step < 0 ? lo : hi, step, step < 0 ? &lo : &hi)) return std::nullopt;
  }
  std::int64_t span = 0;
  if (__builtin_sub_overflow(hi, lo, &span) || span >= kMaxElements) return std::nullopt;
  return std::array<std::int64_t, 2>{lo, hi};
}

template <class T>
constexpr T sentinel() {
  return T(1234.5f);
}

template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
struct FuzzTensor {
  std::vector<T> storage;
  TensorView<T> view;
  bool fits = false;         // the view lies inside storage
  bool any_special = false;  // a NaN or infinity among the reachable elements

  bool all_sentinel() const {
    for (const T& x : storage) {
      if (!same_bits(x, sentinel<T>())) return false;
    }
    return true;
  }
};

// Strides for `shape` in a fuzzer-chosen arrangement: BHSD or BSHD order, an innermost step of
// 1-3, padded rows, sometimes a broadcast (stride 0) or a negative axis.
inline std::array<std::int64_t, 4> fuzz_strides(FuzzedDataProvider& fdp,
                                                const std::array<std::int64_t, 4>& shape,
                                                bool allow_broadcast) {
  const auto clamp = [](std::int64_t n) {
    return std::max<std::int64_t>(1, std::min<std::int64_t>(n, 64));
  };
  const std::int64_t step = fdp.ConsumeIntegralInRange<std::int64_t>(1, 3);
  const std::int64_t row = clamp(shape[3]) * step + fdp.ConsumeIntegralInRange<std::int64_t>(0, 2);
  std::array<std::int64_t, 4> s{};
  s[3] = step;
  if (fdp.ConsumeBool()) {  // BHSD
    s[2] = row;
    s[1] = row * clamp(shape[2]);
    s[0] = s[1] * clamp(shape[1]);
  } else {  // BSHD
    s[1] = row;
    s[2] = row * clamp(shape[1]);
    s[0] = s[2] * clamp(shape[2]);
  }
  switch (fdp.ConsumeIntegralInRange<int>(0, 15)) {
    case 0:
      if (allow_broadcast) s[0] = 0;
      break;
    case 1:
      if (allow_broadcast) s[1] = 0;
      break;
    case 2:
      s[2] = -s[2];
      break;
    case 3:
      s[3] = 0;
      break;
    default:
      break;
  }
  return s;
}

// A tensor over an exact buffer. Inputs get values in [-range, range] from `seed` and, when
// `special` is set, one NaN or infinity; outputs are all sentinel.
template <class T>
FuzzTensor<T> make_fuzz_tensor(const std::array<std::int64_t, 4>& shape,
                               const std::array<std::int64_t, 4>& strides, bool input,
                               std::uint32_t seed, float range, int special) {
  FuzzTensor<T> t;
  const auto bounds = reach(shape, strides);
  const std::int64_t lo = bounds ? (*bounds)[0] : 0;
  const std::int64_t count = bounds ? (*bounds)[1] - lo + 1 : 16;
  t.storage.assign(static_cast<std::size_t>(std::max<std::int64_t>(count, 1)), sentinel<T>());
  t.fits = bounds.has_value();
  t.view = {t.storage.data() - lo, shape, strides};
  if (!input || !t.fits || count <= 0) return t;
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  for (T& x : t.storage) x = T(dist(gen));
  if (special != 0) {
    const float values[] = {std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
    t.storage[static_cast<std::size_t>(seed % count)] = T(values[special % 3]);
    t.any_special = true;
  }
  return t;
}

// A float copy of a view's elements in BHSD order, for the double reference.
template <class T>
std::vector<float> widened(const TensorView<T>& v) {
  std::vector<float> out;
  for (std::int64_t b = 0; b < v.shape[0]; ++b)
    for (std::int64_t h = 0; h < v.shape[1]; ++h)
      for (std::int64_t s = 0; s < v.shape[2]; ++s)
        for (std::int64_t d = 0; d < v.shape[3]; ++d)
          out.push_back(static_cast<float>(v.at(b, h, s, d)));
  return out;
}

inline ConstTensor bhsd_view(const std::vector<float>& data, const std::array<std::int64_t, 4>& s) {
  return {data.data(), s, {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1}};
}

// True when every element of `storage` that `view` does not reach still holds the sentinel.
template <class T>
bool gaps_untouched(const std::vector<T>& storage, const TensorView<T>& view) {
  std::vector<bool> reached(storage.size(), false);
  for (std::int64_t b = 0; b < view.shape[0]; ++b)
    for (std::int64_t h = 0; h < view.shape[1]; ++h)
      for (std::int64_t s = 0; s < view.shape[2]; ++s)
        for (std::int64_t d = 0; d < view.shape[3]; ++d) {
          reached[static_cast<std::size_t>(view.ptr(b, h, s, d) - storage.data())] = true;
        }
  for (std::size_t i = 0; i < storage.size(); ++i) {
    if (!reached[i] && !same_bits(storage[i], sentinel<T>())) return false;
  }
  return true;
}

// A FuzzTensor of any element type.
class Operand {
 public:
  Operand(DType dtype, const std::array<std::int64_t, 4>& shape,
          const std::array<std::int64_t, 4>& strides, bool input, std::uint32_t seed, float range,
          int special) {
    switch (dtype) {
      case DType::kBF16:
        t_ = make_fuzz_tensor<bfloat16>(shape, strides, input, seed, range, special);
        break;
      case DType::kF16:
        t_ = make_fuzz_tensor<float16>(shape, strides, input, seed, range, special);
        break;
      default:
        t_ = make_fuzz_tensor<float>(shape, strides, input, seed, range, special);
        break;
    }
  }
  AnyTensor view() const {
    return std::visit([](const auto& t) { return AnyTensor(t.view); }, t_);
  }
  AnyConstTensor cview() const { return view(); }
  const std::array<std::int64_t, 4>& shape() const { return view_shape(); }
  bool fits() const {
    return std::visit([](const auto& t) { return t.fits; }, t_);
  }
  bool any_special() const {
    return std::visit([](const auto& t) { return t.any_special; }, t_);
  }
  bool all_sentinel() const {
    return std::visit([](const auto& t) { return t.all_sentinel(); }, t_);
  }
  bool gaps_untouched() const {
    return std::visit([](const auto& t) { return fuzz::gaps_untouched(t.storage, t.view); }, t_);
  }
  std::vector<float> widened() const {
    return std::visit([](const auto& t) { return fuzz::widened(t.view); }, t_);
  }
  DType dtype() const { return view().dtype; }

 private:
  const std::array<std::int64_t, 4>& view_shape() const {
    return std::visit(
        [](const auto& t) -> const std::array<std::int64_t, 4>& { return t.view.shape; }, t_);
  }
  std::variant<FuzzTensor<float>, FuzzTensor<bfloat16>, FuzzTensor<float16>> t_;
};

}  // namespace seqattn::fuzz
