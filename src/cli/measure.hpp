// Random problems, timed runs and memory measurement shared by bench, calibrate and report.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/attention.hpp"
#include "seqattn/plan.hpp"

namespace seqattn::cli {

struct Shape {
  std::int64_t batch = 1;
  std::int64_t heads = 8;
  std::int64_t kv_heads = 8;
  std::int64_t seq = 1024;
  std::int64_t dim = 64;
  std::int64_t dim_v = 64;
  DType dtype = DType::kF32;     // q and out
  DType kv_dtype = DType::kF32;  // k and v (the KvCache's dtype in time_decode)
};

// Contiguous BHSD q, k, v with uniform values in [-1, 1), and a zeroed output, in the shape's
// dtypes (half tensors hold the rounded values; the f32 vectors always hold the originals).
struct Workload {
  Shape shape;
  std::vector<float> q, k, v, out;
  std::vector<std::uint16_t> q16, k16, v16, out16;  // the bf16/f16 tensors, when asked

  explicit Workload(const Shape& s, std::uint64_t seed = 1);
  AnyConstTensor q_view() const;
  AnyConstTensor k_view() const;
  AnyConstTensor v_view() const;
  AnyTensor out_view();
  // The output's values as floats (widened from out16 when the output is half).
  std::vector<float> out_values() const;
};

struct Timing {
  RunRecord record;             // the last timed run
  std::vector<double> seconds;  // time of each timed run (the whole plan.run call)
  double median_seconds = 0;
  double gflops() const { return median_seconds > 0 ? record.flops / median_seconds * 1e-9 : 0; }
};

// `warmup` untimed runs, then `repeat` timed ones of one plan (time from the run record).
Timing time_attend(Workload& w, const AttentionOptions& options, int warmup, int repeat);

// K + V bytes a KvCache of s.seq tokens stores for s (kv_dtype; i8 counts each token's two
// 4-byte scales): what one decode step reads.
double kv_cache_bytes(const Shape& s);

// seq_q new queries over a KvCache filled with s.seq random tokens (S_k = s.seq, the cache's
// capacity), through one plan and a caller-owned workspace.
Timing time_decode(const Shape& s, std::int64_t seq_q, const AttentionOptions& options, int warmup,
                   int repeat);

// The decode of each shape (e.g. one per cache dtype) timed in turns: `warmup` untimed runs of
// each, then `repeat` rounds that run each once, so that a busy moment of a shared host slows
// every median, not one (the report's ratios between cache dtypes come from one such run).
// Every cache is filled first and kept until the end.
std::vector<Timing> time_decodes_in_turns(const std::vector<Shape>& shapes, std::int64_t seq_q,
                                          const AttentionOptions& options, int warmup, int repeat);

double median(std::vector<double> values);

// Resident-set high-water mark tracking through /proc/self/clear_refs; reset() returns false
// where the kernel does not allow it (then delta() is empty).
class PeakRss {
 public:
  bool reset();
  std::optional<std::int64_t> delta_bytes() const;  // peak since reset() minus RSS at reset()

 private:
  std::optional<std::int64_t> baseline_;
};

// Number of hardware threads (what threads = 0 means).
int hardware_threads();

// "1.23 ms", "4.5 s", "2m10s".
std::string format_seconds(double seconds);

}  // namespace seqattn::cli
