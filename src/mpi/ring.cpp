// ring_attention: the agreed geometry, the two schedules (the K/V ring for dense attention,
// the neighbour exchange for sliding window) and the exact LSE merge of their partials.
#include <chrono>
#include <cmath>
#include <limits>
#include <utility>

#include "mpi/collective_check.hpp"
#include "mpi/kv_pack.hpp"
#include "mpi/ring_agreement.hpp"
#include "mpi/ring_geometry.hpp"
#include "seqattn/error.hpp"
#include "seqattn/mpi/ring.hpp"

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

// This rank's queries, its output rows and their running log-sum-exp, and the call's state.
class Ring {
 public:
  Ring(MPI_Comm comm, const Agreement& a, const ConstTensor& q, const Tensor& out,
       const AttentionOptions& options)
      : comm_(comm), a_(a), q_(q), out_(out), options_(options) {
    lse_.assign(static_cast<std::size_t>(a.batch * a.heads_q * q.shape[2]),
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
    return a_.batch * a_.heads_kv * rows * (a_.dim + a_.dim_v);
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
    if (pending_.empty()) return;
    int done = 0;
    MPI_Testall(static_cast<int>(pending_.size()), pending_.data(), &done, MPI_STATUSES_IGNORE);
  }

  MPI_Comm comm_;
  const Agreement& a_;
  ConstTensor q_;
  Tensor out_;
  const AttentionOptions& options_;
  std::vector<float> lse_;  // [B, H_q, n, 1]
  std::vector<float> part_out_, part_lse_;
  std::vector<MPI_Request> pending_;  // transfers in flight while the kernel runs
  RingRecord record_;
};

ConstTensor rows_of(const ConstTensor& t, std::int64_t r0, std::int64_t r1) {
  ConstTensor v = t;
  v.data = t.data + r0 * t.strides[2];
  v.shape[2] = r1 - r0;
  return v;
}

Tensor rows_of(const Tensor& t, std::int64_t r0, std::int64_t r1) {
  Tensor v = t;
  v.data = t.data + r0 * t.strides[2];
  v.shape[2] = r1 - r0;
  return v;
}

void Ring::attend_block(std::int64_t i0, std::int64_t i1, const KvBlock& block, std::int64_t j0,
                        std::int64_t j1, const VariantSpec& variant, bool causal, bool initialise) {
  const double t0 = now();
  const std::int64_t n = q_.shape[2], rows = i1 - i0, keys = j1 - j0;
  const ConstTensor k =
      bhsd<const float>(block.data.data(), a_.batch, a_.heads_kv, block.rows, a_.dim);
  const ConstTensor v = bhsd<const float>(block.data.data() + elements(k, block.rows), a_.batch,
                                          a_.heads_kv, block.rows, a_.dim_v);
  AttentionOptions o;
  o.variant = variant;
  o.mask.causal = causal;
  o.scale = options_.scale;
  o.threads = options_.threads;
  if (!options_.mask.key_lengths.empty()) {
    Pieces attended;
    for (std::int64_t skipped = 0; const auto& p : block.pieces) {  // rows [j0, j1) only
      const std::int64_t lo = std::max<std::int64_t>(j0 - skipped, 0);
      const std::int64_t hi = std::min(p.length, j1 - skipped);
      if (lo < hi) attended.push_back({p.start + lo, hi - lo});
      skipped += p.length;
    }
    for (std::int64_t length : options_.mask.key_lengths)
      o.mask.key_lengths.push_back(valid_prefix(attended, keys, length));
  }
  const Tensor lse_all{lse_.data(), {a_.batch, a_.heads_q, n, 1}, {a_.heads_q * n, n, 1, 1}};
  const Tensor lse_rows = rows_of(lse_all, i0, i1);
  const Tensor out_rows = rows_of(out_, i0, i1);
  RunRecord run;
  if (initialise) {
    o.lse = lse_rows;
    run = attend(rows_of(q_, i0, i1), rows_of(k, j0, j1), rows_of(v, j0, j1), out_rows, o);
  } else {
    part_out_.resize(static_cast<std::size_t>(a_.batch * a_.heads_q * rows * a_.dim_v));
    part_lse_.resize(static_cast<std::size_t>(a_.batch * a_.heads_q * rows));
    const Tensor po = bhsd(part_out_.data(), a_.batch, a_.heads_q, rows, a_.dim_v);
    const Tensor pl = bhsd(part_lse_.data(), a_.batch, a_.heads_q, rows, 1);
    o.lse = pl;
    run = attend(rows_of(q_, i0, i1), rows_of(k, j0, j1), rows_of(v, j0, j1), po, o);
    merge_partials(out_rows, lse_rows, po, pl, out_rows, lse_rows);
  }
  record_.flops += run.flops;
  record_.threads = run.threads;
  record_.compute_seconds += now() - t0;
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
  const Agreement& a = ring.a_;
  const int p = a.layout.ranks, rank = a.rank;
  const bool zigzag = a.layout.sharding == Sharding::kZigZag;
  KvBlock cur = ring.pack(k, v, 0, k.shape[2], a.layout.pieces[static_cast<std::size_t>(rank)]);
  KvBlock next;
  std::vector<MPI_Request>& requests = ring.pending_;
  const std::int64_t n = ring.q_.shape[2];
  for (int step = 0; step < p; ++step) {
    const int src = (rank - step + p) % p;
    if (step + 1 < p) {
      const int incoming = (src - 1 + p) % p;
      next.rows = a.layout.shard_length(incoming);
      next.pieces = a.layout.pieces[static_cast<std::size_t>(incoming)];
      next.data.resize(static_cast<std::size_t>(ring.block_floats(next.rows)));
      requests.resize(2);
      MPI_Irecv(next.data.data(), message_count(ring.block_floats(next.rows)), MPI_FLOAT,
                (rank - 1 + p) % p, kRingTag, ring.comm_, &requests[0]);
      MPI_Isend(cur.data.data(), message_count(ring.block_floats(cur.rows)), MPI_FLOAT,
                (rank + 1) % p, kRingTag, ring.comm_, &requests[1]);
      ring.record_.bytes_sent += static_cast<double>(ring.block_floats(cur.rows)) * sizeof(float);
    }
    ++ring.record_.steps;
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
    wait_all(requests, ring.record_);
    std::swap(cur, next);
  }
}

// Sliding window: each rank receives from the ranks its band reaches only the key rows it
// needs, all requests posted up front; the local block runs while they travel.
void run_band_exchange(Ring& ring, const ConstTensor& k, const ConstTensor& v,
                       const SlidingWindowSpec& w, bool causal) {
  const Agreement& a = ring.a_;
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
                ring.comm_, &receives.back());
      sources.push_back(s);
    }
    if (const auto b = band_block(piece(s), piece(rank), w.left, right)) {  // s needs mine
      outbox.push_back(ring.pack(k, v, b->j0, b->j1, {}));
      sends.emplace_back();
      MPI_Isend(outbox.back().data.data(), message_count(ring.block_floats(b->j1 - b->j0)),
                MPI_FLOAT, s, kRingTag, ring.comm_, &sends.back());
      ring.record_.bytes_sent += static_cast<double>(outbox.back().data.size()) * sizeof(float);
    }
  }
  // One array for the requests, so that what progress() completes is what the waits see:
  // receives first (index i for sources[i]), then the sends.
  ring.pending_ = receives;
  ring.pending_.insert(ring.pending_.end(), sends.begin(), sends.end());
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
  ring.record_.steps = 1 + static_cast<int>(sources.size());
  for (std::size_t i = 0; i < sources.size(); ++i) {
    wait_one(ring.pending_[i], ring.record_);
    const KvBlock& in = inbox[static_cast<std::size_t>(sources[i])];
    attend_band(in, sources[i], in.pieces[0].start - piece(sources[i]).start, false);
  }
  wait_all(ring.pending_, ring.record_);
}

// Runs the agreed schedule on this rank's views.
RingRecord run_agreed(MPI_Comm comm, const Agreement& a, const ConstTensor& q, const ConstTensor& k,
                      const ConstTensor& v, const Tensor& out, const AttentionOptions& options,
                      double t0) {
  Ring ring(comm, a, q, out, options);
  if (const auto* w = std::get_if<SlidingWindowSpec>(&options.variant)) {
    run_band_exchange(ring, k, v, *w, options.mask.causal);
  } else {
    run_dense_ring(ring, k, v);
  }
  ring.record_.seconds = now() - t0;
  return ring.record_;
}

}  // namespace

namespace internal {
struct RingState {
  MPI_Comm comm;
  AttentionOptions options;
  AttentionShape shard;
  Agreement agreement;
};
}  // namespace internal

RingRecord ring_attention(MPI_Comm comm, const ConstTensor& q_shard, const ConstTensor& k_shard,
                          const ConstTensor& v_shard, const Tensor& out_shard,
                          const AttentionOptions& options) {
  const double t0 = now();
  const AttentionShape shard =
      agree_on_views(comm, q_shard, k_shard, v_shard, out_shard, options, nullptr);
  const Agreement a = agree_on_ring(comm, shard, options);
  return run_agreed(comm, a, q_shard, k_shard, v_shard, out_shard, options, t0);
}

RingPlan::RingPlan(std::shared_ptr<const internal::RingState> state) : state_(std::move(state)) {}

const ShardLayout& RingPlan::layout() const { return state_->agreement.layout; }

RingRecord RingPlan::run(const ConstTensor& q_shard, const ConstTensor& k_shard,
                         const ConstTensor& v_shard, const Tensor& out_shard) const {
  const double t0 = now();
  const internal::RingState& s = *state_;
  agree_on_views(s.comm, q_shard, k_shard, v_shard, out_shard, s.options, &s.shard);
  return run_agreed(s.comm, s.agreement, q_shard, k_shard, v_shard, out_shard, s.options, t0);
}

RingPlan make_ring_plan(MPI_Comm comm, const AttentionShape& shard,
                        const AttentionOptions& options) {
  auto state = std::make_shared<internal::RingState>();
  state->comm = comm;
  state->options = options;
  state->shard = shard;
  state->agreement = agree_on_ring(comm, shard, options);
  return RingPlan(std::move(state));
}

}  // namespace seqattn::mpi
