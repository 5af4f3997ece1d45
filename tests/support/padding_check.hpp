// Padding past a batch's key length is never read into a result: the flash kernel's packing
// (fp32 and tile products) puts zeros there, since a tile's product still multiplies the exact
// zero weights of keys no row sees (0 · NaN is NaN). Shared by the per-target flash kernel
// cases (tests/dense/flash_kernel_cases.hpp) and the tile path's (tests/kernel/test_tile_path.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "seqattn/attention.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {

// attend() with `options` over B = 3 sequences of `seq` keys of `dim` (lengths seq / 2 + 3, 64
// and 1: inside a key tile, on a tile edge, one key), GQA: first with finite padding,
// then with the values past each length NaN and the keys +Inf. The two outs have the same bits
// and no NaN. Returns the second run's compute path.
inline std::string expect_padding_never_read(AttentionOptions options, std::int64_t seq = 70,
                                             std::int64_t dim = 16) {
  constexpr std::int64_t kB = 3, kHq = 4, kHkv = 2;
  const std::int64_t kS = seq, kD = dim;
  const std::vector<std::int64_t> lengths{seq / 2 + 3, 64, 1};
  options.mask.key_lengths = lengths;
  const OwnedTensor q = make_tensor(kB, kHq, kS, kD, Layout::kBHSD, 21);
  OwnedTensor k = make_tensor(kB, kHkv, kS, kD, Layout::kBHSD, 22);
  OwnedTensor v = make_tensor(kB, kHkv, kS, kD, Layout::kBHSD, 23);
  OwnedTensor clean = make_zeros(kB, kHq, kS, kD), padded = make_zeros(kB, kHq, kS, kD);
  attend(q.cview(), k.cview(), v.cview(), clean.view, options);
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t h = 0; h < kHkv; ++h) {
      for (std::int64_t j = lengths[static_cast<size_t>(b)]; j < kS; ++j) {
        for (std::int64_t d = 0; d < kD; ++d) {
          v.view.at(b, h, j, d) = std::numeric_limits<float>::quiet_NaN();
          k.view.at(b, h, j, d) = std::numeric_limits<float>::infinity();
        }
      }
    }
  }
  const RunRecord record = attend(q.cview(), k.cview(), v.cview(), padded.view, options);
  EXPECT_EQ(std::memcmp(clean.storage.data(), padded.storage.data(),
                        clean.storage.size() * sizeof(float)),
            0)
      << "padding past a key length reached the result";
  for (const float x : padded.storage) {
    if (std::isnan(x)) {
      ADD_FAILURE() << "NaN in the result";
      break;
    }
  }
  return std::string(record.compute_path);
}

}  // namespace seqattn::testing
