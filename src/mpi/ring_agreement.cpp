#include "src/mpi/ring_agreement.hpp"

#include <bit>
#include <string>
#include <vector>

#include "seqattn/error.hpp"
#include "seqattn/plan.hpp"
#include "src/mpi/collective_check.hpp"
#include "src/mpi/kv_pack.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::mpi {
namespace {

// One rank's call, as the others compare it. Plain integers: sent as bytes.
struct Summary {
  std::int64_t batch, heads_q, heads_kv, seq, dim, dim_v;
  std::int64_t variant, causal, left, right, scale_given, scale_bits;
  std::int64_t key_lengths, key_lengths_hash;
};

// The fields every rank must agree on, with the argument each comes from (n, the shard
// length, may differ: it is checked against the layout instead).
struct Field {
  std::int64_t Summary::*member;
  const char* argument;
};
constexpr Field kAgreed[] = {{&Summary::batch, "q_shard.shape[0] (B)"},
                             {&Summary::heads_q, "q_shard.shape[1] (H_q)"},
                             {&Summary::heads_kv, "k_shard.shape[1] (H_kv)"},
                             {&Summary::dim, "q_shard.shape[3] (D)"},
                             {&Summary::dim_v, "v_shard.shape[3] (D_v)"},
                             {&Summary::variant, "options.variant"},
                             {&Summary::causal, "options.mask.causal"},
                             {&Summary::left, "sliding_window.left"},
                             {&Summary::right, "sliding_window.right"},
                             {&Summary::scale_given, "options.scale (given)"},
                             {&Summary::scale_bits, "options.scale"},
                             {&Summary::key_lengths, "options.mask.key_lengths.size()"},
                             {&Summary::key_lengths_hash, "options.mask.key_lengths"}};

// "[B, H_q, H_kv, n, D, D_v] = [...]" for messages.
std::string extents_text(const AttentionShape& s) {
  return "[B, H_q, H_kv, n, D, D_v] = [" + std::to_string(s.batch) + ", " +
         std::to_string(s.heads_q) + ", " + std::to_string(s.heads_kv) + ", " +
         std::to_string(s.seq_q) + ", " + std::to_string(s.dim) + ", " + std::to_string(s.dim_v) +
         "]";
}

[[noreturn]] void fail(ErrorKind kind, const std::string& argument, const std::string& expected,
                       const std::string& actual, const std::string& hint = {}) {
  throw Error(kind, argument, expected, actual, hint);
}

// The checks of the options and the shard's extents that need no other rank.
void check_locally(const AttentionShape& shard, const AttentionOptions& options) {
  const auto* w = std::get_if<SlidingWindowSpec>(&options.variant);
  if (!std::holds_alternative<DenseSpec>(options.variant) && w == nullptr)
    fail(ErrorKind::kUnsupported, "options.variant", "dense or sliding-window",
         std::string(to_string(variant_of(options.variant))));
  if (w != nullptr && !w->global_tokens.empty())
    fail(ErrorKind::kNotImplemented, "sliding_window.global_tokens",
         "none (global tokens over ring_attention are not built yet)",
         std::to_string(w->global_tokens.size()) + " tokens");
  if (options.mask.keep || options.mask.bias)
    fail(ErrorKind::kUnsupported, "options.mask.keep/bias",
         "unset (ring shards cannot address a whole-sequence mask)", "set",
         "use causal, key_lengths or a window");
  if (options.lse || options.weights)
    fail(ErrorKind::kUnsupported, "options.lse/weights", "unset", "set");
  if (options.rope || options.alibi)
    fail(ErrorKind::kNotImplemented, options.rope ? "options.rope" : "options.alibi",
         "unset (positional encodings over ring_attention are not built yet: a shard's rows "
         "would need their global positions)",
         "set");
  if (shard.seq_q != shard.seq_k)
    fail(ErrorKind::kInvalidArgument, "k_shard.shape[2]",
         std::to_string(shard.seq_q) + " (q_shard's: one shard of one sequence)",
         std::to_string(shard.seq_k));
  if (!options.mask.key_lengths.empty() &&
      static_cast<std::int64_t>(options.mask.key_lengths.size()) != shard.batch)
    fail(ErrorKind::kInvalidArgument, "options.mask.key_lengths.size()",
         std::to_string(shard.batch) + " (one per batch)",
         std::to_string(options.mask.key_lengths.size()));
  (void)make_plan(shard, local_options(options));  // every check of the shape and the variant
}

Summary summarise(const AttentionShape& shard, const AttentionOptions& o) {
  Summary s{};
  s.batch = shard.batch;
  s.heads_q = shard.heads_q;
  s.heads_kv = shard.heads_kv;
  s.seq = shard.seq_q;
  s.dim = shard.dim;
  s.dim_v = shard.dim_v;
  s.variant = static_cast<std::int64_t>(variant_of(o.variant));
  s.causal = o.mask.causal;
  if (const auto* w = std::get_if<SlidingWindowSpec>(&o.variant)) {
    s.left = w->left;
    s.right = w->right;
  }
  s.scale_given = o.scale.has_value();
  s.scale_bits = o.scale ? std::bit_cast<std::uint32_t>(*o.scale) : 0;
  s.key_lengths = static_cast<std::int64_t>(o.mask.key_lengths.size());
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the values
  for (std::int64_t x : o.mask.key_lengths)
    h = (h ^ static_cast<std::uint64_t>(x)) * 1099511628211ull;
  s.key_lengths_hash = static_cast<std::int64_t>(h);
  return s;
}

// The same verdict on every rank, from the same gathered summaries.
ShardLayout check_agreement(const std::vector<Summary>& all, const AttentionOptions& options) {
  std::int64_t seq = 0;
  for (std::size_t r = 0; r < all.size(); ++r) {
    seq += all[r].seq;
    for (const Field& f : kAgreed) {
      if (all[r].*f.member != all[0].*f.member)
        fail(ErrorKind::kInvalidArgument, "rank " + std::to_string(r) + ": " + f.argument,
             std::to_string(all[0].*f.member) + " (as on rank 0)", std::to_string(all[r].*f.member),
             "every rank passes the same shapes and options");
    }
  }
  const Sharding sharding = default_sharding(options);
  ShardLayout layout = shard_layout(seq, static_cast<int>(all.size()), sharding);
  for (std::size_t r = 0; r < all.size(); ++r) {
    const std::int64_t want = layout.shard_length(static_cast<int>(r));
    if (all[r].seq != want)
      fail(ErrorKind::kInvalidArgument, "rank " + std::to_string(r) + ": q_shard.shape[2] (n)",
           std::to_string(want) + " (S = " + std::to_string(seq) + " over " +
               std::to_string(all.size()) + " ranks, " +
               (sharding == Sharding::kZigZag ? "zig-zag" : "contiguous") + " shards)",
           std::to_string(all[r].seq), "shard with seqattn::mpi::shard_layout / shard()");
  }
  for (std::size_t b = 0; b < options.mask.key_lengths.size(); ++b) {
    const std::int64_t n = options.mask.key_lengths[b];
    if (n < 0 || n > seq)
      fail(ErrorKind::kInvalidArgument, "options.mask.key_lengths[" + std::to_string(b) + "]",
           "in [0, S = " + std::to_string(seq) + "] (the whole sequence)", std::to_string(n));
  }
  return layout;
}

}  // namespace

AttentionOptions local_options(const AttentionOptions& options) {
  AttentionOptions local = options;
  local.mask.key_lengths.clear();  // they count keys of the whole sequence (checked by agreement)
  return local;
}

Agreement agree_on_ring(MPI_Comm comm, const AttentionShape& shard,
                        const AttentionOptions& options) {
  agree(comm, [&] { check_locally(shard, options); });
  const Summary mine = summarise(shard, options);
  std::vector<Summary> all(static_cast<std::size_t>(comm_size(comm)));
  MPI_Allgather(&mine, sizeof(Summary), MPI_BYTE, all.data(), sizeof(Summary), MPI_BYTE, comm);
  Agreement a;
  a.rank = comm_rank(comm);
  a.layout = check_agreement(all, options);
  a.batch = mine.batch;
  a.heads_q = mine.heads_q;
  a.heads_kv = mine.heads_kv;
  a.dim = mine.dim;
  a.dim_v = mine.dim_v;
  for (const Summary& r : all)  // every block fits one message (checked on every rank alike)
    message_count(r.batch * r.heads_kv * r.seq * (r.dim + r.dim_v));
  return a;
}

AttentionShape agree_on_views(MPI_Comm comm, const ConstTensor& q, const ConstTensor& k,
                              const ConstTensor& v, const Tensor& out,
                              const AttentionOptions& options, const AttentionShape* planned) {
  AttentionShape shape;
  agree(comm, [&] {
    shape = detail::shape_of(q, k, v, out);
    // (ring_attention checks S_q = S_k in agree_on_ring; a plan's shape already has it.)
    if (planned != nullptr && shape != *planned)
      fail(ErrorKind::kInvalidArgument, "q/k/v/out_shard extents",
           extents_text(*planned) + " (as planned)", extents_text(shape),
           "make a ring plan for this shape");
    detail::validate_problem(q, k, v, out, local_options(options));  // pointers, overlap
  });
  return shape;
}

}  // namespace seqattn::mpi
