#include "src/mpi/kv_pack.hpp"

#include <climits>
#include <cstring>
#include <string>

#include "seqattn/error.hpp"

namespace seqattn::mpi {
namespace {

constexpr int kShardTag = 7101;  // shard/unshard messages (the ring uses its own tags)

// One row of D elements between a strided view row and a contiguous buffer.
void copy_row(const float* src, std::int64_t src_stride, float* dst, std::int64_t dst_stride,
              std::int64_t d) {
  if (src_stride == 1 && dst_stride == 1) {
    std::memcpy(dst, src, static_cast<std::size_t>(d) * sizeof(float));
    return;
  }
  for (std::int64_t i = 0; i < d; ++i) dst[i * dst_stride] = src[i * src_stride];
}

// Calls visit(row) for the first element of each row of `pieces` of every (b, h) of `view`, in
// the order the contiguous buffers store them.
template <class View, class Visit>
void for_each_row(const View& view, const std::vector<ShardLayout::Piece>& pieces, Visit visit) {
  for (std::int64_t b = 0; b < view.shape[0]; ++b)
    for (std::int64_t h = 0; h < view.shape[1]; ++h)
      for (const auto& p : pieces)
        for (std::int64_t s = p.start; s < p.start + p.length; ++s) visit(view.ptr(b, h, s));
}

}  // namespace

std::int64_t elements(const ConstTensor& v, std::int64_t rows) {
  return v.shape[0] * v.shape[1] * rows * v.shape[3];
}

void pack_rows(const ConstTensor& v, std::int64_t r0, std::int64_t r1, float* dst) {
  pack_pieces(v, {{r0, r1 - r0}}, dst);
}

void unpack_rows(const float* src, const Tensor& dst) {
  unpack_pieces(src, {{0, dst.shape[2]}}, dst);
}

void pack_pieces(const ConstTensor& full, const std::vector<ShardLayout::Piece>& pieces,
                 float* dst) {
  const std::int64_t d = full.shape[3];
  for_each_row(full, pieces, [&](const float* row) {
    copy_row(row, full.strides[3], dst, 1, d);
    dst += d;
  });
}

void unpack_pieces(const float* src, const std::vector<ShardLayout::Piece>& pieces,
                   const Tensor& full) {
  const std::int64_t d = full.shape[3];
  for_each_row(full, pieces, [&](float* row) {
    copy_row(src, 1, row, full.strides[3], d);
    src += d;
  });
}

int message_count(std::int64_t floats) {
  if (floats > INT_MAX) {
    throw Error(ErrorKind::kUnsupported, "shard size",
                "<= " + std::to_string(INT_MAX) + " floats per message", std::to_string(floats),
                "use more processes (smaller shards)");
  }
  return static_cast<int>(floats);
}

void send_floats(MPI_Comm comm, int to, const std::vector<float>& data) {
  MPI_Send(data.data(), message_count(static_cast<std::int64_t>(data.size())), MPI_FLOAT, to,
           kShardTag, comm);
}

void recv_floats(MPI_Comm comm, int from, std::vector<float>& data) {
  MPI_Recv(data.data(), message_count(static_cast<std::int64_t>(data.size())), MPI_FLOAT, from,
           kShardTag, comm, MPI_STATUS_IGNORE);
}

}  // namespace seqattn::mpi
