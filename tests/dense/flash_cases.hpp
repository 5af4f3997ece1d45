// One attention case for the dense / sliding-window kernel tests: builds the inputs, runs
// attend() and the double reference, and reports the errors of out and lse.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "seqattn/attention.hpp"
#include "tests/reference/reference.hpp"
#include "tests/support/test_tensors.hpp"

namespace seqattn::testing {

struct FlashCase {
  std::int64_t batch = 1, heads_q = 2, heads_kv = 2, seq_q = 17, seq_k = 17, dim = 16, dim_v = 16;
  Layout layout = Layout::kBHSD;
  std::int64_t pad = 0;
  bool causal = false;
  std::vector<std::int64_t> key_lengths;
  bool keep = false;  // random boolean mask, some rows fully hidden
  bool bias = false;  // random bias [1, H, S_q, S_k] with some -inf entries
  std::optional<SlidingWindowSpec> window;
  bool want_lse = true;
  bool want_weights = false;
  int threads = 1;
  std::uint32_t seed = 1;

  std::string describe() const {
    return "B=" + std::to_string(batch) + " Hq=" + std::to_string(heads_q) +
           " Hkv=" + std::to_string(heads_kv) + " Sq=" + std::to_string(seq_q) +
           " Sk=" + std::to_string(seq_k) + " D=" + std::to_string(dim) +
           " Dv=" + std::to_string(dim_v) + (layout == Layout::kBSHD ? " BSHD" : " BHSD") +
           " pad=" + std::to_string(pad) + (causal ? " causal" : "") + (keep ? " keep" : "") +
           (bias ? " bias" : "") + (key_lengths.empty() ? "" : " key_lengths") +
           (window
                ? " window=" + std::to_string(window->left) + "/" + std::to_string(window->right) +
                      " globals=" + std::to_string(window->global_tokens.size())
                : "");
  }
};

struct FlashOutcome {
  OwnedTensor out;
  std::vector<float> lse;
  std::vector<float> weights;
  reference::Result ref;
  RunRecord record;
  double out_error = 0;
  double lse_error = 0;       // max |lse - ref| / max(1, |ref|) over finite rows
  bool lse_inf_match = true;  // -inf exactly where the reference has -inf
  bool any_nan = false;
};

inline FlashOutcome run_flash_case(const FlashCase& c, bool with_reference = true) {
  FlashOutcome r;
  const OwnedTensor q = make_tensor(c.batch, c.heads_q, c.seq_q, c.dim, c.layout, c.seed, c.pad);
  const OwnedTensor k =
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim, c.layout, c.seed + 1, c.pad);
  const OwnedTensor v =
      make_tensor(c.batch, c.heads_kv, c.seq_k, c.dim_v, c.layout, c.seed + 2, c.pad);
  r.out = make_zeros(c.batch, c.heads_q, c.seq_q, c.dim_v, c.layout, c.pad);

  AttentionOptions options;
  options.threads = c.threads;
  options.mask.causal = c.causal;
  options.mask.key_lengths = c.key_lengths;
  std::vector<std::uint8_t> keep;
  const std::int64_t pairs = c.seq_q * c.seq_k;
  if (c.keep) {
    keep.resize(static_cast<size_t>(c.batch * c.heads_q * pairs));
    std::mt19937 gen(c.seed + 3);
    for (auto& x : keep) x = gen() % 10 < 7;
    // Row 1 of every (b, h) hides all its keys.
    for (std::int64_t bh = 0; bh < c.batch * c.heads_q && c.seq_q > 1; ++bh) {
      for (std::int64_t j = 0; j < c.seq_k; ++j)
        keep[static_cast<size_t>(bh * pairs + c.seq_k + j)] = 0;
    }
    options.mask.keep = bhsd<const std::uint8_t>(keep.data(), c.batch, c.heads_q, c.seq_q, c.seq_k);
  }
  std::vector<float> bias;
  if (c.bias) {
    bias.resize(static_cast<size_t>(c.heads_q * pairs));
    std::mt19937 gen(c.seed + 4);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (auto& x : bias) x = gen() % 13 == 0 ? -std::numeric_limits<float>::infinity() : dist(gen);
    options.mask.bias = bhsd<const float>(bias.data(), 1, c.heads_q, c.seq_q, c.seq_k);
  }
  if (c.window) options.variant = *c.window;
  r.lse.assign(static_cast<size_t>(c.batch * c.heads_q * c.seq_q), 0.0f);
  if (c.want_lse) options.lse = bhsd(r.lse.data(), c.batch, c.heads_q, c.seq_q, 1);
  if (c.want_weights) {
    r.weights.assign(static_cast<size_t>(c.batch * c.heads_q * pairs), -1.0f);
    options.weights = bhsd(r.weights.data(), c.batch, c.heads_q, c.seq_q, c.seq_k);
  }
  r.record = attend(q.cview(), k.cview(), v.cview(), r.out.view, options);
  for (float x : r.out.storage) r.any_nan = r.any_nan || std::isnan(x);
  if (!with_reference) return r;

  const double scale = 1.0 / std::sqrt(static_cast<double>(c.dim));
  r.ref = c.window ? reference::sliding_window(q.cview(), k.cview(), v.cview(), *c.window,
                                               options.mask, scale)
                   : reference::dense(q.cview(), k.cview(), v.cview(), options.mask, scale);
  r.out_error = reference::max_relative_error(r.out.view, r.ref);
  if (c.want_lse) {
    for (size_t n = 0; n < r.lse.size(); ++n) {
      const double ref = r.ref.lse[n];
      if (std::isinf(ref)) {
        r.lse_inf_match = r.lse_inf_match && std::isinf(r.lse[n]) && r.lse[n] < 0;
        continue;
      }
      r.lse_error = std::max(r.lse_error, std::abs(r.lse[n] - ref) / std::max(1.0, std::abs(ref)));
    }
  }
  return r;
}

}  // namespace seqattn::testing
