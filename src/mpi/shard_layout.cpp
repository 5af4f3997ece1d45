// Shard layouts and the root's scatter/gather of whole-sequence tensors.
#include <algorithm>
#include <string>

#include "seqattn/error.hpp"
#include "seqattn/mpi/ring.hpp"
#include "src/mpi/collective_check.hpp"
#include "src/mpi/kv_pack.hpp"

namespace seqattn::mpi {
namespace {

// Chunk c of `count` near-equal chunks of [0, seq): the first seq % count are one longer.
ShardLayout::Piece chunk(std::int64_t seq, std::int64_t count, std::int64_t c) {
  const std::int64_t base = seq / count, extra = seq % count;
  return {c * base + std::min(c, extra), base + (c < extra ? 1 : 0)};
}

// Collective: the layout fits the communicator and every rank's shard (and the root's whole
// tensor) fits the layout, or every rank throws.
void agree_on_scatter(MPI_Comm comm, int root, const ConstTensor& shard, const ConstTensor& full,
                      const ShardLayout& layout) {
  const int rank = comm_rank(comm);
  agree(comm, [&] {
    check_layout_fits(layout, comm_size(comm), root, "layout");
    check_shard_of(shard, full, layout, rank, rank == root, "shard", "full");
  });
}

}  // namespace

std::int64_t ShardLayout::shard_length(int rank) const {
  std::int64_t n = 0;
  for (const Piece& p : pieces.at(static_cast<std::size_t>(rank))) n += p.length;
  return n;
}

ShardLayout shard_layout(std::int64_t seq, int ranks, Sharding sharding) {
  if (ranks < 1) throw Error(ErrorKind::kInvalidArgument, "ranks", ">= 1", std::to_string(ranks));
  const std::int64_t chunks = sharding == Sharding::kZigZag ? 2 * std::int64_t{ranks} : ranks;
  if (seq < chunks) {
    throw Error(ErrorKind::kInvalidArgument, "seq",
                ">= " + std::to_string(chunks) + " (one token per " +
                    (sharding == Sharding::kZigZag ? "zig-zag chunk, 2 per rank)" : "rank)"),
                std::to_string(seq), "use fewer processes for so short a sequence");
  }
  ShardLayout l;
  l.sharding = sharding;
  l.seq = seq;
  l.ranks = ranks;
  l.pieces.resize(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) {
    auto& p = l.pieces[static_cast<std::size_t>(r)];
    p.push_back(chunk(seq, chunks, r));
    if (sharding == Sharding::kZigZag) p.push_back(chunk(seq, chunks, chunks - 1 - r));
  }
  return l;
}

Sharding default_sharding(const AttentionOptions& options) {
  const bool dense = std::holds_alternative<DenseSpec>(options.variant);
  return dense && options.mask.causal ? Sharding::kZigZag : Sharding::kContiguous;
}

void shard(MPI_Comm comm, int root, const ConstTensor& full, const Tensor& shard,
           const ShardLayout& layout) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  agree_on_scatter(comm, root, shard, full, layout);
  std::vector<float> buffer;
  if (rank == root) {
    for (int t = 0; t < size; ++t) {
      const auto& pieces = layout.pieces[static_cast<std::size_t>(t)];
      buffer.assign(static_cast<std::size_t>(elements(shard, layout.shard_length(t))), 0.0f);
      pack_pieces(full, pieces, buffer.data());
      if (t == rank) {
        unpack_rows(buffer.data(), shard);
      } else {
        send_floats(comm, t, buffer);
      }
    }
  } else {
    buffer.resize(static_cast<std::size_t>(elements(shard, shard.shape[2])));
    recv_floats(comm, root, buffer);
    unpack_rows(buffer.data(), shard);
  }
}

void unshard(MPI_Comm comm, int root, const ConstTensor& shard, const Tensor& full,
             const ShardLayout& layout) {
  const int rank = comm_rank(comm), size = comm_size(comm);
  agree_on_scatter(comm, root, shard, full, layout);
  std::vector<float> buffer(static_cast<std::size_t>(elements(shard, shard.shape[2])));
  if (rank != root) {
    pack_rows(shard, 0, shard.shape[2], buffer.data());
    send_floats(comm, root, buffer);
    return;
  }
  for (int t = 0; t < size; ++t) {
    const auto& pieces = layout.pieces[static_cast<std::size_t>(t)];
    buffer.assign(static_cast<std::size_t>(elements(shard, layout.shard_length(t))), 0.0f);
    if (t == rank) {
      pack_rows(shard, 0, shard.shape[2], buffer.data());
    } else {
      recv_floats(comm, t, buffer);
    }
    unpack_pieces(buffer.data(), pieces, full);
  }
}

}  // namespace seqattn::mpi
