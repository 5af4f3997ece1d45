// Linformer: K' = E·K and V' = F·V along the sequence (E, F [proj_len, >= S_k]), then exact
// dense attention over the proj_len projected keys through the dense variant's own kernel.
// RoPE rotates each key at its position on its way into the projection (the copy the GEMM
// reads) and each query in the dense kernel: score (i, r) = (R_i q_i) · Σ_j E[r, j] R_j k_j.

#include <algorithm>
#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "seqattn/attention.hpp"
#include "src/gemm/gemm.hpp"
#include "src/kernel/flash_attention.hpp"
#include "src/kernel/scratch_arena.hpp"
#include "src/kernel/team_loops.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "src/runtime/workspace.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

// Keeps the drawn matrices bounded: proj_len × S_k floats each.
constexpr std::int64_t kMaxProjLen = 1 << 20;
constexpr double kMinParallelFlops = 1 << 20;

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  refuse_option("linformer", option, why, "dense");
}

void check_projection(const std::string& name, const MatrixView<const float>& m,
                      std::int64_t proj_len, std::int64_t seq_k) {
  if (m.data == nullptr) fail(name + ".data", "a non-null pointer", "nullptr");
  if (m.rows != proj_len) fail(name + ".rows", str(proj_len) + " (spec.proj_len)", str(m.rows));
  if (m.cols < seq_k) {
    fail(name + ".cols", ">= S_k = " + str(seq_k), str(m.cols),
         "the projection needs one column per key position");
  }
  if (m.row_stride < m.cols)
    fail(name + ".row_stride", ">= cols = " + str(m.cols), str(m.row_stride));
}

// E and F as used, owned: the caller's copied (their first S_k columns), or
// linformer_random_projection(proj_len, S_k, ·) drawn from spec.seed (E) and spec.seed + 1 (F),
// so that the two differ for any seed. Drawing costs proj_len·S_k Gaussians (more than the
// attention itself at proj_len = 256): a plan does it once.
struct Projections {
  std::vector<float> e_storage, f_storage;
  MatrixView<const float> e, f;
};

std::vector<float> copy_or_draw(const MatrixView<const float>& matrix, std::int64_t proj_len,
                                std::int64_t seq_k, std::uint64_t seed) {
  if (!matrix.given()) return linformer_random_projection(proj_len, seq_k, seed);
  std::vector<float> m = checked_vector<float>(
      checked_product({proj_len, seq_k}, "spec.proj_len x S_k"), "spec.e / spec.f copy");
  for (std::int64_t r = 0; r < proj_len; ++r) {
    std::copy(matrix.row(r), matrix.row(r) + seq_k, m.begin() + r * seq_k);
  }
  return m;
}

Projections projections(const LinformerSpec& spec, std::int64_t seq_k) {
  Projections p;
  p.e_storage = copy_or_draw(spec.e, spec.proj_len, seq_k, spec.seed);
  p.f_storage = copy_or_draw(spec.f, spec.proj_len, seq_k, spec.seed + 1);
  p.e = {p.e_storage.data(), spec.proj_len, seq_k, seq_k};
  p.f = {p.f_storage.data(), spec.proj_len, seq_k, seq_k};
  return p;
}

// Rows that are not contiguous floats at a stride >= their length are copied first; with RoPE
// the keys are rotated on that copy.
bool needs_gather(const ConstTensor& t) { return t.strides[3] != 1 || t.strides[2] < t.shape[3]; }

// dst [p, cols] = proj[:, :len] · rows[:len] of one (batch, kv head) slice [S_k, cols], each
// row j rotated at its key position first when `rope` is given. `gather` holds S_k · cols
// floats when the slice needs_gather or is rotated; `pack` is the GEMM's packing scratch.
void project(const MatrixView<const float>& proj, const ConstTensor& t, std::int64_t b,
             std::int64_t h, std::int64_t len, const RopeTables* rope, float* gather,
             std::span<float> pack, float* dst) {
  const std::int64_t cols = t.shape[3];
  const float* src = t.ptr(b, h, 0);
  std::int64_t ld = t.strides[2];
  if (rope != nullptr) {
    const RopeRows& rows = rope->rows();
    for (std::int64_t j = 0; j < len; ++j) {
      rotate_row_at(t.ptr(b, h, j), t.strides[3], cols, 1.0f, *rope, rows, RopeSide::kKey, j,
                    gather + j * cols);
    }
    src = gather;
    ld = cols;
  } else if (needs_gather(t)) {
    for (std::int64_t j = 0; j < len; ++j) {
      for (std::int64_t c = 0; c < cols; ++c) gather[j * cols + c] = t.at(b, h, j, c);
    }
    src = gather;
    ld = cols;
  }
  sgemm(Transpose::kNo, Transpose::kNo, proj.rows, cols, len, 1.0f, proj.data, proj.row_stride, src,
        ld, 0.0f, dst, cols, /*threads=*/1, pack);
}

class LinformerVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kLinformer; }

  void check(const Problem& p, const VariantSpec& spec) const override {
    refuse_alibi(p, "linformer", "a projected key mixes every position, so it has no distance");
    const auto& s = std::get<LinformerSpec>(spec);
    if (p.mask.causal) {
      unsupported("mask.causal",
                  "projecting along the sequence mixes future keys into every "
                  "projected key");
    }
    if (p.mask.keep)
      unsupported("mask.keep", "the mask is over S_k keys, attention is over proj_len");
    if (p.mask.bias)
      unsupported("mask.bias", "the bias is over S_k keys, attention is over proj_len");
    if (p.weights) {
      unsupported("weights",
                  "its weights are [B, H, S_q, proj_len], not the public [B, H, S_q, S_k]");
    }
    if (s.proj_len < 1 || s.proj_len > kMaxProjLen) {
      fail("spec.proj_len", "in [1, " + str(kMaxProjLen) + "]", str(s.proj_len));
    }
    if (s.e.given()) check_projection("spec.e", s.e, s.proj_len, p.seq_k());
    if (s.f.given()) check_projection("spec.f", s.f, s.proj_len, p.seq_k());
  }

  // FLOPs: 2·k·L·(D + D_v) per (batch, kv head) for the two projections over the L valid keys,
  // then dense attention over k keys: 2·S_q·k·(D + D_v) per (batch, query head).
  // Bytes: q, k, v, E, F read once, out written once, the projected K', V' written and read.
  Cost cost(const Problem& p, const VariantSpec& spec) const override {
    const double k = static_cast<double>(std::get<LinformerSpec>(spec).proj_len);
    const double d = static_cast<double>(p.dim() + p.dim_v());
    double keys = 0;
    for (std::int64_t b = 0; b < p.batch(); ++b) keys += static_cast<double>(p.key_length(b));
    const double queries = static_cast<double>(p.batch() * p.heads_q() * p.seq_q());
    const double kv_heads = static_cast<double>(p.batch() * p.heads_kv());
    Cost c;
    c.flops = 2.0 * k * keys * static_cast<double>(p.heads_kv()) * d + 2.0 * queries * k * d;
    c.bytes = 4.0 * (queries * d + kv_heads * static_cast<double>(p.seq_k()) * d +
                     2.0 * k * static_cast<double>(p.seq_k()) + 2.0 * kv_heads * k * d);
    return c;
  }

  void run(const Problem& p, const VariantSpec& spec) const override {
    const auto& s = std::get<LinformerSpec>(spec);
    const AllKeys keys(s.proj_len);
    const std::shared_ptr<const PositionalTables> queries = queries_of(p);
    run_projected(p, projections(s, p.seq_k()), keys, queries);
  }

  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(projections(std::get<LinformerSpec>(spec), p.seq_k()),
                                      queries_of(p));
  }

 private:
  // A plan keeps the projections, the projected keys' structure (with the dense kernel's
  // tables) and the queries-only RoPE tables, so a run builds none of them.
  class Prepared final : public PreparedVariant {
   public:
    Prepared(Projections proj, std::shared_ptr<const PositionalTables> queries)
        : proj_(std::move(proj)), keys_(proj_.e.rows), queries_(std::move(queries)) {}
    void run(const Problem& p) const override { run_projected(p, proj_, keys_, queries_); }
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      return scratch_bytes(planned, proj_.e.rows, keys_, queries_);
    }

   private:
    Projections proj_;
    AllKeys keys_;
    std::shared_ptr<const PositionalTables> queries_;
  };

  // With RoPE the keys are rotated before projecting and the dense kernel rotates the queries.
  static std::shared_ptr<const PositionalTables> queries_of(const Problem& p) {
    return rope_of(p.positional.get()) != nullptr ? queries_only(*p.positional) : nullptr;
  }

  // The run's own scratch, carved in this order from one range (ScratchArena): the projected
  // keys and values, then one row copy and one GEMM packing scratch per thread.
  struct Scratch {
    float* kp = nullptr;
    float* vp = nullptr;
    float* gathers = nullptr;
    std::int64_t gather_floats = 0;
    float* packs = nullptr;
    std::size_t pack_floats = 0;  // a whole number of 64-byte lines
    int team = 1;
  };
  // any_layout: count (and carve) the row copies even where p's views need none, as for a
  // view of any strides: a plan's query cannot know the run's views, so a workspace of
  // qkv_workspace_bytes() serves every run.
  static Scratch carve(const Problem& p, std::int64_t k, bool any_layout, ScratchArena& arena) {
    const std::int64_t tasks = p.batch() * p.heads_kv();
    Scratch s;
    // Below ~1 MFLOP of projection a thread team costs more than it saves.
    const bool parallel =
        tasks > 1 && 2.0 * static_cast<double>(k * p.seq_k() * tasks * (p.dim() + p.dim_v())) >=
                         kMinParallelFlops;
    s.team = parallel ? static_cast<int>(std::min<std::int64_t>(p.threads, tasks)) : 1;
    s.gather_floats =
        any_layout || needs_gather(p.k) || needs_gather(p.v) || rope_of(p.positional.get())
            ? checked_product({p.seq_k(), std::max(p.dim(), p.dim_v())}, "S_k x D (row copy)")
            : 0;
    s.kp = arena.take<float>(
        checked_product({tasks, k, p.dim()}, "projected keys (B x H_kv x proj_len x D)"));
    s.vp = arena.take<float>(
        checked_product({tasks, k, p.dim_v()}, "projected values (B x H_kv x proj_len x D_v)"));
    s.gathers = arena.take<float>(
        checked_product({s.team, s.gather_floats}, "threads x S_k x D (row copies)"));
    // Every projection (k x S_k by S_k x D or D_v, at most) fits one pack.
    s.pack_floats = sgemm_pack_floats(k, std::max(p.dim(), p.dim_v()), p.seq_k());
    s.packs = arena.take<float>(
        checked_product({s.team, static_cast<std::int64_t>(s.pack_floats)}, "GEMM packing"));
    return s;
  }

  // The dense problem over the projected keys (all valid: padding was applied before
  // projecting); kp and vp may be null for a count.
  static Problem projected_problem(const Problem& p, std::int64_t k, const float* kp,
                                   const float* vp,
                                   const std::shared_ptr<const PositionalTables>& queries) {
    Problem projected = p;
    projected.workspace = {};
    projected.k = bhsd<const float>(kp, p.batch(), p.heads_kv(), k, p.dim());
    projected.v = bhsd<const float>(vp, p.batch(), p.heads_kv(), k, p.dim_v());
    projected.mask = {};
    if (queries != nullptr) projected.positional = queries;
    return projected;
  }

  // The dense kernel's scratch over the projected keys, after the run's own part.
  static std::size_t dense_bytes(const Problem& p, std::int64_t k, const AllKeys& keys,
                                 const std::shared_ptr<const PositionalTables>& queries) {
    return softmax_workspace_bytes(projected_problem(p, k, nullptr, nullptr, queries), keys);
  }

  // What a run in a workspace carves: its own part for any views, then the dense kernel's.
  static std::size_t scratch_bytes(const Problem& p, std::int64_t k, const AllKeys& keys,
                                   const std::shared_ptr<const PositionalTables>& queries) {
    ScratchArena count;
    carve(p, k, /*any_layout=*/true, count);
    return count.used() + dense_bytes(p, k, keys, queries);
  }

  static void run_projected(const Problem& p, const Projections& proj, const AllKeys& keys,
                            const std::shared_ptr<const PositionalTables>& queries) {
    const std::int64_t k = proj.e.rows, heads = p.heads_kv(), tasks = p.batch() * heads;
    const bool given = !p.workspace.empty();
    ScratchArena count;
    carve(p, k, given, count);
    // Every allocation happens here, outside the region (an exception may not leave one): in
    // the caller's workspace (checked, whole, before anything is written), or one of our own
    // for the projections while the dense kernel allocates its own scratch.
    // With a workspace, `count` is scratch_bytes()'s own part (any_layout).
    const RunScratch scratch(
        p.workspace, given ? count.used() + dense_bytes(p, k, keys, queries) : 0, count.used(),
        "AttentionPlan::qkv_workspace_bytes() (Linformer: projected K and "
        "V, row copies, GEMM packing and the dense kernel's scratch)");
    ScratchArena arena(scratch.data(), scratch.size());
    const Scratch s = carve(p, k, given, arena);
    const RopeTables* rope = rope_of(p.positional.get());
    auto task = [&](float* gather, std::span<float> pack, std::int64_t t) {
      const std::int64_t b = t / heads, h = t % heads, len = p.key_length(b);
      project(proj.e, p.k, b, h, len, rope, gather, pack, s.kp + t * k * p.dim());
      project(proj.f, p.v, b, h, len, nullptr, gather, pack, s.vp + t * k * p.dim_v());
    };
    // One thread (or a run inside a caller's parallel region) runs plain loops: libgomp
    // allocates a team for every region it enters.
    ForEachTask<true>(tasks, s.team, [&](std::int64_t t, int thread) {
      task(s.gathers + thread * s.gather_floats,
           std::span<float>(s.packs + thread * s.pack_floats, s.pack_floats), t);
    });
    Problem projected = projected_problem(p, k, s.kp, s.vp, queries);
    if (given) projected.workspace = scratch.bytes().subspan(count.used());
    softmax_forward(projected, keys);
  }
};

}  // namespace

const AttentionVariant& linformer_variant() {
  static const LinformerVariant instance;
  return instance;
}

}  // namespace seqattn::detail
