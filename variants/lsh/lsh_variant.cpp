// Reformer's LSH attention (LshSpec in seqattn/variant_specs.hpp): the spec checked and
// resolved against the shape (bucket count, rotations copied or drawn once per plan), then
// lsh_forward (lsh_rounds.cpp) runs the rounds on the tile kernel.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "seqattn/attention.hpp"
#include "src/runtime/checked_size.hpp"
#include "src/runtime/path_counts.hpp"
#include "src/runtime/positional.hpp"
#include "src/runtime/validate.hpp"
#include "variants/lsh/lsh_rounds.hpp"
#include "variants/lsh/lsh_windows.hpp"
#include "variants/registry.hpp"

namespace seqattn::detail {
namespace {

constexpr std::int64_t kMaxHashes = 64;
constexpr std::int64_t kMaxBuckets = 65536;
constexpr std::int64_t kMaxChunk = std::int64_t{1} << 20;
constexpr std::int64_t kAutoBucketCap = 128;

[[noreturn]] void unsupported(const std::string& option, const std::string& why) {
  refuse_option("lsh", option, why, "dense or sliding-window");
}

// Auto: trax's 2·max(1, S / c), capped (the cap replaces trax's factorised hashing).
std::int64_t resolved_buckets(const LshSpec& s, std::int64_t seq) {
  if (s.rotations.given()) return 2 * s.rotations.cols;
  if (s.buckets != 0) return s.buckets;
  return std::min(kAutoBucketCap, 2 * std::max<std::int64_t>(1, seq / s.chunk_length));
}

void check_rotations(const LshSpec& s, std::int64_t dim) {
  const MatrixView<const float>& r = s.rotations;
  const std::string rows = str(s.hashes) + " x " + str(dim) + " (hashes x D)";
  auto bad = [](const std::string& expected, const std::string& actual) {
    throw Error(ErrorKind::kInvalidArgument, "lsh.rotations", expected, actual,
                "pass R as [hashes * D, buckets / 2] (row r*D + d holds R[r, d, :]), or leave it "
                "empty to draw it from the seed");
  };
  if (r.data == nullptr) bad("a non-null pointer", "nullptr");
  if (r.rows != s.hashes * dim) bad("rows = " + rows, "rows = " + str(r.rows));
  if (r.cols < 1 || r.cols > kMaxBuckets / 2)
    bad("cols = buckets / 2 in [1, " + str(kMaxBuckets / 2) + "]", "cols = " + str(r.cols));
  if (s.buckets != 0 && s.buckets != 2 * r.cols) {
    bad("cols = buckets / 2 = " + str(s.buckets / 2) + " (spec.buckets = " + str(s.buckets) + ")",
        "cols = " + str(r.cols));
  }
  if (r.row_stride < r.cols) bad("row_stride >= cols = " + str(r.cols), str(r.row_stride));
}

void check_spec(const LshSpec& s, std::int64_t dim) {
  if (s.hashes < 1 || s.hashes > kMaxHashes)
    fail("lsh.hashes", "in [1, " + str(kMaxHashes) + "]", str(s.hashes));
  if (s.buckets != 0 && (s.buckets < 2 || s.buckets > kMaxBuckets || s.buckets % 2 != 0)) {
    fail("lsh.buckets", "0 (auto) or an even number in [2, " + str(kMaxBuckets) + "]",
         str(s.buckets), "a bucket is the argmax over [x·R, -x·R], so buckets come in pairs");
  }
  if (s.chunk_length < 1 || s.chunk_length > kMaxChunk)
    fail("lsh.chunk_length", "in [1, " + str(kMaxChunk) + "]", str(s.chunk_length));
  if (s.rotations.given()) check_rotations(s, dim);
}

// The rotations as used: the caller's rows copied, or drawn from the seed.
struct Rotations {
  std::vector<float> storage;
  LshConfig config;
};

Rotations resolve(const LshSpec& s, std::int64_t seq, std::int64_t dim) {
  Rotations r;
  r.config.hashes = s.hashes;
  r.config.buckets = resolved_buckets(s, seq);
  r.config.chunk = s.chunk_length;
  r.config.shared = s.shared_qk;
  const std::int64_t m = r.config.buckets / 2;
  if (s.rotations.given()) {
    r.storage = checked_vector<float>(checked_product({s.hashes, dim, m}, "lsh.rotations"),
                                      "lsh.rotations copy");
    for (std::int64_t row = 0; row < s.hashes * dim; ++row)
      std::copy_n(s.rotations.row(row), m, r.storage.begin() + row * m);
  } else {
    r.storage = lsh_random_rotations(s.hashes, dim, r.config.buckets, s.seed);
  }
  r.config.rotations = {r.storage.data(), s.hashes * dim, m, m};
  return r;
}

class LshVariant final : public AttentionVariant {
 public:
  Variant id() const override { return Variant::kLsh; }

  void check(const Problem& p, const VariantSpec& spec) const override {
    const auto& s = std::get<LshSpec>(spec);
    check_spec(s, p.dim());
    if (p.seq_q() != p.seq_k()) {
      unsupported("S_q != S_k",
                  "queries and keys are hashed and sorted along the same positions "
                  "(self-attention); S_q = " +
                      str(p.seq_q()) + ", S_k = " + str(p.seq_k()));
    }
    if (p.seq_k() > std::numeric_limits<std::int32_t>::max()) {
      fail("k.shape[2]", "<= 2^31 - 1 (positions are sorted as 32-bit integers)", str(p.seq_k()));
    }
    if (s.shared_qk && p.heads_q() != p.heads_kv()) {
      unsupported("lsh.qk = shared with H_q != H_kv",
                  "shared-QK keys are the queries themselves, one head each; H_q = " +
                      str(p.heads_q()) + ", H_kv = " + str(p.heads_kv()) + " (use qk=separate)");
    }
    if (p.mask.keep) unsupported("mask.keep", "buckets decide which keys a query sees");
    if (p.mask.bias) unsupported("mask.bias", "buckets decide which keys a query sees");
    if (p.weights) unsupported("weights", "a key is weighed once per round holding it");
    if (rope_of(p.positional.get()) != nullptr)
      unsupported("options.rope", "positions are hashed before attention, not rotated");
    refuse_alibi(p, "lsh", "the sorted slots carry no distance");
  }

  // FLOPs (the definition): B·H_q·hashes·(L·D·buckets + 2(D + D_v)·Σ_t |chunk t|·
  // |window t|) over each batch entry's L valid positions; causal and self are not subtracted.
  // Bytes: q, k and v read and out written once per round.
  Cost cost(const Problem& p, const VariantSpec& spec) const override {
    const auto& s = std::get<LshSpec>(spec);
    const double buckets = static_cast<double>(resolved_buckets(s, p.seq_k()));
    const double d = static_cast<double>(p.dim()), dv = static_cast<double>(p.dim_v());
    double per_head = 0, positions = 0;
    for (std::int64_t b = 0; b < p.batch(); ++b) {
      const std::int64_t len = p.key_length(b), c = s.chunk_length, n = (len + c - 1) / c;
      double pairs = 0;
      for (std::int64_t t = 0; t < n; ++t) {
        const std::int64_t own = std::min(c, len - t * c);
        const std::int64_t before = n == 1 ? 0 : std::min(c, len - ((t - 1 + n) % n) * c);
        pairs += static_cast<double>(own) * static_cast<double>(n == 2 ? len : own + before);
      }
      per_head += static_cast<double>(len) * d * buckets + 2.0 * (d + dv) * pairs;
      positions += static_cast<double>(len);
    }
    const double heads = static_cast<double>(p.heads_q()), hashes = static_cast<double>(s.hashes);
    Cost cost;
    cost.flops = heads * hashes * per_head;
    cost.bytes = 4.0 * hashes * positions * heads * (2.0 * d + 2.0 * dv);
    return cost;
  }

  // Only through a plan (attend() makes one): the plan's part, once.
  void run(const Problem& p, const VariantSpec& spec) const override { prepare(p, spec)->run(p); }

  std::shared_ptr<const PreparedVariant> prepare(const Problem& p,
                                                 const VariantSpec& spec) const override {
    return std::make_shared<Prepared>(p, resolve(std::get<LshSpec>(spec), p.seq_k(), p.dim()));
  }

 private:
  // The plan keeps the rotations, the calls' windows (each with the kernel's tables) and their
  // workspace size, counted for the SIMD target and compute path of the plan, and on first
  // need for another (a test forcing a target, bf16 products forced onto the tile path): a
  // call short of its workspace would throw inside the pairs' thread team.
  class Prepared final : public PreparedVariant {
   public:
    Prepared(const Problem& planned, Rotations r)
        : r_(std::move(r)), windows_(r_.config.chunk, WindowStore::capacity_for(planned.batch())) {
      calls_bytes(planned);
    }
    void run(const Problem& p) const override {
      lsh_forward(p, config(), windows_, calls_bytes(p));
    }
    std::optional<std::size_t> workspace_bytes(const Problem& planned) const override {
      return lsh_workspace_bytes(planned, config(), calls_bytes(planned));
    }

   private:
    // The rotations as kept: the moved vector kept its buffer, but the view is rebuilt.
    LshConfig config() const {
      LshConfig c = r_.config;
      c.rotations.data = r_.storage.data();
      return c;
    }
    std::size_t calls_bytes(const Problem& p) const {
      return calls_.get(p.compute_path, [&] { return lsh_calls_bytes(p, config()); });
    }

    Rotations r_;
    WindowStore windows_;
    PathCounts<std::size_t> calls_;
  };
};

}  // namespace

const AttentionVariant& lsh_variant() {
  static const LshVariant instance;
  return instance;
}

}  // namespace seqattn::detail
