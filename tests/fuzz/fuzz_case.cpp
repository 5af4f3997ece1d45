#include "fuzz_case.hpp"

#include <algorithm>
#include <iterator>

namespace seqattn::fuzz {
namespace {

// x + d without overflowing (the fuzzer's own arithmetic must be defined on wild extents).
std::int64_t nudged(std::int64_t x, std::int64_t d) {
  std::int64_t r = 0;
  return __builtin_add_overflow(x, d, &r) ? x : r;
}

DType fuzz_dtype(FuzzedDataProvider& fdp) {
  switch (fdp.ConsumeIntegralInRange<int>(0, 7)) {
    case 0:
      return DType::kBF16;
    case 1:
      return DType::kF16;
    default:
      return DType::kF32;
  }
}

// A value that is usually ordinary and sometimes zero, negative or not finite.
float fuzz_float(FuzzedDataProvider& fdp, float lo, float hi) {
  constexpr float kOdd[] = {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::infinity(), 1e30f};
  if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0)
    return kOdd[fdp.ConsumeIntegralInRange<int>(0, 4)];
  return fdp.ConsumeFloatingPointInRange<float>(lo, hi);
}

// The parameters of one row of the variant table, drawn wide enough to reach every refusal
// (negative windows, blocks and lengths) as well as the ordinary values; one overload per
// row, so a row added to the table without one does not compile (kVariantDraws below).
void fuzz_params(FuzzedDataProvider&, const Case&, DenseSpec&) {}

void fuzz_params(FuzzedDataProvider& fdp, const Case& c, SlidingWindowSpec& w) {
  w.left = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 30);
  w.right = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 30);
  const int globals = fdp.ConsumeIntegralInRange<int>(0, 3);
  for (int g = 0; g < globals; ++g) {
    w.global_tokens.push_back(
        fdp.ConsumeIntegralInRange<std::int64_t>(-1, std::clamp<std::int64_t>(c.seq_k, 0, 64)));
  }
}

void fuzz_params(FuzzedDataProvider& fdp, const Case&, LinearSpec& l) {
  l.feature_map = static_cast<FeatureMap>(fdp.ConsumeIntegralInRange<int>(0, 2));
  if (fdp.ConsumeBool()) l.num_features = fuzz_extent(fdp, 40);
  l.seed = fdp.ConsumeIntegral<std::uint8_t>();
  if (fdp.ConsumeBool()) l.epsilon = fuzz_float(fdp, 0.0f, 1e-2f);
}

void fuzz_params(FuzzedDataProvider& fdp, const Case&, LinformerSpec& l) {
  l.proj_len = fuzz_extent(fdp, 16);
  l.seed = fdp.ConsumeIntegral<std::uint8_t>();
}

void fuzz_params(FuzzedDataProvider& fdp, const Case&, HierarchicalSpec& h) {
  h.block = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 12);
  h.levels = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 6);
}

void fuzz_params(FuzzedDataProvider& fdp, const Case&, LshSpec& l) {
  l.hashes = fdp.ConsumeIntegralInRange<std::int64_t>(0, 5);
  l.buckets = 2 * fdp.ConsumeIntegralInRange<std::int64_t>(0, 6) - (fdp.ConsumeBool() ? 1 : 0);
  l.chunk_length = fdp.ConsumeIntegralInRange<std::int64_t>(0, 12);
  l.shared_qk = fdp.ConsumeBool();
  l.seed = fdp.ConsumeIntegral<std::uint8_t>();
}

template <class Spec>
VariantSpec fuzz_spec(FuzzedDataProvider& fdp, const Case& c) {
  Spec spec;
  fuzz_params(fdp, c, spec);
  return spec;
}

// One draw per row of the variant table, in its order.
constexpr VariantSpec (*kVariantDraws[])(FuzzedDataProvider&, const Case&) = {
#define SEQATTN_VARIANT(id, name, Spec, stem) &fuzz_spec<Spec>,
#include "seqattn/variant_list.inc"
};

// A row of the table, or (one draw in n + 1) the automatic choice.
VariantSpec fuzz_variant(FuzzedDataProvider& fdp, const Case& c) {
  constexpr size_t kRows = std::size(kVariantDraws);
  const size_t row = fdp.ConsumeIntegralInRange<size_t>(0, kRows);
  return row == kRows ? VariantSpec(AutoSpec{}) : kVariantDraws[row](fdp, c);
}

void fuzz_mask(FuzzedDataProvider& fdp, Case& c) {
  Mask& m = c.options.mask;
  m.causal = fdp.ConsumeBool();
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    const std::int64_t n =
        fdp.ConsumeIntegralInRange<int>(0, 7) == 0 ? 2 : std::clamp<std::int64_t>(c.batch, 0, 4);
    for (std::int64_t b = 0; b < n; ++b) {
      m.key_lengths.push_back(fdp.ConsumeIntegralInRange<std::int64_t>(
          -1, std::clamp<std::int64_t>(c.seq_k, 0, 64) + 1));
    }
  }
  const bool small = c.batch > 0 && c.batch <= 3 && c.heads_q > 0 && c.heads_q <= 9 &&
                     c.seq_q > 0 && c.seq_q <= 24 && c.seq_k > 0 && c.seq_k <= 40;
  if (!small) return;
  const std::int64_t mb = fdp.ConsumeBool() ? c.batch : 1, mh = fdp.ConsumeBool() ? c.heads_q : 1;
  const std::array<std::int64_t, 4> shape{mb, mh, c.seq_q, c.seq_k};
  const std::array<std::int64_t, 4> strides{mh * c.seq_q * c.seq_k, c.seq_q * c.seq_k, c.seq_k, 1};
  const std::uint32_t seed = fdp.ConsumeIntegral<std::uint32_t>();
  std::mt19937 gen(seed);
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    c.keep.resize(static_cast<std::size_t>(mb * mh * c.seq_q * c.seq_k));
    for (auto& x : c.keep) x = gen() % 4 != 0;
    m.keep = TensorView<const std::uint8_t>{c.keep.data(), shape, strides};
  }
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) {
    c.bias.resize(static_cast<std::size_t>(mb * mh * c.seq_q * c.seq_k));
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    for (auto& x : c.bias) x = dist(gen);
    m.bias = ConstTensor{c.bias.data(), shape, strides};
  }
}

// Positions for `rows` rows, sometimes one too few or too many, sometimes negative.
std::vector<std::int64_t> fuzz_positions(FuzzedDataProvider& fdp, std::int64_t rows) {
  std::vector<std::int64_t> p;
  const std::int64_t n =
      nudged(std::clamp<std::int64_t>(rows, 0, 64), fdp.ConsumeIntegralInRange<int>(0, 7) == 0);
  for (std::int64_t r = 0; r < n; ++r) p.push_back(fdp.ConsumeIntegralInRange(-1, 100000));
  return p;
}

// RoPE (one case in four) and ALiBi (one in six), with values that are sometimes invalid:
// θ <= 0 or not finite, odd or too many rotary dims, negative offsets, wrong slope counts.
void fuzz_positional(FuzzedDataProvider& fdp, Case& c) {
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    RotaryEmbedding r;
    if (fdp.ConsumeBool()) r.theta = fuzz_float(fdp, 1.0f, 1e5f);
    if (fdp.ConsumeBool()) r.dims = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 22);
    r.layout = fdp.ConsumeBool() ? RopeLayout::kHalves : RopeLayout::kInterleaved;
    if (fdp.ConsumeBool()) r.offset = fdp.ConsumeIntegralInRange<std::int64_t>(-1, 1 << 20);
    if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) r.linear_scaling = fuzz_float(fdp, 0.25f, 8);
    if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) {
      r.q_positions = fuzz_positions(fdp, c.seq_q);
      r.k_positions = fuzz_positions(fdp, c.seq_k);
    }
    c.options.rope = r;
  }
  if (fdp.ConsumeIntegralInRange<int>(0, 5) == 0) {
    Alibi a;
    if (fdp.ConsumeBool()) {
      const std::int64_t n = nudged(std::clamp<std::int64_t>(c.heads_q, 0, 16),
                                    fdp.ConsumeIntegralInRange<int>(0, 7) == 0);
      for (std::int64_t h = 0; h < n; ++h) a.slopes.push_back(fuzz_float(fdp, 0.0f, 2.0f));
    }
    const int form = fdp.ConsumeIntegralInRange<int>(0, 2);
    if (form > 0) a.form = form == 1 ? AlibiForm::kCausal : AlibiForm::kSymmetric;
    c.options.alibi = a;
  }
}

void fuzz_options(FuzzedDataProvider& fdp, Case& c) {
  c.options.variant = fuzz_variant(fdp, c);
  fuzz_mask(fdp, c);
  fuzz_positional(fdp, c);
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) c.options.scale = fuzz_float(fdp, 0.05f, 2.0f);
  constexpr int kWildThreads[] = {-1, 1 << 30, std::numeric_limits<int>::max(), 64};
  c.options.threads = fdp.ConsumeIntegralInRange<int>(0, 15) == 0
                          ? kWildThreads[fdp.ConsumeIntegralInRange<int>(0, 3)]
                          : fdp.ConsumeIntegralInRange<int>(0, 3);
}

std::array<std::int64_t, 4> maybe_perturbed(FuzzedDataProvider& fdp,
                                            std::array<std::int64_t, 4> shape) {
  if (fdp.ConsumeIntegralInRange<int>(0, 15) == 0) {
    std::int64_t& e = shape[fdp.ConsumeIntegralInRange<int>(0, 3)];
    e = nudged(e, fdp.ConsumeBool() ? 1 : -1);
  }
  return shape;
}

void fuzz_operands(FuzzedDataProvider& fdp, Case& c) {
  const std::array<std::int64_t, 4> qs = maybe_perturbed(fdp, {c.batch, c.heads_q, c.seq_q, c.dim});
  const std::array<std::int64_t, 4> ks =
      maybe_perturbed(fdp, {c.batch, c.heads_kv, c.seq_k, c.dim});
  const std::array<std::int64_t, 4> vs =
      maybe_perturbed(fdp, {c.batch, c.heads_kv, c.seq_k, c.dim_v});
  const std::array<std::int64_t, 4> os =
      maybe_perturbed(fdp, {c.batch, c.heads_q, c.seq_q, c.dim_v});
  const std::uint32_t seed = fdp.ConsumeIntegral<std::uint32_t>();
  const int special =
      fdp.ConsumeIntegralInRange<int>(0, 15) == 0 ? fdp.ConsumeIntegralInRange<int>(1, 3) : 0;
  const int which_special = fdp.ConsumeIntegralInRange<int>(0, 2);
  const auto input = [&](const std::array<std::int64_t, 4>& s, int index) {
    return Operand(fuzz_dtype(fdp), s, fuzz_strides(fdp, s, true), true, seed + index, 2.0f,
                   which_special == index ? special : 0);
  };
  c.q.emplace(input(qs, 0));
  c.k.emplace(input(ks, 1));
  c.v.emplace(input(vs, 2));
  c.out.emplace(fuzz_dtype(fdp), os,
                fuzz_strides(fdp, os, fdp.ConsumeIntegralInRange<int>(0, 15) == 0), false, 0, 0, 0);
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    const std::array<std::int64_t, 4> ws{c.batch, c.heads_q, c.seq_q, c.seq_k};
    c.weights.emplace(DType::kF32, ws, fuzz_strides(fdp, ws, false), false, 0, 0, 0);
  }
  if (fdp.ConsumeIntegralInRange<int>(0, 3) == 0) {
    const std::array<std::int64_t, 4> ls{c.batch, c.heads_q, c.seq_q, 1};
    c.lse.emplace(DType::kF32, ls, fuzz_strides(fdp, ls, false), false, 0, 0, 0);
  }
}

void fuzz_cache(FuzzedDataProvider& fdp, Case& c) {
  c.cache_shape = {
      c.batch, c.heads_kv, nudged(c.seq_k, fdp.ConsumeIntegralInRange<std::int64_t>(-1, 8)),
      c.dim,   c.dim_v,    fuzz_dtype(fdp)};
  c.cache_mode =
      fdp.ConsumeIntegralInRange<int>(0, 3) == 0 ? KvCacheMode::kRing : KvCacheMode::kLinear;
  const int n = fdp.ConsumeIntegralInRange<int>(1, 3);
  for (int i = 0; i < n; ++i) c.chunks.push_back(fdp.ConsumeIntegralInRange<std::int64_t>(1, 40));
  // The cache rotates like the plan, except sometimes (a mismatch the plan must refuse).
  c.cache_shape.rope = c.options.rope;
  if (fdp.ConsumeIntegralInRange<int>(0, 7) == 0) {
    if (c.cache_shape.rope) {
      c.cache_shape.rope->theta *= 2;
    } else {
      c.cache_shape.rope = RotaryEmbedding{};
    }
  }
}

// The encodings as the reference applies them: the default slopes are the library's
// alibi_slopes (checked against the published formula in tests/positional/).
reference::Positional reference_positional(const AttentionOptions& o, std::int64_t heads_q) {
  reference::Positional p;
  p.rope = o.rope;
  if (o.alibi) {
    const std::vector<float> slopes =
        o.alibi->slopes.empty() ? alibi_slopes(heads_q) : o.alibi->slopes;
    p.alibi_slopes.assign(slopes.begin(), slopes.end());
    p.alibi_symmetric =
        o.alibi->form.value_or(o.mask.causal ? AlibiForm::kCausal : AlibiForm::kSymmetric) ==
        AlibiForm::kSymmetric;
  }
  return p;
}

// The reference sees K and V as the cache holds them: rounded to its dtype.
std::vector<float> rounded_to(DType dtype, std::vector<float> values) {
  for (float& x : values) {
    if (dtype == DType::kBF16) x = static_cast<float>(bfloat16(x));
    if (dtype == DType::kF16) x = static_cast<float>(float16(x));
  }
  return values;
}

}  // namespace

std::optional<Expected> Case::reference(std::int64_t cached_len) const {
  if (any_special() || std::holds_alternative<AutoSpec>(options.variant)) return std::nullopt;
  // Past a scale of 64 scores reach ~1e4 and beyond, where float and double legitimately round
  // near-ties to different one-hot rows (and FAVOR+ features to different underflows): such
  // calls are still checked for errors, bounds and untouched outputs, not compared.
  if (options.scale && std::abs(*options.scale) > 64.0f) return std::nullopt;
  // Likewise ALiBi slopes past 64 (bias steps of 64 per token).
  if (options.alibi) {
    for (const float s : options.alibi->slopes) {
      if (std::abs(s) > 64.0f) return std::nullopt;
    }
  }
  // The call's extents are its views' (the decoder may perturb a view's extents away from the
  // case's, consistently across q, k and v, and the call is then valid for those).
  const std::int64_t dim_q = q->shape()[3];
  for (const auto* t : {&q, &k, &v}) {
    for (const std::int64_t e : (*t)->shape()) {
      if (e <= 0 || e > 4096) return std::nullopt;  // nothing to compare, or a wild extent
    }
  }
  std::vector<float> qf = q->widened(), kf = k->widened(), vf = v->widened();
  std::array<std::int64_t, 4> ks = k->shape(), vs = v->shape();
  bool rotated = false;  // q and k already rotated here (the reference then rotates nothing)
  if (mode == Mode::kCache) {
    const auto* w = std::get_if<SlidingWindowSpec>(&options.variant);
    if (w != nullptr && !w->global_tokens.empty()) return std::nullopt;  // rows index positions
    // A half cache rotates each key in fp32 and then rounds it: so does the reference (the
    // rounded key rotated would differ by the rounding error, turned).
    if (options.rope && cache_shape.dtype != DType::kF32) {
      kf = reference::rotated_copy(bhsd_view(kf, k->shape()), options.rope, false, 0);
      qf = reference::rotated_copy(bhsd_view(qf, q->shape()), options.rope, true,
                                   cached_len - q->shape()[2]);
      rotated = true;
    }
    kf = rounded_to(cache_shape.dtype, std::move(kf));
    vf = rounded_to(cache_shape.dtype, std::move(vf));
    ks[2] = vs[2] = cached_len;  // the first cached_len tokens (BHSD strides keep the full S_k)
    // A ring that wrapped holds later positions than the reference's rows 0..cached_len-1.
    if ((options.rope || options.alibi) && cached_len > cache_shape.capacity) return std::nullopt;
  }
  ConstTensor qv = bhsd_view(qf, q->shape()), kv = bhsd_view(kf, k->shape()),
              vv = bhsd_view(vf, v->shape());
  kv.shape = ks;
  vv.shape = vs;
  // LSH buckets are discontinuous: float and double may disagree on a vector near a boundary.
  if (const auto* lsh = std::get_if<LshSpec>(&options.variant)) {
    if (reference::lsh_hash_margin(qv, *lsh) < 1e-6) return std::nullopt;
    if (!lsh->shared_qk && reference::lsh_hash_margin(kv, *lsh) < 1e-6) return std::nullopt;
  }
  const double scale = options.scale ? *options.scale : 1.0 / std::sqrt(static_cast<double>(dim_q));
  const Mask& m = options.mask;
  reference::Positional pos = reference_positional(options, q->shape()[1]);
  if (rotated) pos.rope.reset();
  // Every row of the variant table through its reference (tests/reference/reference_variant.cpp);
  // linear attention keeps its own default scale when none is given.
  const std::optional<ConcreteSpec> spec = as_concrete_spec(options.variant);
  if (!spec) return std::nullopt;
  std::optional<double> reference_scale = scale;
  if (std::holds_alternative<LinearSpec>(*spec)) {
    reference_scale.reset();
    if (options.scale) reference_scale = *options.scale;
  }
  return Expected{reference::variant(qv, kv, vv, *spec, m, reference_scale, pos)};
}

namespace {

std::string text(const std::array<std::int64_t, 4>& a) {
  return "[" + std::to_string(a[0]) + "," + std::to_string(a[1]) + "," + std::to_string(a[2]) +
         "," + std::to_string(a[3]) + "]";
}

std::string text(const char* name, const std::optional<Operand>& t) {
  if (!t) return "";
  const AnyConstTensor v = t->cview();
  return std::string(" ") + name + "=" + std::string(to_string(v.dtype)) + text(v.shape) + "/" +
         text(v.strides);
}

// The variant and its parameters as the table writes them (params_of).
std::string text(const VariantSpec& spec) {
  std::string s(to_string(variant_of(spec)));
  if (const std::optional<ConcreteSpec> concrete = as_concrete_spec(spec)) {
    for (const auto& [name, value] : params_of(*concrete)) s += " " + name + "=" + value;
  }
  return s;
}

}  // namespace

std::string Case::describe() const {
  const Mask& m = options.mask;
  std::string s = "mode=" + std::to_string(static_cast<int>(mode)) + " " + text(options.variant) +
                  (m.causal ? " causal" : "") +
                  " key_lengths=" + std::to_string(m.key_lengths.size()) +
                  (m.keep ? " keep" + text(m.keep->shape) : "") +
                  (m.bias ? " bias" + text(m.bias->shape) : "") +
                  " scale=" + (options.scale ? std::to_string(*options.scale) : "default") +
                  " threads=" + std::to_string(options.threads);
  if (const auto& r = options.rope) {
    s += " rope(theta=" + std::to_string(r->theta) + " dims=" + std::to_string(r->dims) +
         (r->layout == RopeLayout::kHalves ? " halves" : " interleaved") +
         " offset=" + std::to_string(r->offset) + " scaling=" + std::to_string(r->linear_scaling) +
         " positions=" + std::to_string(r->q_positions.size()) + "/" +
         std::to_string(r->k_positions.size()) + ")";
  }
  if (options.alibi) s += " alibi(slopes=" + std::to_string(options.alibi->slopes.size()) + ")";
  s += text("q", q) + text("k", k) + text("v", v) + text("out", out) + text("weights", weights) +
       text("lse", lse);
  if (mode == Mode::kCache) s += " cache capacity=" + std::to_string(cache_shape.capacity);
  return s;
}

Case decode_case(FuzzedDataProvider& fdp) {
  Case c;
  c.mode = static_cast<Mode>(fdp.ConsumeIntegralInRange<int>(0, 2));
  c.batch = fuzz_extent(fdp, 3);
  c.heads_kv = fuzz_extent(fdp, 3);
  c.heads_q = fdp.ConsumeIntegralInRange<int>(0, 15) == 0 ? fuzz_extent(fdp, 9)
              : c.heads_kv > 0 && c.heads_kv <= 3
                  ? c.heads_kv * fdp.ConsumeIntegralInRange<int>(1, 3)
                  : c.heads_kv;
  c.seq_q = fuzz_extent(fdp, 24);
  c.seq_k = fuzz_extent(fdp, 40);
  c.dim = fuzz_extent(fdp, 20);
  c.dim_v = fuzz_extent(fdp, 20);
  fuzz_options(fdp, c);
  fuzz_operands(fdp, c);
  if (c.mode == Mode::kCache) fuzz_cache(fdp, c);
  return c;
}

}  // namespace seqattn::fuzz
