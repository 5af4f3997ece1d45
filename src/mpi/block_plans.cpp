#include "src/mpi/block_plans.hpp"

#include <cassert>
#include <utility>
#include <variant>

namespace seqattn::mpi {

BlockPlans::BlockPlans(const AttentionShape& shard, const AttentionOptions& options)
    : extents_(shard) {
  options_.scale = options.scale;
  options_.threads = options.threads;
  // Rounding the inputs to bf16 is idempotent: per block it is the same as over the whole.
  options_.fp32_precision = options.fp32_precision;
}

const AttentionPlan& BlockPlans::get(std::int64_t rows, std::int64_t keys,
                                     const VariantSpec& variant, bool causal) {
  Key key{rows, keys, false, 0, 0, causal};
  // The schedules attend with DenseSpec or a band window (the agreement refused global tokens).
  if (const auto* w = std::get_if<SlidingWindowSpec>(&variant)) {
    assert(w->global_tokens.empty());
    key.window = true;
    key.left = w->left;
    key.right = w->right;
  } else {
    assert(std::holds_alternative<DenseSpec>(variant));
  }
  std::lock_guard lock(mutex_);
  if (auto found = plans_.find(key); found != plans_.end()) return found->second;
  AttentionShape shape = extents_;
  shape.seq_q = rows;
  shape.seq_k = keys;
  AttentionOptions o = options_;
  o.variant = variant;
  o.mask.causal = causal;
  return plans_.emplace(key, make_plan(shape, o)).first->second;
}

std::size_t BlockPlans::size() const {
  std::lock_guard lock(mutex_);
  return plans_.size();
}

}  // namespace seqattn::mpi
