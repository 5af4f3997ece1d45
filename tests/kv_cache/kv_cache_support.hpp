// A sequence of random Q/K/V for cache tests: the whole sequence is kept so that the double
// reference can run over it, and any suffix of queries can be compared with a cache run.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {

// fn() must throw an Error of `kind` whose message names `argument` and what was expected.
template <class Fn>
void expect_error(const Fn& fn, const std::string& argument, ErrorKind kind) {
  try {
    fn();
    ADD_FAILURE() << "no error for " << argument;
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    EXPECT_NE(std::string(e.what()).find(argument), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("expected"), std::string::npos) << e.what();
  }
}

struct CacheSequence {
  std::int64_t batch, heads_q, heads_kv, length, dim, dim_v;
  OwnedTensor q, k, v;  // [B, H, length, *]

  CacheSequence(std::int64_t b, std::int64_t hq, std::int64_t hkv, std::int64_t len, std::int64_t d,
                std::int64_t dv, std::uint32_t seed)
      : batch(b),
        heads_q(hq),
        heads_kv(hkv),
        length(len),
        dim(d),
        dim_v(dv),
        q(make_tensor(b, hq, len, d, Layout::kBSHD, seed, 3, -2.0f, 2.0f)),
        k(make_tensor(b, hkv, len, d, Layout::kBHSD, seed + 1, 0, -2.0f, 2.0f)),
        v(make_tensor(b, hkv, len, dv, Layout::kBHSD, seed + 2)) {}

  // Rows [first, first + n) of sequence b of a tensor, as a [1, H, n, *] view.
  static ConstTensor rows(const OwnedTensor& t, std::int64_t b, std::int64_t first,
                          std::int64_t n) {
    ConstTensor view = t.view;
    view.data = t.view.ptr(b, 0, first);
    view.shape = {1, t.view.shape[1], n, t.view.shape[3]};
    return view;
  }

  // Appends tokens [from, to) of sequence b to the cache.
  void append(KvCache& cache, std::int64_t b, std::int64_t from, std::int64_t to) const {
    cache.append(b, rows(k, b, from, to - from), rows(v, b, from, to - from));
  }

  // The double reference for the last seq_q positions of sequence b's first len tokens, as a
  // cache run with len tokens must produce them. Without global tokens the reference's own
  // end alignment (S_q < S_k) gives exactly those rows; global query tokens index the raw
  // query row there, so with globals it runs over the whole prefix (row = position).
  struct Reference {
    reference::Result result;
    std::int64_t first_row;  // reference row of the first new query
  };
  Reference reference(std::int64_t b, std::int64_t len, std::int64_t seq_q, const VariantSpec& spec,
                      bool causal, const reference::Positional& positional = {}) const {
    Mask mask;
    mask.causal = causal;
    const double scale = 1.0 / std::sqrt(static_cast<double>(dim));
    const auto* w = std::get_if<SlidingWindowSpec>(&spec);
    const std::int64_t first = w != nullptr && !w->global_tokens.empty() ? 0 : len - seq_q;
    const ConstTensor qb = rows(q, b, first, len - first);
    const ConstTensor kb = rows(k, b, 0, len), vb = rows(v, b, 0, len);
    if (w != nullptr) {
      return {reference::sliding_window(qb, kb, vb, *w, mask, scale, positional),
              len - seq_q - first};
    }
    return {reference::dense(qb, kb, vb, mask, scale, {}, positional), len - seq_q - first};
  }
};

// max |out - ref| / max |ref| over the rows of sequence b, out row i being reference row
// first_row + i.
inline double suffix_error(const Tensor& out, std::int64_t b,
                           const CacheSequence::Reference& reference) {
  const reference::Result& ref = reference.result;
  const std::int64_t seq_q = out.shape[2];
  double err = 0, scale = 1e-30;
  for (std::int64_t h = 0; h < out.shape[1]; ++h) {
    for (std::int64_t i = 0; i < seq_q; ++i) {
      for (std::int64_t d = 0; d < out.shape[3]; ++d) {
        const double want = ref.out_at(0, h, reference.first_row + i, d);
        err = std::max(err, std::abs(static_cast<double>(out.at(b, h, i, d)) - want));
        scale = std::max(scale, std::abs(want));
      }
    }
  }
  return err / scale;
}

}  // namespace seqattn::testing
