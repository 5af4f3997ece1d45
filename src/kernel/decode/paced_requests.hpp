// The int8 decode tile's far requests spread over its four passes (DecodePrefetch::paced).
// Left to the products (Q·Kᵀ asking for the next blocks' keys, P·V for their values), a tile's
// requests came in bursts: Q·Kᵀ, the shortest product, issued half of them, and the softmax and
// the weights pass between the products, which read no cache memory, none, so the lines in
// flight drained there. Timing-only builds ran the int8 step 7% faster without the softmax, 0-2%
// without either product's arithmetic. So Q·Kᵀ asks for the first half of its quad rows' far
// lines, the softmax and the weights pass for the first value lines, and P·V for the other
// value lines and, one per pass over a pair in all, the rest of the keys' (docs/architecture.md,
// "Paced requests", has the figures).
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/simd/prefetch.hpp"

namespace seqattn::detail {

// How many far requests each pass takes, as measured on one Xeon (docs/architecture.md, "Paced
// requests"): 2 to 3 lines a vector of the softmax or 3 a vector of the weights brought the
// bursts back; Q·Kᵀ keeping 16 or 24 of its 32 quad rows measured alike.
struct Pacing {
  static constexpr std::size_t kValueLinesPerRow = 12;  // per query row of a micro-tile
  static constexpr std::size_t kSoftmaxLines = 1;       // per vector of probabilities
  static constexpr std::size_t kWeightLines = 2;        // per vector of weights
  static constexpr std::size_t kKeyLinesPerPair = 1;    // per pass of P·V over a pair, in all
  // The quad rows of a key tile whose far lines Q·Kᵀ asks for (the first half).
  static constexpr std::size_t KeyQuadsInScores(std::size_t quads) { return quads / 2; }
};

// A run of lines whose far requests (`far`: the same lines of a block further on) passes take a
// few at a time; what none took is asked for by TakeAll. `begin` is 64-byte aligned (a cache
// block's tile), so taken_bytes() is a whole number of lines until the run's end.
class PacedLines {
 public:
  PacedLines() = default;  // nothing to take
  PacedLines(const std::int8_t* begin, std::size_t bytes, simd::Prefetch far)
      : begin_(begin), bytes_(bytes), far_(far) {}

  // Asks for up to n more lines.
  __attribute__((always_inline)) void Take(std::size_t n) {
    for (; n > 0 && taken_ < bytes_; --n, taken_ += 64) far_.Line(begin_ + taken_);
    if (taken_ > bytes_) taken_ = bytes_;  // a partial last line
  }
  __attribute__((always_inline)) void TakeAll() { Take(static_cast<std::size_t>(-1)); }

  // Bytes from the start whose lines were asked for.
  std::size_t taken_bytes() const { return taken_; }

 private:
  const std::int8_t* begin_ = nullptr;
  std::size_t bytes_ = 0, taken_ = 0;
  simd::Prefetch far_;
};

// What a P·V micro-kernel asks for as it reads a value tile: `values`' far lines from pair
// values_from on (the earlier ones were asked for by the passes before it) and its near lines
// for every pair; and, per pass over a pair, Pacing::kKeyLinesPerPair of `keys` in all (empty:
// none; the portable kernels take a request group's at once, int8_products-inl.h).
struct PairRequests {
  simd::Prefetch values;
  std::size_t values_from;
  PacedLines& keys;
};

}  // namespace seqattn::detail
