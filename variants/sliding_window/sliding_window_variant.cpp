// Sliding-window attention (Longformer): the flash kernel restricted to a band around the
// aligned diagonal plus global rows and columns; only tiles meeting the band or a global
// row/column are visited, so the work is O(S·(w + globals)·D).
#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/kernel/block_mask.hpp"
#include "src/kernel/flash_attention.hpp"
#include "src/kernel/softmax_attention_cost.hpp"
#include "src/runtime/validate.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

std::vector<std::int64_t> sorted_unique(std::vector<std::int64_t> positions) {
  std::sort(positions.begin(), positions.end());
  positions.erase(std::unique(positions.begin(), positions.end()), positions.end());
  return positions;
}

// The window's key structure: row i sees the band [i' - left, i' + right] (i' = i + S_k - S_q)
// clipped to [0, S_k); a global token is a query row that sees every key and a key column
// every row sees. The kernel's block mask is derived from these rows (KeyStructure's default):
// per query tile the band's edge tiles are partial, its middle full, global columns partial.
class KeyBand final : public KeyStructure {
 public:
  // `globals` sorted, unique and non-negative.
  KeyBand(const Problem& p, std::int64_t left, std::int64_t right,
          const std::vector<std::int64_t>& globals)
      : seq_k_(p.seq_k()), offset_(p.seq_k() - p.seq_q()) {
    // Wider than both sequences is the same as unbounded; clamping keeps i' ± w from overflowing.
    const std::int64_t widest = p.seq_q() + p.seq_k();
    left_ = std::min(left, widest);
    right_ = std::min(right, widest);
    global_query_.assign(static_cast<size_t>(p.seq_q()), 0);
    for (const std::int64_t g : globals) {
      if (g < p.seq_q()) global_query_[static_cast<size_t>(g)] = 1;
      if (g < p.seq_k()) columns_.push_back(g);
    }
  }

  KeyRange row_keys(std::int64_t i) const override {
    if (global_query_[static_cast<size_t>(i)] != 0) return {0, seq_k_};
    const std::int64_t pos = i + offset_;
    return {std::max<std::int64_t>(pos - left_, 0), std::min(pos + right_ + 1, seq_k_)};
  }
  const std::vector<std::int64_t>& columns() const override { return columns_; }
  std::int64_t local_width() const override { return left_ + right_ + 1; }
  bool fixed() const override { return true; }

 private:
  std::int64_t seq_k_, offset_, left_ = 0, right_ = 0;
  std::vector<std::uint8_t> global_query_;  // [S_q]
  std::vector<std::int64_t> columns_;       // global tokens < S_k
};

// Number of keys row i sees through the window's structure and the causal rule (key lengths
// and keep masks are data, not structure, and are not counted — as for dense).
double visible_keys(const Problem& p, const KeyBand& keys, std::int64_t i) {
  const std::int64_t pos = i + p.seq_k() - p.seq_q();
  const std::int64_t limit = p.mask.causal ? std::min(pos + 1, p.seq_k()) : p.seq_k();
  const KeyRange range = keys.row_keys(i);
  const std::int64_t lo = range.lo, hi = std::min(range.hi, limit);
  std::int64_t count = std::max<std::int64_t>(hi - lo, 0);
  for (const std::int64_t j : keys.columns()) {
    if (j < limit && (j < lo || j >= hi)) ++count;
  }
  return static_cast<double>(count);
}

class SlidingWindowVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kSlidingWindow; }

  void check(const Problem& p, const VariantSpec& spec) const override {
    const auto& w = std::get<SlidingWindowSpec>(spec);
    if (w.left < 0) fail("sliding_window.left", ">= 0", std::to_string(w.left));
    if (w.right < 0) fail("sliding_window.right", ">= 0", std::to_string(w.right));
    const std::int64_t bound = std::max(p.seq_q(), p.seq_k());
    for (size_t n = 0; n < w.global_tokens.size(); ++n) {
      const std::int64_t g = w.global_tokens[n];
      if (g < 0 || g >= bound) {
        fail("sliding_window.global_tokens[" + std::to_string(n) + "]",
             "a position in [0, max(S_q, S_k)) = [0, " + std::to_string(bound) + ")",
             std::to_string(g));
      }
    }
  }

  // FLOPs: 2·(D + D_v) per visible (query, key) pair, counted exactly: the band
  // [i' - left, i' + right] clipped to [0, S_k) (and to the causal limit when set), all keys
  // for global query rows, plus global key columns outside the band. Multiplied by B·H_q.
  Cost cost(const Problem& p, const VariantSpec& spec) const override {
    const KeyBand keys = keys_of(p, std::get<SlidingWindowSpec>(spec));
    double pairs = 0;
    for (std::int64_t i = 0; i < p.seq_q(); ++i) pairs += visible_keys(p, keys, i);
    pairs *= static_cast<double>(p.batch() * p.heads_q());
    return softmax_attention_cost(p, pairs);
  }

  bool cost_counts_key_lengths() const override { return false; }

  void run(const Problem& p, const VariantSpec& spec) const override {
    softmax_forward(p, keys_of(p, std::get<SlidingWindowSpec>(spec)));
  }

  // The band and the global-token tables depend on the shape only: a plan builds them once.
  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(keys_of(p, std::get<SlidingWindowSpec>(spec)));
  }

 private:
  static KeyBand keys_of(const Problem& p, const SlidingWindowSpec& w) {
    return KeyBand(p, w.left, w.right, sorted_unique(w.global_tokens));
  }

  class Prepared final : public PreparedVariant {
   public:
    explicit Prepared(KeyBand keys) : keys_(std::move(keys)) {}
    void run(const Problem& p) const override { softmax_forward(p, keys_); }
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      return softmax_workspace_bytes(planned, keys_);
    }
    std::optional<std::size_t> weights_workspace_bytes(const Problem& planned) const override {
      return softmax_weights_workspace_bytes(planned, keys_);
    }

   private:
    KeyBand keys_;
  };
};

}  // namespace

const AttentionVariant& sliding_window_variant() {
  static const SlidingWindowVariant instance;
  return instance;
}

}  // namespace seqattn::detail
