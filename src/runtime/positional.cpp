// Validation and tables of the positional encodings (positional.hpp), and the public helpers
// of seqattn/positional.hpp.
#include "src/runtime/positional.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

using detail::fail;

using detail::str;

// Positions (offsets included) up to 2^40: exact in double, where the angles are computed, and
// far from overflowing when an offset is added.
constexpr std::int64_t kMaxPosition = std::int64_t{1} << 40;

void check_position(const std::string& name, std::int64_t value) {
  if (value < 0 || value > kMaxPosition) {
    fail(name, "in [0, 2^40]", str(value));
  }
}

void check_rope(const RotaryEmbedding& r, std::int64_t dim, const std::string& name) {
  if (!std::isfinite(r.theta) || r.theta <= 0) {
    fail(name + ".theta", "a finite number > 0 (10000 in most models)", std::to_string(r.theta));
  }
  if (!std::isfinite(r.linear_scaling) || r.linear_scaling <= 0) {
    fail(name + ".linear_scaling", "a finite number > 0 (1 = no scaling)",
         std::to_string(r.linear_scaling));
  }
  const std::int64_t dims = r.dims == 0 ? dim : r.dims;
  if (dims < 2 || dims > dim || dims % 2 != 0) {
    fail(name + ".dims", "an even number in [2, D = " + str(dim) + "], or 0 for all D",
         str(r.dims) + (r.dims == 0 ? " (all D, which is odd)" : ""));
  }
  check_position(name + ".offset", r.offset);
}

void check_positions(const std::string& name, const std::vector<std::int64_t>& positions,
                     std::int64_t rows, const char* what) {
  if (positions.empty()) return;
  if (static_cast<std::int64_t>(positions.size()) != rows) {
    fail(name + ".size()", str(rows) + " (one per " + what + " row) or 0 (default positions)",
         str(static_cast<std::int64_t>(positions.size())));
  }
  for (std::size_t r = 0; r < positions.size(); ++r) {
    check_position(name + "[" + std::to_string(r) + "]", positions[r]);
  }
}

void rope_base(detail::RopeTables& t, const RotaryEmbedding& r, std::int64_t dim,
               std::int64_t seq_q, std::int64_t seq_k) {
  t.options = r;
  t.seq_q = seq_q;
  t.seq_k = seq_k;
  t.dims = r.dims == 0 ? dim : r.dims;
  t.half = t.dims / 2;
  t.layout = r.layout;
  t.frequencies.resize(static_cast<std::size_t>(t.half));
  for (std::int64_t p = 0; p < t.half; ++p) {
    t.frequencies[static_cast<std::size_t>(p)] =
        std::pow(r.theta, -2.0 * static_cast<double>(p) / static_cast<double>(t.dims)) /
        r.linear_scaling;
  }
}

// cos/sin [positions, half] of pair p at offset + positions[r], one by one.
void explicit_rows(const detail::RopeTables& t, std::int64_t offset,
                   const std::vector<std::int64_t>& positions, std::vector<float>& cos,
                   std::vector<float>& sin) {
  const auto rows = static_cast<std::int64_t>(positions.size());
  cos.resize(static_cast<std::size_t>(rows * t.half));
  sin.resize(cos.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    detail::rope_angles(t, offset + positions[static_cast<std::size_t>(r)], cos.data() + r * t.half,
                        sin.data() + r * t.half);
  }
}

// The two-level tables of the default positions (see RopeRows): indices 0.. cover query
// rows at offset + S_k - S_q + i and key rows at offset + j (queries may start before the
// keys when S_q > S_k).
void default_rows(const detail::RopeTables& t, detail::RopeRows& rows) {
  constexpr std::int64_t kFine = detail::RopeRows::kFine;
  const std::int64_t q_start = t.seq_k - t.seq_q;
  const std::int64_t lowest = std::min<std::int64_t>(0, q_start);
  rows.q_first = q_start - lowest;
  rows.k_first = -lowest;
  const std::int64_t span = std::max(rows.q_first + t.seq_q, rows.k_first + t.seq_k);
  const std::int64_t coarse = std::max<std::int64_t>(1, (span + kFine - 1) / kFine);
  const auto size = [&](std::int64_t n) { return static_cast<std::size_t>(n * t.half); };
  rows.coarse_cos.resize(size(coarse));
  rows.coarse_sin.resize(size(coarse));
  rows.fine_cos.resize(size(kFine));
  rows.fine_sin.resize(size(kFine));
  const std::int64_t base = t.options.offset + lowest;
  for (std::int64_t h = 0; h < coarse; ++h) {
    detail::rope_angles(t, base + h * kFine, rows.coarse_cos.data() + h * t.half,
                        rows.coarse_sin.data() + h * t.half);
  }
  for (std::int64_t l = 0; l < kFine; ++l) {
    detail::rope_angles(t, l, rows.fine_cos.data() + l * t.half, rows.fine_sin.data() + l * t.half);
  }
}

std::vector<float> checked_slopes(const Alibi& a, std::int64_t heads) {
  if (a.slopes.empty()) return alibi_slopes(heads);
  if (static_cast<std::int64_t>(a.slopes.size()) != heads) {
    fail("options.alibi.slopes.size()", str(heads) + " (one per query head) or 0 (the standard)",
         str(static_cast<std::int64_t>(a.slopes.size())));
  }
  for (std::size_t h = 0; h < a.slopes.size(); ++h) {
    if (!std::isfinite(a.slopes[h])) {
      fail("options.alibi.slopes[" + std::to_string(h) + "]", "a finite number",
           std::to_string(a.slopes[h]));
    }
  }
  return a.slopes;
}

}  // namespace

std::vector<float> alibi_slopes(std::int64_t heads) {
  if (heads < 1 || heads > (std::int64_t{1} << 20)) fail("heads", "in [1, 2^20]", str(heads));
  std::int64_t n = 1;
  while (n * 2 <= heads) n *= 2;
  std::vector<float> slopes;
  slopes.reserve(static_cast<std::size_t>(heads));
  for (std::int64_t k = 1; k <= n; ++k) {
    slopes.push_back(static_cast<float>(std::exp2(-8.0 * static_cast<double>(k) / n)));
  }
  for (std::int64_t k = 1; k <= heads - n; ++k) {
    slopes.push_back(static_cast<float>(std::exp2(-4.0 * static_cast<double>(2 * k - 1) / n)));
  }
  return slopes;
}

void add_sinusoidal_positions(const Tensor& x, std::int64_t offset) {
  detail::check_view("x", x.data, x.shape, x.strides, sizeof(float));
  if (x.shape[1] != 1) {
    fail("x.shape[1]", "1 (x is [B, 1, S, d_model])", str(x.shape[1]));
  }
  detail::check_no_self_overlap("x", x.shape, x.strides);
  check_position("offset", offset);
  const std::int64_t d_model = x.shape[3];
  for (std::int64_t s = 0; s < x.shape[2]; ++s) {
    const auto pos = static_cast<double>(offset + s);
    for (std::int64_t c = 0; c < d_model; ++c) {
      const double angle =
          pos * std::pow(10000.0, -static_cast<double>(c - c % 2) / static_cast<double>(d_model));
      const auto pe = static_cast<float>(c % 2 == 0 ? std::sin(angle) : std::cos(angle));
      for (std::int64_t b = 0; b < x.shape[0]; ++b) x.at(b, 0, s, c) += pe;
    }
  }
}

}  // namespace seqattn

namespace seqattn::detail {

void rope_angles(const RopeTables& t, std::int64_t position, float* cos, float* sin) {
  const auto pos = static_cast<double>(position);
  for (std::int64_t p = 0; p < t.half; ++p) {
    const double angle = pos * t.frequencies[static_cast<std::size_t>(p)];
    cos[p] = static_cast<float>(std::cos(angle));
    sin[p] = static_cast<float>(std::sin(angle));
  }
}

const RopeRows& RopeTables::rows() const {
  std::call_once(rows_once_, [this] {
    const RotaryEmbedding& r = options;
    explicit_rows(*this, r.offset, r.q_positions, rows_.q_cos, rows_.q_sin);
    explicit_rows(*this, r.offset, r.k_positions, rows_.k_cos, rows_.k_sin);
    if (r.q_positions.empty() || r.k_positions.empty()) default_rows(*this, rows_);
  });
  return rows_;
}

void init_cache_rope(RopeTables& t, const RotaryEmbedding& r, std::int64_t dim) {
  check_rope(r, dim, "shape.rope");
  if (!r.q_positions.empty() || !r.k_positions.empty()) {
    fail("shape.rope.q_positions / k_positions", "empty", "explicit positions",
         "a cache rotates each key at offset + its index");
  }
  rope_base(t, r, dim, 0, 0);
}

bool same_rotation(const RotaryEmbedding& a, const RotaryEmbedding& b, std::int64_t dim) {
  const auto dims = [dim](const RotaryEmbedding& r) { return r.dims == 0 ? dim : r.dims; };
  return a.theta == b.theta && dims(a) == dims(b) && a.layout == b.layout && a.offset == b.offset &&
         a.linear_scaling == b.linear_scaling;
}

void check_positional_over_cache(const PositionalTables* tables) {
  if (tables == nullptr || !tables->rope) return;
  const RotaryEmbedding& r = tables->rope->options;
  if (!r.q_positions.empty() || !r.k_positions.empty()) {
    fail("options.rope.q_positions / k_positions", "empty over a KvCache", "explicit positions",
         "a cache rotates each key at its index when it is appended, and each query at "
         "offset + L - S_q + i");
  }
}

namespace {

// x rotated by `rows`' cos/sin into a contiguous copy of the same shape.
ConstTensor rotated_copy(const ConstTensor& x, const RopeTables& t, const RopeRows& rows,
                         RopeSide side, std::span<float> store) {
  const auto [batch, heads, seq, dim] = x.shape;
  const std::int64_t elements = batch * heads * seq * dim;
  if (store.size() < static_cast<std::size_t>(elements)) {  // a caller's miscount, not input
    fail("rotated copy store", ">= " + std::to_string(elements) + " floats",
         std::to_string(store.size()));
  }
  ConstTensor copy{store.data(), x.shape, {heads * seq * dim, seq * dim, dim, 1}};
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t s = 0; s < seq; ++s) {
        rotate_row_at(x.ptr(b, h, s), x.strides[3], dim, 1.0f, t, rows, side, s,
                      store.data() + ((b * heads + h) * seq + s) * dim);
      }
    }
  }
  return copy;
}

}  // namespace

void refuse_alibi(const Problem& p, std::string_view variant, std::string_view why) {
  if (p.positional == nullptr || !p.positional->has_alibi()) return;
  const std::string name(variant);
  throw Error(ErrorKind::kUnsupported, "options.alibi", "unset for the " + name + " variant",
              "an Alibi",
              "variant '" + name + "' cannot honour ALiBi: " + std::string(why) +
                  "; use dense or sliding-window attention, or RoPE (options.rope)");
}

std::shared_ptr<const PositionalTables> queries_only(const PositionalTables& t) {
  auto q = std::make_shared<PositionalTables>();
  q->rope = t.rope;
  q->keys_rotated = true;
  return q;
}

Problem with_rotated_inputs(const Problem& p, std::span<float> q_store, std::span<float> k_store) {
  const RopeTables* rope = rope_of(p.positional.get());
  if (rope == nullptr) return p;
  Problem r = p;
  const RopeRows& rows = rope->rows();
  r.q = rotated_copy(p.q, *rope, rows, RopeSide::kQuery, q_store);
  if (!p.positional->keys_rotated) r.k = rotated_copy(p.k, *rope, rows, RopeSide::kKey, k_store);
  r.positional = nullptr;
  return r;
}

std::shared_ptr<const PositionalTables> make_positional(const AttentionOptions& options,
                                                        const Problem& p) {
  if (!options.rope && !options.alibi) return nullptr;
  auto tables = std::make_shared<PositionalTables>();
  if (options.rope) {
    const RotaryEmbedding& r = *options.rope;
    check_rope(r, p.dim(), "options.rope");
    check_positions("options.rope.q_positions", r.q_positions, p.seq_q(), "query");
    check_positions("options.rope.k_positions", r.k_positions, p.seq_k(), "key");
    auto rope = std::make_shared<RopeTables>();
    rope_base(*rope, r, p.dim(), p.seq_q(), p.seq_k());
    tables->rope = std::move(rope);
  }
  if (options.alibi) {
    tables->alibi_slopes = checked_slopes(*options.alibi, p.heads_q());
    const AlibiForm form = options.alibi->form.value_or(
        options.mask.causal ? AlibiForm::kCausal : AlibiForm::kSymmetric);
    tables->alibi_symmetric = form == AlibiForm::kSymmetric;
  }
  return tables;
}

}  // namespace seqattn::detail
