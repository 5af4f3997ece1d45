// Copies between strided [B, H, S, D] views and the contiguous [B][H][rows][D] buffers MPI
// sends, and blocking float transfers for the shard/unshard helpers.
#pragma once
#include <mpi.h>

#include <cstdint>
#include <vector>

#include "seqattn/mpi/ring.hpp"
#include "seqattn/tensor.hpp"

namespace seqattn::mpi {

// Elements of a [B, H, rows, D] block shaped like `v`.
std::int64_t elements(const ConstTensor& v, std::int64_t rows);

// Rows [r0, r1) of every (b, h) of `v`, contiguous, into dst.
void pack_rows(const ConstTensor& v, std::int64_t r0, std::int64_t r1, float* dst);
// dst's every row from a contiguous [B][H][S][D] src.
void unpack_rows(const float* src, const Tensor& dst);
// The rows of `pieces` (concatenated, in order) of every (b, h) of `full`, into dst; and back.
void pack_pieces(const ConstTensor& full, const std::vector<ShardLayout::Piece>& pieces,
                 float* dst);
void unpack_pieces(const float* src, const std::vector<ShardLayout::Piece>& pieces,
                   const Tensor& full);

// A float count as MPI's int count; throws Error when a message would exceed it.
int message_count(std::int64_t floats);
void send_floats(MPI_Comm comm, int to, const std::vector<float>& data);
void recv_floats(MPI_Comm comm, int from, std::vector<float>& data);

}  // namespace seqattn::mpi
