// The attention plans of a ring's kernel calls. A ring runs the same few block shapes at every
// step of every call (row chunks × key blocks, and per chunk a band window for sliding
// window), so each is planned once, on first use, and kept: the variant checks, the block
// structure and the kernel's geometry are not rebuilt per block. Key lengths and the
// log-sum-exp outputs change per block and go to AttentionPlan::run as run arguments.
#pragma once
#include <compare>
#include <cstdint>
#include <map>
#include <mutex>

#include "seqattn/options.hpp"
#include "seqattn/plan.hpp"

namespace seqattn::mpi {

class BlockPlans {
 public:
  // `shard`: this rank's extents (the plans take its batch, heads and dims); `options`: the
  // ring's (the plans take its scale, threads and fp32 precision).
  BlockPlans(const AttentionShape& shard, const AttentionOptions& options);
  BlockPlans(const BlockPlans&) = delete;
  BlockPlans& operator=(const BlockPlans&) = delete;

  // The plan for `rows` queries over `keys` keys under `variant` (DenseSpec or a
  // SlidingWindowSpec without global tokens) and the kernel's causal flag. Thread-safe; the
  // reference stays valid for the life of this object.
  const AttentionPlan& get(std::int64_t rows, std::int64_t keys, const VariantSpec& variant,
                           bool causal);

  std::size_t size() const;  // plans made so far

 private:
  struct Key {
    std::int64_t rows = 0, keys = 0;
    bool window = false;
    std::int64_t left = 0, right = 0;
    bool causal = false;
    auto operator<=>(const Key&) const = default;
  };
  AttentionShape extents_;  // the shard's: batch, heads and dims; seq_q and seq_k per plan
  AttentionOptions options_;
  mutable std::mutex mutex_;
  std::map<Key, AttentionPlan> plans_;
};

}  // namespace seqattn::mpi
