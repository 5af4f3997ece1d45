// Linformer: K' = E·K and V' = F·V along the sequence (E, F [proj_len, >= S_k]), then exact
// dense attention over the proj_len projected keys through the dense variant's own kernel.
// RoPE rotates each key at its position on its way into the projection (the copy the GEMM
// reads) and each query in the dense kernel: score (i, r) = (R_i q_i) · Σ_j E[r, j] R_j k_j.
#include <omp.h>

#include <algorithm>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "seqattn/attention.hpp"
#include "src/gemm/gemm.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
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
// floats when the slice needs_gather or is rotated.
void project(const MatrixView<const float>& proj, const ConstTensor& t, std::int64_t b,
             std::int64_t h, std::int64_t len, const RopeTables* rope, float* gather, float* dst) {
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
        ld, 0.0f, dst, cols, /*threads=*/1);
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
    run_projected(p, projections(s, p.seq_k()));
  }

  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(projections(std::get<LinformerSpec>(spec), p.seq_k()));
  }

 private:
  class Prepared final : public PreparedVariant {
   public:
    explicit Prepared(Projections proj) : proj_(std::move(proj)) {}
    void run(const Problem& p) const override { run_projected(p, proj_); }

   private:
    Projections proj_;
  };

  static void run_projected(const Problem& p, const Projections& proj) {
    const std::int64_t k = proj.e.rows, heads = p.heads_kv(), tasks = p.batch() * heads;
    std::vector<float> kp = checked_vector<float>(
        checked_product({tasks, k, p.dim()}, "projected keys (B x H_kv x proj_len x D)"), "k");
    std::vector<float> vp = checked_vector<float>(
        checked_product({tasks, k, p.dim_v()}, "projected values (B x H_kv x proj_len x D_v)"),
        "v");
    // Below ~1 MFLOP of projection a thread team costs more than it saves.
    const bool parallel =
        tasks > 1 && 2.0 * static_cast<double>(k * p.seq_k() * tasks * (p.dim() + p.dim_v())) >=
                         kMinParallelFlops;
    const int team = parallel ? static_cast<int>(std::min<std::int64_t>(p.threads, tasks)) : 1;
    // Every allocation happens here, outside the region (an exception may not leave one).
    const RopeTables* rope = rope_of(p.positional.get());
    const std::int64_t gather_floats =
        needs_gather(p.k) || needs_gather(p.v) || rope != nullptr
            ? checked_product({p.seq_k(), std::max(p.dim(), p.dim_v())}, "S_k x D (row copy)")
            : 0;
    std::vector<float> gathers = checked_vector<float>(
        checked_product({team, gather_floats}, "threads x S_k x D (row copies)"), "k");
#pragma omp parallel num_threads(team) if (team > 1)
    {
      float* gather = gathers.data() + omp_get_thread_num() * gather_floats;
#pragma omp for schedule(dynamic, 1)
      for (std::int64_t t = 0; t < tasks; ++t) {
        const std::int64_t b = t / heads, h = t % heads, len = p.key_length(b);
        project(proj.e, p.k, b, h, len, rope, gather, kp.data() + t * k * p.dim());
        project(proj.f, p.v, b, h, len, nullptr, gather, vp.data() + t * k * p.dim_v());
      }
    }
    // The projected keys are all valid (padding was applied before projecting).
    Problem projected = p;
    projected.workspace = {};  // the caller's is for one top-level call
    projected.k = bhsd<const float>(kp.data(), p.batch(), heads, k, p.dim());
    projected.v = bhsd<const float>(vp.data(), p.batch(), heads, k, p.dim_v());
    projected.mask = {};
    // RoPE: the keys were rotated before projecting, the dense kernel rotates the queries.
    if (rope != nullptr) projected.positional = queries_only(*p.positional);
    const AttentionVariant& dense = dense_variant();
    dense.check(projected, DenseSpec{});
    dense.run(projected, DenseSpec{});
  }
};

}  // namespace

const AttentionVariant& linformer_variant() {
  static const LinformerVariant instance;
  return instance;
}

}  // namespace seqattn::detail
