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

#include <algorithm>
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

// A micro-kernel's far requests in address order, spread over its column passes in proportion
// to the rows they have read: `visits` rows in all (passes × rows), `bytes` of rows from `begin`.
// AVX2's passes read a tile's rows a few lines apart (Q·Kᵀ's pass p line p of every quad row,
// P·V's every fourth line); asked for in that order, the next blocks' lines came from DRAM as
// strided requests. A stand-alone stream of the same reads (Zen 3, 2 × 32 MiB, FMA work
// between lines as the int8 kernel's) ran 8.2-9.2 ns a line with requests in the passes'
// order and 7.0 in address order, as fast as reading in order (docs/architecture.md, "Far
// requests in address order").
class OrderedFarLines {
 public:
  OrderedFarLines(const std::int8_t* begin, std::size_t bytes, simd::Prefetch far,
                  std::size_t visits)
      : begin_(begin),
        end_(far ? (bytes + 63) / 64 * 64 : 0),
        step_(visits == 0 ? end_ : (end_ + visits - 1) / visits),
        far_(far) {}

  // `rows` more rows were read: asks for the lines due by now (a line as soon as a byte of it
  // is; the last row read has asked for them all).
  __attribute__((always_inline)) void Visit(std::size_t rows) {
    due_ = std::min(due_ + rows * step_, end_);
    for (; asked_ < due_; asked_ += 64) far_.Line(begin_ + asked_);
  }

  // Bytes from the start whose lines were asked for (whole lines).
  std::size_t asked_bytes() const { return asked_; }

 private:
  const std::int8_t* begin_;
  std::size_t end_, step_;  // bytes: the run's whole lines, and those due per row read
  std::size_t due_ = 0, asked_ = 0;
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
