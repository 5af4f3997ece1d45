// The far requests for the first lines of an int8 value tile, taken a few at a time by the two
// passes between Q·Kᵀ and P·V (the softmax and the weights), which read no cache memory
// (DecodePrefetch::paced). Left to the products, a tile's requests came in two bursts with a
// gap between them in which the lines in flight drained: timing-only builds ran the int8 step
// 7% faster without the softmax, 0-2% without either product's arithmetic (docs/architecture.md,
// "Paced requests", has the figures).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

class EarlyValueRequests {
 public:
  // Lines a micro-tile's passes ask for per query row: 4 during the softmax and 8 during the
  // weights pass at AVX-512's 4 vectors of 16 keys a row. One Xeon thread, int8 at S_k 131072
  // (medians of 6-7, builds alternating): 2 to 3 lines a vector of the softmax or 3 a vector of
  // the weights brought the bursts back (24.4-26.4 ms against 23.3-24.0).
  static constexpr std::size_t kLinesPerRow = 12;
  static constexpr std::size_t kSoftmaxLines = 1;  // per vector of probabilities
  static constexpr std::size_t kWeightLines = 2;   // per vector of weights

  EarlyValueRequests() = default;  // none: P·V asks for every line
  // Up to rows · kLinesPerRow lines from v_tile (64-byte aligned), within the tile's `bytes`.
  EarlyValueRequests(const std::int8_t* v_tile, std::size_t bytes, simd::Prefetch far,
                     std::size_t pair_bytes, std::size_t rows)
      : begin_(v_tile),
        next_(v_tile),
        end_(v_tile + (rows * kLinesPerRow * 64 < bytes ? rows * kLinesPerRow * 64 : bytes)),
        pair_bytes_(pair_bytes),
        far_(far) {}

  // Asks for up to n more lines.
  __attribute__((always_inline)) void Take(std::size_t n) {
    for (; n > 0 && next_ < end_; --n, next_ += 64) far_.Line(next_);
  }

  // The first pair of keys whose lines P·V must still ask for: the pair holding the first byte
  // not asked for yet (its earlier lines, if any, were), so every line is asked for whatever
  // number of Takes ran.
  std::size_t far_from() const {
    return pair_bytes_ == 0 ? 0 : static_cast<std::size_t>(next_ - begin_) / pair_bytes_;
  }

 private:
  const std::int8_t* begin_ = nullptr;
  const std::int8_t* next_ = nullptr;
  const std::int8_t* end_ = nullptr;
  std::size_t pair_bytes_ = 0;
  simd::Prefetch far_;
};

}  // namespace seqattn::detail
