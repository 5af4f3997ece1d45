// The collective check of ring_attention: local argument checks on every rank, one exchange
// of each rank's shapes and options, and the same verdict computed everywhere.
#pragma once
#include <mpi.h>

#include "seqattn/mpi/ring.hpp"
#include "seqattn/plan.hpp"

namespace seqattn::mpi {

// What every rank agreed on.
struct Agreement {
  int rank = 0;
  std::int64_t batch = 0, heads_q = 0, heads_kv = 0, dim = 0, dim_v = 0;
  ShardLayout layout;
};

// The options each rank's kernel calls start from: key_lengths count keys of the whole
// sequence, so they are checked by the agreement, not by the single-shard validation.
AttentionOptions local_options(const AttentionOptions& options);

// Collective. Throws Error on every rank (nothing exchanged, nothing written) unless every
// rank's shard extents and options are valid and agree: the same B, H_q, H_kv, D, D_v,
// variant, window, causal flag, scale and key_lengths, and shard lengths that form
// shard_layout(S, P, default_sharding(options)).
Agreement agree_on_ring(MPI_Comm comm, const AttentionShape& shard,
                        const AttentionOptions& options);

// Collective. The views of one call (pointers, strides, overlap; against `planned` when
// given): an Error on every rank if any rank's are bad. Returns this rank's shard extents.
AttentionShape agree_on_views(MPI_Comm comm, const ConstTensor& q, const ConstTensor& k,
                              const ConstTensor& v, const Tensor& out,
                              const AttentionOptions& options, const AttentionShape* planned);

}  // namespace seqattn::mpi
