// The structured fuzzer's case: one attention call decoded from the fuzzer's bytes, and its
// float64 reference.
#pragma once

#include <fuzzer/FuzzedDataProvider.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "fuzz_tensors.hpp"
#include "seqattn/seqattn.hpp"
#include "tests/reference/reference.hpp"

namespace seqattn::fuzz {

enum class Mode { kAttend, kPlan, kCache };

struct Expected {
  reference::Result result;
};

struct Case {
  Mode mode = Mode::kAttend;
  std::int64_t batch = 1, heads_q = 1, heads_kv = 1, seq_q = 1, seq_k = 1, dim = 1, dim_v = 1;
  std::optional<Operand> q, k, v, out, weights, lse;
  AttentionOptions options;
  std::vector<std::uint8_t> keep;  // storage behind options.mask.keep
  std::vector<float> bias;         // storage behind options.mask.bias
  KvCacheShape cache_shape;
  KvCacheMode cache_mode = KvCacheMode::kLinear;
  std::vector<std::int64_t> chunks;  // token counts appended to the cache, in order

  AttentionShape plan_shape() const { return {batch, heads_q, heads_kv, seq_q, seq_k, dim, dim_v}; }

  AttentionOptions options_with(const RunArgs& extra) const {
    AttentionOptions o = options;
    o.lse = extra.lse;
    o.weights = extra.weights;  // unsupported over a cache: such a call must be refused
    return o;
  }

  // Appends k and v in `chunks`; a refused append must leave the length as it was. Returns the
  // tokens stored.
  std::int64_t fill_cache(KvCache& cache) const {
    std::int64_t appended = 0;
    for (const std::int64_t n : chunks) {
      AnyConstTensor kc = k->cview(), vc = v->cview();
      const std::int64_t take = std::min(n, seq_k - appended);
      if (take <= 0) break;
      kc.data = static_cast<const char*>(kc.data) + appended * kc.strides[2] * dtype_size(kc.dtype);
      vc.data = static_cast<const char*>(vc.data) + appended * vc.strides[2] * dtype_size(vc.dtype);
      // Never past either view's rows (a k/v pair of different lengths must be refused).
      kc.shape[2] = std::min(take, kc.shape[2] - appended);
      vc.shape[2] = std::max<std::int64_t>(0, std::min(take, vc.shape[2] - appended));
      const std::int64_t before = batch > 0 ? cache.length(0) : 0;
      try {
        cache.append(kc, vc);
        appended += take;
        if (!k->fits() || !v->fits()) {
          std::fprintf(stderr,
                       "fuzz_attend: an append over a view larger than its buffer returned\n");
          std::abort();
        }
      } catch (const Error&) {
        if (batch > 0 && cache.length(0) != before) {
          std::fprintf(stderr, "fuzz_attend: a refused append changed the cache\n");
          std::abort();
        }
        throw;
      }
    }
    return appended;
  }

  // Whether every view the call read or wrote fits its buffer (over a cache, k and v were
  // only appended: fill_cache checks them).
  bool all_fit() const {
    const bool kv_read = mode != Mode::kCache;
    for (const auto* t : {&q, kv_read ? &k : &q, kv_read ? &v : &q, &out, &weights, &lse}) {
      if (t->has_value() && !(*t)->fits()) return false;
    }
    return true;
  }

  bool any_special() const { return q->any_special() || k->any_special() || v->any_special(); }

  double tolerance() const {
    if (out->dtype() == DType::kBF16) return 1e-2;
    if (out->dtype() == DType::kF16) return 2e-3;
    return 1e-4;
  }

  // The output format's absolute resolution near zero: f16 stores values below its smallest
  // normal (6.1e-5) as multiples of 2^-24, so a result of 1e-30 (elu1 with epsilon = 1e30, a
  // case the fuzzer found) is stored as 0. That error is the format's, not the kernel's.
  double absolute_floor() const { return out->dtype() == DType::kF16 ? std::ldexp(1.0, -25) : 0.0; }

  // The float64 result of the call, or nullopt where there is nothing to compare. Asked only
  // of a call the library accepted, so the spec has passed its variant's check (no per-variant
  // validity test here: the variant table's rows stay the only per-variant code).
  std::optional<Expected> reference(std::int64_t cached_len) const;

  // Shapes, strides, types and options, printed with a finding.
  std::string describe() const;
};

Case decode_case(FuzzedDataProvider& fdp);

}  // namespace seqattn::fuzz
