#include "src/mpi/collective_check.hpp"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "seqattn/error.hpp"
#include "src/mpi/kv_pack.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::mpi {
namespace {

constexpr std::size_t kMessageBytes = 480;

struct Outcome {
  std::int32_t failed = 0;
  std::array<char, kMessageBytes> message{};
};

[[noreturn]] void fail(const std::string& argument, const std::string& expected,
                       const std::string& actual) {
  throw Error(ErrorKind::kInvalidArgument, argument, expected, actual);
}

}  // namespace

int comm_rank(MPI_Comm comm) {
  int r = 0;
  MPI_Comm_rank(comm, &r);
  return r;
}

int comm_size(MPI_Comm comm) {
  int s = 0;
  MPI_Comm_size(comm, &s);
  return s;
}

void agree(MPI_Comm comm, const std::function<void()>& local_checks) {
  std::exception_ptr local;
  Outcome mine;
  try {
    local_checks();
  } catch (const std::exception& e) {
    local = std::current_exception();
    mine.failed = 1;
    std::strncpy(mine.message.data(), e.what(), kMessageBytes - 1);
  }
  std::vector<Outcome> all(static_cast<std::size_t>(comm_size(comm)));
  MPI_Allgather(&mine, sizeof(Outcome), MPI_BYTE, all.data(), sizeof(Outcome), MPI_BYTE, comm);
  if (local) std::rethrow_exception(local);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].failed) {
      throw Error(
          ErrorKind::kInvalidArgument, "rank " + std::to_string(r) + "'s arguments",
          "a valid call on every rank",
          std::string(all[r].message.data()) + " (raised on rank " + std::to_string(r) + ")",
          "every rank threw; fix the call on that rank");
    }
  }
}

void check_layout_fits(const ShardLayout& layout, int size, int root, const std::string& name) {
  if (layout.ranks != size)
    fail(name + ".ranks", std::to_string(size) + " (the communicator's size)",
         std::to_string(layout.ranks));
  if (root < 0 || root >= size)
    fail("root", "in [0, " + std::to_string(size) + ")", std::to_string(root));
}

void check_shard_of(const ConstTensor& shard, const ConstTensor& full, const ShardLayout& layout,
                    int rank, bool is_root, const std::string& shard_name,
                    const std::string& full_name) {
  detail::check_view(shard_name, shard.data, shard.shape, shard.strides, sizeof(float));
  const std::int64_t n = layout.shard_length(rank);
  if (shard.shape[2] != n)
    fail(shard_name + ".shape[2]", std::to_string(n) + " (this rank's shard length)",
         std::to_string(shard.shape[2]));
  std::int64_t longest = 0;  // the root sends and receives every rank's shard
  for (int r = 0; r < layout.ranks; ++r) longest = std::max(longest, layout.shard_length(r));
  message_count(elements(shard, longest));
  if (!is_root) return;
  detail::check_view(full_name, full.data, full.shape, full.strides, sizeof(float));
  const std::array<std::int64_t, 4> want{shard.shape[0], shard.shape[1], layout.seq,
                                         shard.shape[3]};
  if (full.shape != want)
    fail(full_name + ".shape", detail::shape_text(want), detail::shape_text(full.shape));
}

}  // namespace seqattn::mpi
