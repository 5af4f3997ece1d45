#include "src/cli/measure.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <type_traits>
#include <utility>

#include "seqattn/error.hpp"
#include "seqattn/workspace.hpp"
#include "src/runtime/checked_size.hpp"

namespace seqattn::cli {
namespace {

// Uniform on [-1, 1) in steps of 2^-23 (24 random bits per value, every value exact in
// float). Not std::uniform_real_distribution: libstdc++'s generate_canonical calls logl for
// every value, which was 60% of a paged bench's run under the sanitizers (a 32-sequence pool
// of random tokens took 12 of its 18 s).
std::vector<float> uniform_values(std::int64_t count, std::uint64_t seed) {
  std::vector<float> values = detail::checked_vector<float>(count, "--seq");
  std::mt19937_64 generator(seed);
  for (float& x : values) x = static_cast<float>(generator() >> 40) * 0x1p-23f - 1.0f;
  return values;
}

// A field of /proc/self/status in bytes ("VmRSS:   1234 kB").
std::optional<std::int64_t> status_bytes(const std::string& field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field + ":", 0) != 0) continue;
    return std::stoll(line.substr(field.size() + 1)) * 1024;
  }
  return std::nullopt;
}

// The bits of x rounded to a 16-bit dtype.
std::vector<std::uint16_t> half_bits(const std::vector<float>& x, DType dtype) {
  std::vector<std::uint16_t> bits;
  if (dtype == DType::kF32) return bits;
  bits.reserve(x.size());
  for (const float e : x)
    bits.push_back(dtype == DType::kBF16 ? bfloat16(e).bits : float16(e).bits);
  return bits;
}

// A contiguous [b, h, s, d] view of f32 or 16-bit storage, typed by dtype.
template <class F32, class Bits>
auto typed_view(DType dtype, F32* f32, Bits* bits, std::int64_t b, std::int64_t h, std::int64_t s,
                std::int64_t d) {
  using Any = std::conditional_t<std::is_const_v<F32>, AnyConstTensor, AnyTensor>;
  using B16 = std::conditional_t<std::is_const_v<F32>, const bfloat16, bfloat16>;
  using F16 = std::conditional_t<std::is_const_v<F32>, const float16, float16>;
  if (dtype == DType::kBF16) return Any(bhsd(reinterpret_cast<B16*>(bits), b, h, s, d));
  if (dtype == DType::kF16) return Any(bhsd(reinterpret_cast<F16*>(bits), b, h, s, d));
  return Any(bhsd(f32, b, h, s, d));
}

}  // namespace

// The command line's extents (--batch, --heads, ...) before anything is sized from them: each
// >= 1, and every buffer's element count through checked_product.
static void check_workload_shape(const Shape& s) {
  const std::pair<const char*, std::int64_t> extents[] = {
      {"--batch", s.batch}, {"--heads", s.heads}, {"--kv-heads", s.kv_heads},
      {"--seq", s.seq},     {"--dim", s.dim},     {"--dim-v", s.dim_v}};
  for (const auto& [flag, value] : extents) {
    if (value < 1) throw Error(ErrorKind::kInvalidArgument, flag, ">= 1", std::to_string(value));
  }
  const std::int64_t d = std::max(s.dim, s.dim_v);
  detail::checked_product({s.batch, s.heads, s.seq, d}, "--batch x --heads x --seq x --dim");
  detail::checked_product({s.batch, s.kv_heads, s.seq, d}, "--batch x --kv-heads x --seq x --dim");
}

Workload::Workload(const Shape& s, std::uint64_t seed) : shape(s) {
  check_workload_shape(s);
  const std::int64_t kv_rows = s.batch * s.kv_heads * s.seq;
  q = uniform_values(s.batch * s.heads * s.seq * s.dim, seed);
  k = uniform_values(kv_rows * s.dim, seed + 1);
  v = uniform_values(kv_rows * s.dim_v, seed + 2);
  out = detail::checked_vector<float>(s.batch * s.heads * s.seq * s.dim_v, "--seq");
  q16 = half_bits(q, s.dtype);
  out16 = half_bits(out, s.dtype);
  k16 = half_bits(k, s.kv_dtype);
  v16 = half_bits(v, s.kv_dtype);
}

AnyConstTensor Workload::q_view() const {
  return typed_view(shape.dtype, q.data(), q16.data(), shape.batch, shape.heads, shape.seq,
                    shape.dim);
}
AnyConstTensor Workload::k_view() const {
  return typed_view(shape.kv_dtype, k.data(), k16.data(), shape.batch, shape.kv_heads, shape.seq,
                    shape.dim);
}
AnyConstTensor Workload::v_view() const {
  return typed_view(shape.kv_dtype, v.data(), v16.data(), shape.batch, shape.kv_heads, shape.seq,
                    shape.dim_v);
}
std::vector<float> Workload::out_values() const {
  if (shape.dtype == DType::kF32) return out;
  std::vector<float> values;
  values.reserve(out16.size());
  for (const std::uint16_t b : out16) {
    values.push_back(shape.dtype == DType::kBF16 ? static_cast<float>(bfloat16::from_bits(b))
                                                 : static_cast<float>(float16::from_bits(b)));
  }
  return values;
}

AnyTensor Workload::out_view() {
  return typed_view(shape.dtype, out.data(), out16.data(), shape.batch, shape.heads, shape.seq,
                    shape.dim_v);
}

double kv_cache_bytes(const Shape& s) {
  const double scales = s.kv_dtype == DType::kI8 ? 8.0 : 0.0;
  return static_cast<double>(s.batch * s.kv_heads * s.seq) *
         (static_cast<double>(dtype_size(s.kv_dtype)) * static_cast<double>(s.dim + s.dim_v) +
          scales);
}

namespace {

// One decode problem ready to run: a KvCache of s.seq random tokens (f32, rounded to the cache's
// dtype as they are appended), seq_q queries, out, a plan and its workspace.
class DecodeRunner {
 public:
  DecodeRunner(const Shape& s, std::int64_t seq_q, const AttentionOptions& options)
      : cache_({s.batch, s.kv_heads, s.seq, s.dim, s.dim_v, s.kv_dtype, options.rope}),
        queries_(query_shape(s, seq_q), 7),
        out_(detail::checked_vector<float>(
            detail::checked_product({s.batch, s.heads, seq_q, s.dim_v}, "--seq-q"), "--seq-q")),
        out16_(s.dtype == DType::kF32 ? 0 : out_.size()),
        out_view_(
            typed_view(s.dtype, out_.data(), out16_.data(), s.batch, s.heads, seq_q, s.dim_v)),
        plan_(make_plan(cache_shape(cache_.shape(), s.heads, seq_q), options)) {
    const Workload keys(Shape{s.batch, s.kv_heads, s.kv_heads, s.seq, s.dim, s.dim_v});
    cache_.append(keys.k_view(), keys.v_view());
    workspace_ = buffer_.get(plan_.workspace_bytes());
  }

  RunRecord run() {
    return plan_.run(queries_.q_view(), cache_, out_view_, {.workspace = workspace_});
  }

 private:
  static Shape query_shape(Shape s, std::int64_t seq_q) {
    s.seq = seq_q;
    s.kv_heads = s.heads;
    s.dim_v = s.dim;  // q_view only; k/v are unused
    s.kv_dtype = DType::kF32;
    return s;
  }

  KvCache cache_;
  Workload queries_;
  std::vector<float> out_;
  std::vector<std::uint16_t> out16_;
  AnyTensor out_view_;
  AttentionPlan plan_;
  WorkspaceBuffer buffer_;
  std::span<std::byte> workspace_;
};

}  // namespace

std::vector<Timing> time_decodes_in_turns(const std::vector<Shape>& shapes, std::int64_t seq_q,
                                          const AttentionOptions& options, int warmup, int repeat) {
  std::vector<std::unique_ptr<DecodeRunner>> runners;
  for (const Shape& s : shapes)
    runners.push_back(std::make_unique<DecodeRunner>(s, seq_q, options));
  std::vector<Timing> timings(runners.size());
  for (std::size_t i = 0; i < runners.size(); ++i) {
    for (int w = 0; w < warmup; ++w) timings[i].record = runners[i]->run();
  }
  for (int r = 0; r < repeat; ++r) {
    for (std::size_t i = 0; i < runners.size(); ++i) {
      timings[i].record = runners[i]->run();
      timings[i].seconds.push_back(timings[i].record.seconds);
    }
  }
  for (Timing& t : timings) t.median_seconds = median(t.seconds);
  return timings;
}

Timing time_decode(const Shape& s, std::int64_t seq_q, const AttentionOptions& options, int warmup,
                   int repeat) {
  return time_decodes_in_turns({s}, seq_q, options, warmup, repeat).front();
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

// Planned once, as a caller that repeats a shape would: the timed runs are plan.run().
Timing time_attend(Workload& w, const AttentionOptions& options, int warmup, int repeat) {
  const Shape& s = w.shape;
  const AttentionPlan plan =
      make_plan({s.batch, s.heads, s.kv_heads, s.seq, s.seq, s.dim, s.dim_v}, options);
  // The plan's workspace for these views (every variant on any compute path, with the fp32
  // copies of half views), held as a serving loop would hold it: the timed runs then allocate
  // nothing.
  const std::optional<std::size_t> bytes =
      plan.qkv_workspace_bytes({s.dtype, s.kv_dtype, s.kv_dtype, s.dtype});
  WorkspaceBuffer workspace;
  RunArgs args;
  if (bytes) args.workspace = workspace.get(*bytes);
  Timing timing;
  for (int i = 0; i < warmup; ++i) {
    timing.record = plan.run(w.q_view(), w.k_view(), w.v_view(), w.out_view(), args);
  }
  for (int i = 0; i < repeat; ++i) {
    timing.record = plan.run(w.q_view(), w.k_view(), w.v_view(), w.out_view(), args);
    timing.seconds.push_back(timing.record.seconds);
  }
  timing.median_seconds = median(timing.seconds);
  return timing;
}

bool PeakRss::reset() {
  baseline_.reset();
  std::FILE* clear = std::fopen("/proc/self/clear_refs", "w");
  if (clear == nullptr) return false;
  // "5" resets the peak RSS (VmHWM) to the current RSS.
  const bool ok = std::fputs("5", clear) >= 0;
  if (std::fclose(clear) != 0 || !ok) return false;
  baseline_ = status_bytes("VmRSS");
  return baseline_.has_value();
}

std::optional<std::int64_t> PeakRss::delta_bytes() const {
  if (!baseline_) return std::nullopt;
  const std::optional<std::int64_t> peak = status_bytes("VmHWM");
  if (!peak) return std::nullopt;
  return std::max<std::int64_t>(0, *peak - *baseline_);
}

int hardware_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

std::string format_seconds(double seconds) {
  char text[32];
  if (seconds <= 0) {
    std::snprintf(text, sizeof text, "0 s");
  } else if (seconds < 1e-3) {
    std::snprintf(text, sizeof text, "%.1f us", seconds * 1e6);
  } else if (seconds < 1) {
    std::snprintf(text, sizeof text, "%.2f ms", seconds * 1e3);
  } else if (seconds < 60) {
    std::snprintf(text, sizeof text, "%.1f s", seconds);
  } else {
    const int whole = static_cast<int>(seconds + 0.5);
    std::snprintf(text, sizeof text, "%dm%02ds", whole / 60, whole % 60);
  }
  return text;
}

}  // namespace seqattn::cli
