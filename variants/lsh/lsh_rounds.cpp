// LSH attention's rounds on the tile kernel. Per (batch, kv head) pair and round: every
// position is hashed (a GEMM against the round's rotations, then an argmax), the positions are
// counting-sorted by (bucket, position), and the sorted slots go to the flash kernel segment by
// segment: the segment's query rows and keys gathered in sorted order, each chunk's window (its
// own chunk and the one before) a contiguous key range of the gathered keys, the self rule and
// the causal rule (which compare original positions) a SlotRule. Each round's rows then merge
// into the pair's accumulator by their log-normalisers, round after round, so no round's output
// outlives its segment and the combination order is fixed.
#include "variants/lsh/lsh_rounds.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <span>

#include "src/gemm/gemm.hpp"
#include "src/kernel/flash_attention.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/runtime/workspace.hpp"
#include "variants/lsh/lsh_scratch.hpp"
#include "variants/lsh/lsh_windows.hpp"

namespace seqattn::detail {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr std::int32_t kNoPosition = std::numeric_limits<std::int32_t>::max();

// The bucket of one hashed vector: argmax of [y, -y], ties to the lowest index, the first NaN
// wins (numpy's argmax). y's first minimum is -y's first maximum.
std::int32_t bucket_of(const float* y, std::int64_t m) {
  std::int64_t hi = 0, lo = 0;
  for (std::int64_t c = 0; c < m; ++c) {
    if (std::isnan(y[c])) return static_cast<std::int32_t>(c);
    if (y[c] > y[hi]) hi = c;
    if (y[c] < y[lo]) lo = c;
  }
  return static_cast<std::int32_t>(y[hi] >= -y[lo] ? hi : m + lo);
}

void copy_row(const ConstTensor& t, std::int64_t b, std::int64_t h, std::int64_t s, float* dst) {
  const float* src = t.ptr(b, h, s);
  const std::int64_t n = t.shape[3], step = t.strides[3];
  if (step == 1) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(float));
  } else {
    for (std::int64_t d = 0; d < n; ++d) dst[d] = src[d * step];
  }
}

// Sum of squares of row (b, h, s) of t, in double.
double squared_norm(const ConstTensor& t, std::int64_t b, std::int64_t h, std::int64_t s) {
  const float* x = t.ptr(b, h, s);
  double sum = 0;
  for (std::int64_t d = 0; d < t.shape[3]; ++d)
    sum += double{x[d * t.strides[3]]} * x[d * t.strides[3]];
  return sum;
}

// The kernel call over one segment: `rows` query slots of each of `group` heads over `keys`
// gathered keys, on `threads` threads, in w's buffers (null while counting) and its kernel
// workspace.
Problem segment_call(const Problem& p, std::int64_t group, std::int64_t rows, std::int64_t keys,
                     int threads, const LshScratch& w) {
  const std::int64_t dim = p.dim(), dv = p.dim_v();
  Problem call;
  call.q = bhsd<const float>(w.q.data(), 1, group, rows, dim);
  call.k = bhsd<const float>(w.k.data(), 1, 1, keys, dim);
  call.v = bhsd<const float>(w.v.data(), 1, 1, keys, dv);
  call.out = bhsd<float>(w.out.data(), 1, group, rows, dv);
  call.lse = bhsd<float>(w.lse.data(), 1, group, rows, 1);
  call.scale = p.scale;
  call.scale_given = true;
  call.threads = threads;
  call.compute_path = p.compute_path;
  call.workspace = w.flash_workspace();
  return call;
}

class PairRounds {
 public:
  // threads: the team this pair has to itself (1 when pairs run in parallel).
  PairRounds(const Problem& p, const LshConfig& c, const WindowStore& windows, LshScratch& w,
             int threads)
      : p_(p), c_(c), store_(windows), w_(w), threads_(threads), group_(c.shared ? 1 : p.group()) {}

  void run(std::int64_t b, std::int64_t hk);

 private:
  std::int64_t query_head(std::int64_t g) const { return hk_ * group_ + g; }
  const ConstTensor& key_tensor() const { return c_.shared ? p_.q : p_.k; }
  void hash(const ConstTensor& t, std::int64_t h, std::int32_t* buckets);
  void sort(const std::int32_t* buckets, std::int32_t* order);
  void segment(std::int64_t t0, std::int64_t t1);
  void gather_key(std::int64_t slot, std::int64_t local);
  void merge(std::int64_t g, std::int64_t r, std::int64_t s0, std::int64_t rows);
  void add_nonfinite_values(std::int64_t rows, const ChunkWindows& windows, const SlotRule& rule);
  void finish();

  const Problem& p_;
  const LshConfig& c_;
  const WindowStore& store_;
  LshScratch& w_;
  int threads_;
  std::int64_t group_;
  std::int64_t b_ = 0, hk_ = 0, len_ = 0, chunks_ = 0;
};

// buckets[r·S + i] for the first L rows of head h of t, every round r.
void PairRounds::hash(const ConstTensor& t, std::int64_t h, std::int32_t* buckets) {
  const std::int64_t stride = p_.seq_q();
  const std::int64_t dim = p_.dim(), m = c_.buckets / 2, ld = c_.rotations.row_stride;
  ForEachTask((len_ + kLshHashRows - 1) / kLshHashRows, threads_, [&](std::int64_t block, int me) {
    const std::int64_t i0 = block * kLshHashRows, n = std::min(kLshHashRows, len_ - i0);
    float* x = w_.hash_block.data() + me * kLshHashRows * dim;
    float* y = w_.hash_scores.data() + me * kLshHashRows * m;
    const std::span<float> pack(w_.hash_pack.data() + me * w_.hash_pack_floats,
                                w_.hash_pack_floats);
    for (std::int64_t r = 0; r < n; ++r) copy_row(t, b_, h, i0 + r, x + r * dim);
    for (std::int64_t round = 0; round < c_.hashes; ++round) {
      sgemm(Transpose::kNo, Transpose::kNo, n, m, dim, 1.0f, x, dim, c_.rotations.row(round * dim),
            ld, 0.0f, y, m, 1, pack);
      for (std::int64_t r = 0; r < n; ++r)
        buckets[round * stride + i0 + r] = bucket_of(y + r * m, m);
    }
  });
}

// order = the positions sorted by (bucket, position): a counting sort, stable in position.
void PairRounds::sort(const std::int32_t* buckets, std::int32_t* order) {
  std::fill(w_.counts.begin(), w_.counts.end(), 0);
  for (std::int64_t i = 0; i < len_; ++i) ++w_.counts[static_cast<size_t>(buckets[i]) + 1];
  for (size_t u = 1; u < w_.counts.size(); ++u) w_.counts[u] += w_.counts[u - 1];
  for (std::int64_t i = 0; i < len_; ++i)
    order[w_.counts[static_cast<size_t>(buckets[i])]++] = static_cast<std::int32_t>(i);
}

// Key slot `slot` (in the round's key order) into gathered key `local`: shared keys are the
// queries RMS-normalised.
void PairRounds::gather_key(std::int64_t slot, std::int64_t local) {
  const std::int64_t dim = p_.dim(), dv = p_.dim_v();
  const std::int32_t pos = w_.key_order[static_cast<size_t>(slot)];
  float* k = w_.k.data() + local * dim;
  copy_row(key_tensor(), b_, hk_, pos, k);
  if (c_.shared) {
    const float inv = w_.inv_rms[static_cast<size_t>(pos)];
    for (std::int64_t d = 0; d < dim; ++d) k[d] *= inv;
  }
  float* v = w_.v.data() + local * dv;
  copy_row(p_.v, b_, hk_, pos, v);
  w_.key_pos[static_cast<size_t>(local)] = pos;
  // A hidden key's value still meets a zero weight in the tile product (0 · NaN = NaN): values
  // that are not finite go in as zeros and reach the rows that see them afterwards.
  const bool finite = std::all_of(v, v + dv, [](float x) { return std::isfinite(x); });
  if (!finite) std::fill_n(v, dv, 0.0f);
  w_.nonfinite_flag[static_cast<size_t>(local)] = finite ? 0 : 1;
}

// Adds each non-finite value (zeroed for the kernel) to the rows of the segment that see its
// key: NaN stays NaN, ±Inf makes the column ±Inf (NaN with both signs); the others stay exact.
void PairRounds::add_nonfinite_values(std::int64_t rows, const ChunkWindows& windows,
                                      const SlotRule& rule) {
  const std::int64_t dv = p_.dim_v();
  for (std::int64_t n = 0; n < w_.nonfinite_count; ++n) {
    const std::int64_t j = w_.nonfinite[static_cast<size_t>(n)];
    const float* v = p_.v.ptr(b_, hk_, w_.key_pos[static_cast<size_t>(j)]);
    for (std::int64_t g = 0; g < group_; ++g) {
      for (std::int64_t r = 0; r < rows; ++r) {
        const KeyRange range = windows.row_keys(r);
        if (j < range.lo || j >= range.hi) continue;
        if (rule.excluded_offset >= 0 && j == r + rule.excluded_offset) continue;
        if (rule.query != nullptr && rule.key[j] > rule.query[g * rows + r]) continue;
        float* out = w_.out.data() + (g * rows + r) * dv;
        for (std::int64_t d = 0; d < dv; ++d) out[d] += v[d * p_.v.strides[3]];
      }
    }
  }
}

void PairRounds::run(std::int64_t b, std::int64_t hk) {
  b_ = b;
  hk_ = hk;
  len_ = p_.key_length(b);
  chunks_ = (len_ + c_.chunk - 1) / c_.chunk;
  const std::int64_t dim = p_.dim(), s = p_.seq_q();
  std::fill(w_.acc_lse.begin(), w_.acc_lse.end(), kNegInf);
  std::fill(w_.self_rounds.begin(), w_.self_rounds.end(), 0);
  if (c_.shared) {
    ForEachTask(len_, threads_, [&](std::int64_t i, int) {
      const double mean = squared_norm(p_.q, b_, hk_, i) / static_cast<double>(dim);
      w_.inv_rms[static_cast<size_t>(i)] = static_cast<float>(1.0 / std::sqrt(mean + 1e-6));
    });
  }
  for (std::int64_t g = 0; g < group_; ++g)
    hash(p_.q, query_head(g), w_.query_buckets.data() + g * c_.hashes * s);
  if (!c_.shared) hash(p_.k, hk_, w_.key_buckets.data());
  const std::int64_t seg_chunks = lsh_segment_chunks(c_.chunk);
  for (std::int64_t round = 0; round < c_.hashes; ++round) {
    for (std::int64_t g = 0; g < group_; ++g) {
      sort(w_.query_buckets.data() + (g * c_.hashes + round) * s, w_.query_order.data() + g * s);
    }
    if (c_.shared) {
      std::copy(w_.query_order.begin(), w_.query_order.begin() + len_, w_.key_order.begin());
    } else {
      sort(w_.key_buckets.data() + round * s, w_.key_order.data());
    }
    for (std::int64_t t0 = 0; t0 < chunks_; t0 += seg_chunks)
      segment(t0, std::min(t0 + seg_chunks, chunks_));
  }
  finish();
}

// Query chunks [t0, t1) of the round: their rows and keys gathered in sorted order, the
// previous chunk's keys first (c slots, right-aligned: only the last chunk may be shorter),
// then one kernel call and the merge of its rows.
void PairRounds::segment(std::int64_t t0, std::int64_t t1) {
  const std::int64_t c = c_.chunk, dim = p_.dim(), dv = p_.dim_v(), s = p_.seq_q();
  const std::int64_t s0 = t0 * c, s1 = std::min(t1 * c, len_), rows = s1 - s0;
  // One chunk is its own whole window; otherwise chunk t0's window starts in the previous one.
  const std::int64_t prefix = chunks_ > 1 ? c : 0;
  const std::int64_t prev = (t0 - 1 + chunks_) % chunks_;
  const std::int64_t prev_len = chunks_ > 1 ? std::min(c, len_ - prev * c) : 0;
  const std::int64_t keys = prefix + rows;
  ForEachTask(keys, threads_, [&](std::int64_t j, int) {
    if (j >= prefix) return gather_key(s0 + j - prefix, j);
    if (j >= prefix - prev_len) return gather_key(prev * c + j - (prefix - prev_len), j);
    std::fill_n(w_.k.data() + j * dim, dim, 0.0f);  // never visible, but read: zeros
    std::fill_n(w_.v.data() + j * dv, dv, 0.0f);
    w_.key_pos[static_cast<size_t>(j)] = kNoPosition;
    w_.nonfinite_flag[static_cast<size_t>(j)] = 0;
  });
  w_.nonfinite_count = 0;
  for (std::int64_t j = 0; j < keys; ++j) {
    if (w_.nonfinite_flag[static_cast<size_t>(j)] != 0)
      w_.nonfinite[static_cast<size_t>(w_.nonfinite_count++)] = j;
  }
  ForEachTask(group_ * rows, threads_, [&](std::int64_t gr, int) {
    const std::int64_t g = gr / rows, r = gr % rows;
    const std::int32_t pos = w_.query_order[static_cast<size_t>(g * s + s0 + r)];
    copy_row(p_.q, b_, query_head(g), pos, w_.q.data() + gr * dim);
    w_.query_pos[static_cast<size_t>(gr)] = pos;
  });
  // The windows depend on the segment's geometry alone; the rules on positions are this call's.
  const std::shared_ptr<const ChunkWindows> windows = store_.get(rows, prefix, prev_len);
  SlotRule rule;
  rule.excluded_offset = c_.shared ? prefix : -1;
  rule.query = p_.mask.causal ? w_.query_pos.data() : nullptr;
  rule.key = p_.mask.causal ? w_.key_pos.data() : nullptr;
  Problem call = segment_call(p_, group_, rows, prefix + rows, threads_, w_);
  call.mask.slots = &rule;
  flash_forward(call, *windows);
  if (w_.nonfinite_count > 0) add_nonfinite_values(rows, *windows, rule);
  ForEachTask(group_ * rows, threads_,
              [&](std::int64_t gr, int) { merge(gr / rows, gr % rows, s0, rows); });
}

// Row r (of `rows`) of query head g into the accumulator, at its position. A row that saw no
// key is self-only (shared) or empty (separate) in this round.
void PairRounds::merge(std::int64_t g, std::int64_t r, std::int64_t s0, std::int64_t rows) {
  const std::int64_t dv = p_.dim_v(), s = p_.seq_q();
  const std::int32_t pos = w_.query_order[static_cast<size_t>(g * s + s0 + r)];
  const float lse = w_.lse[static_cast<size_t>(g * rows + r)];
  const size_t at = static_cast<size_t>(g * s + pos);
  const float* out = w_.out.data() + (g * rows + r) * dv;
  float* acc = w_.acc_out.data() + static_cast<std::int64_t>(at) * dv;
  float& acc_lse = w_.acc_lse[at];
  if (lse == kNegInf) {
    // The kernel's NaN row (a NaN score: its sum is NaN, not > 0) also reports -inf.
    if (std::any_of(out, out + dv, [](float x) { return std::isnan(x); })) {
      std::fill_n(acc, dv, std::numeric_limits<float>::quiet_NaN());
      acc_lse = std::numeric_limits<float>::quiet_NaN();
    } else if (c_.shared) {
      w_.self_rounds[at] += 1;
    }
    return;
  }
  if (acc_lse == kNegInf) {
    std::copy(out, out + dv, acc);
    acc_lse = lse;
    return;
  }
  // NaN in either lse makes m, the weights and the row NaN.
  const float m = std::max(acc_lse, lse);
  const float keep = std::exp(acc_lse - m), add = std::exp(lse - m), inv = 1.0f / (keep + add);
  for (std::int64_t d = 0; d < dv; ++d) acc[d] = (keep * acc[d] + add * out[d]) * inv;
  acc_lse = m + std::log(keep + add);
}

// out and lse of the pair's rows: the counted rounds' combination; else, shared, the self-only
// rounds' (v_i, s_ii + log count); else zeros and -inf (also every row past the key length).
void PairRounds::finish() {
  const std::int64_t dv = p_.dim_v(), s = p_.seq_q();
  ForEachTask(group_ * s, threads_, [&](std::int64_t gi, int) {
    const std::int64_t g = gi / s, i = gi % s, h = query_head(g);
    const size_t at = static_cast<size_t>(gi);
    float* out = p_.out.ptr(b_, h, i);
    const std::int64_t step = p_.out.strides[3];
    float lse = kNegInf;
    if (i < len_ && w_.acc_lse[at] != kNegInf) {
      const float* acc = w_.acc_out.data() + gi * dv;
      for (std::int64_t d = 0; d < dv; ++d) out[d * step] = acc[d];
      lse = w_.acc_lse[at];
    } else if (i < len_ && w_.self_rounds[at] > 0) {
      const float* v = p_.v.ptr(b_, hk_, i);
      for (std::int64_t d = 0; d < dv; ++d) out[d * step] = v[d * p_.v.strides[3]];
      const double s_ii =
          double{p_.scale} * squared_norm(p_.q, b_, h, i) * w_.inv_rms[static_cast<size_t>(i)];
      lse = static_cast<float>(s_ii + std::log(static_cast<double>(w_.self_rounds[at])));
    } else {
      for (std::int64_t d = 0; d < dv; ++d) out[d * step] = 0.0f;
    }
    if (p_.lse) p_.lse->at(b_, h, i, 0) = lse;
  });
}

// The pair threads and each one's team: pairs in parallel when there are enough of them; else
// one pair at a time on every thread.
struct Teams {
  int pair_threads = 1, kernel_threads = 1;
};
Teams teams_of(const Problem& p) {
  const int pairs = static_cast<int>(std::min<std::int64_t>(p.threads, p.batch() * p.heads_kv()));
  return {std::max(pairs, 1), pairs > 1 ? 1 : p.threads};
}

// The run's scratch: one LshScratch per pair thread.
LshScratch* carve_scratch(const Problem& p, const LshConfig& c, std::size_t calls_bytes,
                          ScratchArena& arena) {
  const Teams t = teams_of(p);
  return carve_objects<LshScratch>(arena, t.pair_threads, p, c, t.kernel_threads, calls_bytes);
}

}  // namespace

std::size_t lsh_calls_bytes(const Problem& p, const LshConfig& c) {
  const Teams t = teams_of(p);
  ScratchArena shape;  // counts only: the buffers' extents, no data
  const LshScratch w(p, c, t.kernel_threads, 0, shape);
  const std::int64_t group = c.shared ? 1 : p.group(), len = p.seq_k();
  const std::int64_t most_rows = std::min(len, lsh_segment_chunks(c.chunk) * c.chunk);
  // A call of `rows` query slots after `prefix` keys of the previous chunk (prev_len = prefix:
  // the widest first window; a shorter last chunk only narrows it). Temporary windows: the
  // store keeps what runs meet.
  auto call = [&](std::int64_t rows, std::int64_t prefix, const auto& ask) {
    const ChunkWindows keys(rows, prefix, prefix, c.chunk);
    return ask(segment_call(p, group, rows, prefix + rows, t.kernel_threads, w), keys);
  };
  auto bytes = [&](std::int64_t rows, std::int64_t prefix) {
    return call(rows, prefix, [](const Problem& q, const ChunkWindows& k) {
      return flash_workspace_bytes(q, k);
    });
  };
  auto banded = [&](std::int64_t rows, std::int64_t prefix) {
    return call(rows, prefix,
                [](const Problem& q, const ChunkWindows& k) { return flash_streams_band(q, k); });
  };
  // Calls of every length up to the largest: with a previous chunk in front, and single-chunk
  // lengths without. A call's workspace grows with its rows on each of the kernel's paths,
  // but not across the switch: a call whose pair passes the packing budget streams a ring of
  // its band, while a shorter one that fits packs every key, which can take more (D 128,
  // chunk 64: 2112 keys carve a 1 MiB ring, the 1664 of key length 1600 pack 1.6 MiB). So the
  // most is the largest call's or that of the largest call packed whole, found by bisection
  // (the switch is monotone in the keys).
  std::size_t most = 0;
  for (const std::int64_t prefix : {std::int64_t{0}, c.chunk}) {
    if (prefix > 0 && len <= c.chunk) break;  // every length is a single chunk
    const std::int64_t top = prefix == 0 ? std::min(most_rows, c.chunk) : most_rows;
    most = std::max(most, bytes(top, prefix));
    if (!banded(top, prefix) || banded(1, prefix)) continue;
    std::int64_t whole = 1, streamed = top;  // whole packs pairs whole, streamed does not
    while (streamed - whole > 1) {
      const std::int64_t mid = whole + (streamed - whole) / 2;
      (banded(mid, prefix) ? streamed : whole) = mid;
    }
    most = std::max(most, bytes(whole, prefix));
  }
  return most;
}

std::size_t lsh_workspace_bytes(const Problem& p, const LshConfig& c, std::size_t calls_bytes) {
  ScratchArena count;
  carve_scratch(p, c, calls_bytes, count);
  return count.used();
}

void lsh_forward(const Problem& p, const LshConfig& config, const WindowStore& windows,
                 std::size_t calls_bytes) {
  ScratchArena count;
  carve_scratch(p, config, calls_bytes, count);
  // Every allocation happens here, before any thread team: the caller's workspace (checked
  // whole before anything is written) or one of our own.
  const RunScratch scratch(p.workspace, count.used(), count.used(),
                           "AttentionPlan::qkv_workspace_bytes() (LSH attention: each pair "
                           "thread's hashes, sorted slots, accumulators and kernel workspace)");
  ScratchArena arena(scratch.data(), scratch.size());
  LshScratch* spaces = carve_scratch(p, config, calls_bytes, arena);
  const Teams t = teams_of(p);
  ForEachTask<true>(p.batch() * p.heads_kv(), t.pair_threads, [&](std::int64_t pair, int thread) {
    PairRounds(p, config, windows, spaces[thread], t.kernel_threads)
        .run(pair / p.heads_kv(), pair % p.heads_kv());
  });
}

}  // namespace seqattn::detail
