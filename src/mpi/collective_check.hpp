// Checks that every rank agrees on before anything is exchanged: a bad argument on one rank
// becomes an Error on every rank (naming the rank), never a hang in a later receive.
#pragma once
#include <mpi.h>

#include <functional>
#include <string>

#include "seqattn/mpi/ring.hpp"

namespace seqattn::mpi {

int comm_rank(MPI_Comm comm);
int comm_size(MPI_Comm comm);

// Runs `local_checks` on every rank, then shares the outcome (one MPI_Allgather). If any
// rank's checks threw, every rank throws: that rank its own Error, the others an Error naming
// the failing rank and carrying the start of its message.
void agree(MPI_Comm comm, const std::function<void()>& local_checks);

// The layout is for `size` ranks and `root` is one of them.
void check_layout_fits(const ShardLayout& layout, int size, int root, const std::string& name);
// `shard` [B, H, n_rank, D] matches the layout and, on the root, `full` [B, H, S, D].
void check_shard_of(const ConstTensor& shard, const ConstTensor& full, const ShardLayout& layout,
                    int rank, bool is_root, const std::string& shard_name,
                    const std::string& full_name);

}  // namespace seqattn::mpi
