// Sequence-parallel attention over MPI (the seqattn::mpi library; the core stays MPI-free).
// Each process of a communicator keeps a shard of Q, K and V along the sequence; K/V shards
// travel around a ring of processes while every process attends its queries to the shard it
// holds and merges the partial results exactly through their log-sum-exps (Ring Attention,
// Liu et al. 2023). Causal attention uses zig-zag shards (rank r holds sequence chunks r and
// 2P-1-r of 2P) so that every rank does the same work; sliding window exchanges only the
// shards its band reaches.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "seqattn/attention.hpp"
#include "seqattn/options.hpp"
#include "seqattn/plan.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn::mpi {

enum class Sharding {
  kContiguous,  // rank r holds positions [start_r, start_r + n_r), ranks in order
  kZigZag,      // rank r holds chunk r then chunk 2P-1-r of 2P near-equal chunks
};

// Where each rank's shard lies in the sequence: one or two pieces {start, length}, in the
// order the shard stores them. Chunks differ in length by at most one (the first S mod k
// chunks are one longer).
struct ShardLayout {
  Sharding sharding = Sharding::kContiguous;
  std::int64_t seq = 0;
  int ranks = 1;
  struct Piece {
    std::int64_t start = 0;
    std::int64_t length = 0;
  };
  std::vector<std::vector<Piece>> pieces;  // [rank] → pieces
  std::int64_t shard_length(int rank) const;
};

// Throws Error for seq < 1 or ranks < 1, or a zig-zag layout with fewer than 2·ranks tokens.
ShardLayout shard_layout(std::int64_t seq, int ranks, Sharding sharding);

// The sharding ring_attention uses for these options: zig-zag for causal dense attention
// (balanced work), contiguous otherwise (sliding window needs neighbours to be neighbours).
Sharding default_sharding(const AttentionOptions& options);

// Where the time of one ring_attention call went, on this rank.
struct RingRecord {
  double seconds = 0;          // the whole call, the collective shape check included
  double compute_seconds = 0;  // inside the attention kernel and the merges
  double wait_seconds = 0;     // blocked in MPI_Wait: communication not hidden behind compute
  double flops = 0;            // this rank's kernel FLOPs (skipped blocks not counted)
  double bytes_sent = 0;       // K/V bytes this rank sent
  int steps = 0;               // shards attended to (the local one included)
  int threads = 1;             // kernel threads
  int plans_made = 0;          // block plans this call made (a RingPlan keeps them: later runs
                               // of the same plan make none)
};

// Exact attention over the whole sequence, from shards: out_shard [B, H_q, n_r, D_v] receives
// this rank's rows. q_shard [B, H_q, n_r, D], k_shard [B, H_kv, n_r, D], v_shard
// [B, H_kv, n_r, D_v], float32, any strides, laid out as shard_layout(S, P,
// default_sharding(options)) says (S = the sum of every rank's n_r). Collective: every rank of
// `comm` calls it with the same options (DenseSpec or SlidingWindowSpec without global tokens;
// mask.causal; key_lengths over the whole sequence; scale; threads). Shapes and options are
// compared across ranks before any exchange: a mismatch anywhere throws Error on every rank
// (naming the rank), and nothing is written. The merge order is fixed, so repeated runs give
// bit-identical results; the result equals single-process attend() within float rounding.
RingRecord ring_attention(MPI_Comm comm, const ConstTensor& q_shard, const ConstTensor& k_shard,
                          const ConstTensor& v_shard, const Tensor& out_shard,
                          const AttentionOptions& options = {});

namespace internal {
struct RingState;
}

// The plan form: the collective agreement on shapes and options is done once; run() checks
// only the views (with one small collective, so that a bad view on one rank still fails every
// rank instead of hanging the others). The agreement is immutable; the attention plan of each
// block shape is made on the first run that meets it and kept (behind a mutex) for the plan's
// life, so the first run is the slower one and RingRecord::plans_made is 0 from the second.
// Every rank of the communicator runs it together. The communicator must outlive the plan.
class RingPlan {
 public:
  RingRecord run(const ConstTensor& q_shard, const ConstTensor& k_shard, const ConstTensor& v_shard,
                 const Tensor& out_shard) const;
  const ShardLayout& layout() const;

 private:
  friend RingPlan make_ring_plan(MPI_Comm, const AttentionShape&, const AttentionOptions&);
  explicit RingPlan(std::shared_ptr<const internal::RingState> state);
  std::shared_ptr<const internal::RingState> state_;
};

// Collective: `shard` is this rank's extents (seq_q = seq_k = n_r); the checks and errors are
// ring_attention's.
RingPlan make_ring_plan(MPI_Comm comm, const AttentionShape& shard,
                        const AttentionOptions& options = {});

// For users and tests: the root scatters a whole-sequence tensor [B, H, S, D] (`full`, read on
// the root only) into every rank's `shard` [B, H, n_r, D]; unshard gathers them back into
// `full` on the root. Collective; `full` is ignored on other ranks.
void shard(MPI_Comm comm, int root, const ConstTensor& full, const Tensor& shard,
           const ShardLayout& layout);
void unshard(MPI_Comm comm, int root, const ConstTensor& shard, const Tensor& full,
             const ShardLayout& layout);

}  // namespace seqattn::mpi
