// ring_attention: the agreed geometry, the two schedules (the K/V ring for dense attention,
// the neighbour exchange for sliding window) and the exact LSE merge of their partials.
#include <chrono>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "seqattn/error.hpp"
#include "seqattn/mpi/ring.hpp"
#include "seqattn/workspace.hpp"
#include "src/mpi/block_plans.hpp"
#include "src/mpi/collective_check.hpp"
#include "src/mpi/kv_pack.hpp"
#include "src/mpi/ring_agreement.hpp"
#include "src/mpi/ring_geometry.hpp"

namespace seqattn::mpi {
namespace {

constexpr int kRingTag = 7201;

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// A packed K/V block as MPI carries it: k [B, H_kv, rows, D] then v [B, H_kv, rows, D_v].
struct KvBlock {
  std::vector<float> data;
  std::int64_t rows = 0;
  Pieces pieces;  // the key positions it holds, in row order
};

// One call on this rank: its queries, its output rows and their running log-sum-exp, the
// transfers in flight and the record. The schedules below drive it.
struct Ring {
  Ring(MPI_Comm communicator, const Agreement& a, const ConstTensor& q, const Tensor& o,
       const AttentionOptions& opts, BlockPlans& block_plans)
      : comm(communicator), agreed(a), queries(q), out(o), options(opts), plans(block_plans) {
    lse.assign(static_cast<std::size_t>(a.batch * a.heads_q * q.shape[2]),
               -std::numeric_limits<float>::infinity());
  }

  KvBlock pack(const ConstTensor& k, const ConstTensor& v, std::int64_t r0, std::int64_t r1,
               Pieces pieces) const {
    KvBlock b;
    b.rows = r1 - r0;
    b.pieces = std::move(pieces);
    b.data.resize(static_cast<std::size_t>(block_floats(b.rows)));
    pack_rows(k, r0, r1, b.data.data());
    pack_rows(v, r0, r1, b.data.data() + elements(k, b.rows));
    return b;
  }

  std::int64_t block_floats(std::int64_t rows) const {
    return agreed.batch * agreed.heads_kv * rows * (agreed.dim + agreed.dim_v);
  }

  // Query rows [i0, i1) attend to key rows [j0, j1) of `block` under `variant` (and the
  // kernel's causal flag). The first block of a row writes out and lse (`initialise`); later
  // ones are merged into them.
  void attend_block(std::int64_t i0, std::int64_t i1, const KvBlock& block, std::int64_t j0,
                    std::int64_t j1, const VariantSpec& variant, bool causal, bool initialise);

  // Pushes the pending transfers on. Open MPI moves a large (rendezvous) message only inside
  // MPI calls, so without these tests between row chunks the next shard would travel during
  // the wait: measured at S = 4096, P = 2, 14.8 ms blocked of a 183 ms call before, against a
  // 2 ms ring pass alone.
  void progress() {
    if (pending.empty()) return;
    int done = 0;
    MPI_Testall(static_cast<int>(pending.size()), pending.data(), &done, MPI_STATUSES_IGNORE);
  }

  MPI_Comm comm;
  const Agreement& agreed;
  ConstTensor queries;
  Tensor out;
  const AttentionOptions& options;
  BlockPlans& plans;
  std::vector<float> lse;  // [B, H_q, n, 1]
  std::vector<float> partial_out, partial_lse;
  // The kernel's scratch for the block runs (AttentionPlan::qkv_workspace_bytes), grown to the
  // largest block plan met: a call allocates it once, not once per block.
  WorkspaceBuffer workspace;
  std::vector<MPI_Request> pending;  // transfers in flight while the kernel runs
  RingRecord record;
};

// Rows [r0, r1) of a [B, H, S, D] view.
template <class View>
View rows_of(const View& t, std::int64_t r0, std::int64_t r1) {
  View v = t;
  v.data = t.data + r0 * t.strides[2];
  v.shape[2] = r1 - r0;
  return v;
}

void Ring::attend_block(std::int64_t i0, std::int64_t i1, const KvBlock& block, std::int64_t j0,
                        std::int64_t j1, const VariantSpec& variant, bool causal, bool initialise) {
  const double t0 = now();
  const std::int64_t n = queries.shape[2], rows = i1 - i0, keys = j1 - j0;
  const ConstTensor k =
      bhsd<const float>(block.data.data(), agreed.batch, agreed.heads_kv, block.rows, agreed.dim);
  const ConstTensor v = bhsd<const float>(block.data.data() + elements(k, block.rows), agreed.batch,
                                          agreed.heads_kv, block.rows, agreed.dim_v);
  const AttentionPlan& plan = plans.get(rows, keys, variant, causal);
  RunArgs args;
  const std::optional<std::size_t> bytes = plan.qkv_workspace_bytes();
  if (bytes) {
    args.workspace = workspace.get(*bytes);
  }
  std::vector<std::int64_t> key_lengths;
  if (!options.mask.key_lengths.empty()) {
    Pieces attended;
    for (std::int64_t skipped = 0; const auto& p : block.pieces) {  // rows [j0, j1) only
      const std::int64_t lo = std::max<std::int64_t>(j0 - skipped, 0);
      const std::int64_t hi = std::min(p.length, j1 - skipped);
      if (lo < hi) attended.push_back({p.start + lo, hi - lo});
      skipped += p.length;
    }
    for (std::int64_t length : options.mask.key_lengths)
      key_lengths.push_back(valid_prefix(attended, keys, length));
    args.key_lengths = key_lengths;
  }
  const Tensor lse_all{
      lse.data(), {agreed.batch, agreed.heads_q, n, 1}, {agreed.heads_q * n, n, 1, 1}};
  const Tensor lse_rows = rows_of(lse_all, i0, i1);
  const Tensor out_rows = rows_of(out, i0, i1);
  RunRecord run;
  if (initialise) {
    args.lse = lse_rows;
    run =
        plan.run(rows_of(queries, i0, i1), rows_of(k, j0, j1), rows_of(v, j0, j1), out_rows, args);
  } else {
    partial_out.resize(
        static_cast<std::size_t>(agreed.batch * agreed.heads_q * rows * agreed.dim_v));
    partial_lse.resize(static_cast<std::size_t>(agreed.batch * agreed.heads_q * rows));
    const Tensor po = bhsd(partial_out.data(), agreed.batch, agreed.heads_q, rows, agreed.dim_v);
    const Tensor pl = bhsd(partial_lse.data(), agreed.batch, agreed.heads_q, rows, 1);
    args.lse = pl;
    run = plan.run(rows_of(queries, i0, i1), rows_of(k, j0, j1), rows_of(v, j0, j1), po, args);
    merge_partials(out_rows, lse_rows, po, pl, out_rows, lse_rows);
  }
  record.flops += run.flops;
  record.threads = run.threads;
  record.compute_seconds += now() - t0;
}

// Query rows [i0, i1) in the chunks between which Ring::progress() runs: four per block, at
// least 256 rows each (fewer rows per kernel call would repack K/V too often for the gain).
std::vector<std::pair<std::int64_t, std::int64_t>> row_chunks(std::int64_t i0, std::int64_t i1) {
  const std::int64_t step = std::max<std::int64_t>(256, (i1 - i0 + 3) / 4);
  std::vector<std::pair<std::int64_t, std::int64_t>> chunks;
  for (std::int64_t c = i0; c < i1; c += step) chunks.emplace_back(c, std::min(i1, c + step));
  return chunks;
}

// Waits for `requests`, adding the time blocked to the record: communication that the
// compute before it did not hide.
void wait_all(std::vector<MPI_Request>& requests, RingRecord& record) {
  if (requests.empty()) return;
  const double t0 = now();
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), MPI_STATUSES_IGNORE);
  record.wait_seconds += now() - t0;
  requests.clear();
}

void wait_one(MPI_Request& request, RingRecord& record) {
  const double t0 = now();
  MPI_Wait(&request, MPI_STATUS_IGNORE);
  record.wait_seconds += now() - t0;
}

// Dense: the K/V shards go once around the ring; the next one is in flight while the kernel
// works on the current one. Zig-zag causal attends each query piece to the key pieces that lie
// entirely before it (the local shard: causally, as one block).
void run_dense_ring(Ring& ring, const ConstTensor& k, const ConstTensor& v) {
  const Agreement& a = ring.agreed;
  const int p = a.layout.ranks, rank = a.rank;
  const bool zigzag = a.layout.sharding == Sharding::kZigZag;
  KvBlock cur = ring.pack(k, v, 0, k.shape[2], a.layout.pieces[static_cast<std::size_t>(rank)]);
  KvBlock next;
  std::vector<MPI_Request>& requests = ring.pending;
  const std::int64_t n = ring.queries.shape[2];
  for (int step = 0; step < p; ++step) {
    const int src = (rank - step + p) % p;
    if (step + 1 < p) {
      const int incoming = (src - 1 + p) % p;
      next.rows = a.layout.shard_length(incoming);
      next.pieces = a.layout.pieces[static_cast<std::size_t>(incoming)];
      next.data.resize(static_cast<std::size_t>(ring.block_floats(next.rows)));
      requests.resize(2);
      MPI_Irecv(next.data.data(), message_count(ring.block_floats(next.rows)), MPI_FLOAT,
                (rank - 1 + p) % p, kRingTag, ring.comm, &requests[0]);
      MPI_Isend(cur.data.data(), message_count(ring.block_floats(cur.rows)), MPI_FLOAT,
                (rank + 1) % p, kRingTag, ring.comm, &requests[1]);
      ring.record.bytes_sent += static_cast<double>(ring.block_floats(cur.rows)) * sizeof(float);
    }
    ++ring.record.steps;
    if (src == rank) {  // every row's first block; zig-zag: causal over the local shard
      for (const auto& [c0, c1] : row_chunks(0, n)) {
        ring.attend_block(c0, c1, cur, 0, zigzag ? c1 : cur.rows, DenseSpec{}, zigzag, true);
        ring.progress();
      }
    } else if (!zigzag) {
      for (const auto& [c0, c1] : row_chunks(0, n)) {
        ring.attend_block(c0, c1, cur, 0, cur.rows, DenseSpec{}, false, false);
        ring.progress();
      }
    } else {
      const Pieces& mine = a.layout.pieces[static_cast<std::size_t>(rank)];
      for (std::int64_t row = 0; const auto& piece : mine) {
        const std::size_t m = pieces_before(cur.pieces, piece);
        std::int64_t keys = 0;
        for (std::size_t i = 0; i < m; ++i) keys += cur.pieces[i].length;
        for (const auto& [c0, c1] : row_chunks(row, row + piece.length)) {
          if (keys == 0) break;
          ring.attend_block(c0, c1, cur, 0, keys, DenseSpec{}, false, false);
          ring.progress();
        }
        row += piece.length;
      }
    }
    wait_all(requests, ring.record);
    std::swap(cur, next);
  }
}

// Sliding window: each rank receives from the ranks its band reaches only the key rows it
// needs, all requests posted up front; the local block runs while they travel.
void run_band_exchange(Ring& ring, const ConstTensor& k, const ConstTensor& v,
                       const SlidingWindowSpec& w, bool causal) {
  const Agreement& a = ring.agreed;
  const int p = a.layout.ranks, rank = a.rank;
  const std::int64_t right = causal ? std::min<std::int64_t>(w.right, 0) : w.right;
  const auto piece = [&](int r) { return a.layout.pieces[static_cast<std::size_t>(r)][0]; };
  std::vector<KvBlock> inbox(static_cast<std::size_t>(p)), outbox;
  std::vector<MPI_Request> receives, sends;
  std::vector<int> sources;
  for (int s = 0; s < p; ++s) {
    if (s == rank) continue;
    if (const auto b = band_block(piece(rank), piece(s), w.left, right)) {  // I need s's keys
      KvBlock& in = inbox[static_cast<std::size_t>(s)];
      in.rows = b->j1 - b->j0;
      in.pieces = {{piece(s).start + b->j0, in.rows}};
      in.data.resize(static_cast<std::size_t>(ring.block_floats(in.rows)));
      receives.emplace_back();
      MPI_Irecv(in.data.data(), message_count(ring.block_floats(in.rows)), MPI_FLOAT, s, kRingTag,
                ring.comm, &receives.back());
      sources.push_back(s);
    }
    if (const auto b = band_block(piece(s), piece(rank), w.left, right)) {  // s needs mine
      outbox.push_back(ring.pack(k, v, b->j0, b->j1, {}));
      sends.emplace_back();
      MPI_Isend(outbox.back().data.data(), message_count(ring.block_floats(b->j1 - b->j0)),
                MPI_FLOAT, s, kRingTag, ring.comm, &sends.back());
      ring.record.bytes_sent += static_cast<double>(outbox.back().data.size()) * sizeof(float);
    }
  }
  // One array for the requests, so that what progress() completes is what the waits see:
  // receives first (index i for sources[i]), then the sends.
  ring.pending = receives;
  ring.pending.insert(ring.pending.end(), sends.begin(), sends.end());
  // Query rows of this shard against one key block whose first row is key row `base` of shard
  // s, chunk by chunk (each chunk's band recomputed on its own rows).
  const auto attend_band = [&](const KvBlock& block, int s, std::int64_t base, bool initialise) {
    const ShardLayout::Piece mine = piece(rank);
    for (const auto& [c0, c1] : row_chunks(0, mine.length)) {
      const auto b = band_block({mine.start + c0, c1 - c0}, piece(s), w.left, right);
      if (b) {
        ring.attend_block(c0 + b->i0, c0 + b->i1, block, b->j0 - base, b->j1 - base,
                          SlidingWindowSpec{b->left, b->right, {}}, false, initialise);
      }
      ring.progress();
    }
  };
  attend_band(ring.pack(k, v, 0, k.shape[2], {piece(rank)}), rank, 0, true);
  ring.record.steps = 1 + static_cast<int>(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    wait_one(ring.pending[i], ring.record);
    const KvBlock& in = inbox[static_cast<std::size_t>(sources[i])];
    attend_band(in, sources[i], in.pieces[0].start - piece(sources[i]).start, false);
  }
  wait_all(ring.pending, ring.record);
}

// Runs the agreed schedule on this rank's views.
RingRecord run_agreed(MPI_Comm comm, const Agreement& a, const ConstTensor& q, const ConstTensor& k,
                      const ConstTensor& v, const Tensor& out, const AttentionOptions& options,
                      BlockPlans& plans, double t0) {
  const std::size_t planned_before = plans.size();
  Ring ring(comm, a, q, out, options, plans);
  if (const auto* w = std::get_if<SlidingWindowSpec>(&options.variant)) {
    run_band_exchange(ring, k, v, *w, options.mask.causal);
  } else {
    run_dense_ring(ring, k, v);
  }
  ring.record.seconds = now() - t0;
  ring.record.plans_made = static_cast<int>(plans.size() - planned_before);
  return ring.record;
}

}  // namespace

namespace internal {
struct RingState {
  RingState(MPI_Comm c, const AttentionOptions& o, const AttentionShape& s, Agreement a)
      : comm(c), options(o), shard(s), agreement(std::move(a)), plans(shard, options) {}
  MPI_Comm comm;
  AttentionOptions options;
  AttentionShape shard;
  Agreement agreement;
  mutable BlockPlans plans;  // made on the first run that needs each, kept for the next runs
};
}  // namespace internal

RingRecord ring_attention(MPI_Comm comm, const ConstTensor& q_shard, const ConstTensor& k_shard,
                          const ConstTensor& v_shard, const Tensor& out_shard,
                          const AttentionOptions& options) {
  const double t0 = now();
  const AttentionShape shard =
      agree_on_views(comm, q_shard, k_shard, v_shard, out_shard, options, nullptr);
  const Agreement a = agree_on_ring(comm, shard, options);
  BlockPlans plans(shard, options);  // shared by the blocks of this call
  return run_agreed(comm, a, q_shard, k_shard, v_shard, out_shard, options, plans, t0);
}

RingPlan::RingPlan(std::shared_ptr<const internal::RingState> state) : state_(std::move(state)) {}

const ShardLayout& RingPlan::layout() const { return state_->agreement.layout; }

RingRecord RingPlan::run(const ConstTensor& q_shard, const ConstTensor& k_shard,
                         const ConstTensor& v_shard, const Tensor& out_shard) const {
  const double t0 = now();
  const internal::RingState& s = *state_;
  agree_on_views(s.comm, q_shard, k_shard, v_shard, out_shard, s.options, &s.shard);
  return run_agreed(s.comm, s.agreement, q_shard, k_shard, v_shard, out_shard, s.options, s.plans,
                    t0);
}

RingPlan make_ring_plan(MPI_Comm comm, const AttentionShape& shard,
                        const AttentionOptions& options) {
  return RingPlan(std::make_shared<internal::RingState>(comm, options, shard,
                                                        agree_on_ring(comm, shard, options)));
}

}  // namespace seqattn::mpi
