// libFuzzer target: attend(), AttentionPlan::run and attention over a KvCache, driven by a
// structured decoding of the input: extents (small, or values that break size arithmetic),
// strides (either layout, innermost steps of 1-3, padding, broadcast, negative), element types,
// every variant and its parameters, masks, scales, thread counts and special values.
// Checked on every input:
//   - a call either returns or throws seqattn::Error (anything else escapes: a finding);
//   - a refused call leaves every output buffer untouched, and a refused append leaves the
//     cache's length unchanged;
//   - a call that returns never writes outside the output views (their gaps keep a sentinel);
//   - on finite inputs, the result matches the float64 reference (and so do weights and lse).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <vector>

#include "fuzz_case.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::fuzz {
namespace {

const Case* current = nullptr;  // printed with a finding

[[noreturn]] void finding(const char* what) {
  std::fprintf(stderr, "fuzz_attend: %s\n  case: %s\n", what,
               current ? current->describe().c_str() : "");
  std::abort();
}

void check_untouched(const Case& c) {
  if (!c.out->all_sentinel()) finding("a refused call wrote to out");
  if (c.weights && !c.weights->all_sentinel()) finding("a refused call wrote to weights");
  if (c.lse && !c.lse->all_sentinel()) finding("a refused call wrote to lse");
}

void check_gaps(const Case& c) {
  if (!c.out->gaps_untouched()) finding("out written outside its view");
  if (c.weights && !c.weights->gaps_untouched()) finding("weights written outside the view");
  if (c.lse && !c.lse->gaps_untouched()) finding("lse written outside its view");
}

// Runs the case as attend(), a plan or over a cache; returns false when it was refused.
bool run_case(Case& c, std::int64_t* cached_len) {
  const AnyTensor out = c.out->view();
  RunArgs extra;
  if (c.weights) extra.weights = c.weights->view().as<float>();
  if (c.lse) extra.lse = c.lse->view().as<float>();
  try {
    switch (c.mode) {
      case Mode::kAttend:
        attend(c.q->cview(), c.k->cview(), c.v->cview(), out, c.options_with(extra));
        break;
      case Mode::kPlan: {  // the mask's data goes to the run, as a plan requires
        RunArgs args = detail::run_args(c.options);
        args.weights = extra.weights;
        args.lse = extra.lse;
        make_plan(c.plan_shape(), detail::plan_options(c.options))
            .run(c.q->cview(), c.k->cview(), c.v->cview(), out, args);
        break;
      }
      case Mode::kCache: {
        std::optional<KvCache> cache;
        cache.emplace(c.cache_shape, c.cache_mode);
        *cached_len = c.fill_cache(*cache);
        attend(c.q->cview(), *cache, out, c.options_with(extra));
        break;
      }
    }
  } catch (const Error&) {
    return false;
  }
  return true;
}

double max_abs(const std::vector<float>& x) {
  double m = 0;
  for (const float e : x) m = std::max(m, static_cast<double>(std::abs(e)));
  return m;
}

// The fp32 forward-error bound on out relative to max |out|: a score q·k·scale summed over D
// terms (and rotated by RoPE first) is off by at most d = (D + 8)·2^-24·scale·D·max|q|·max|k|,
// and scores off by d move the softmax weights by a factor within e^(±2d), so out by at most
// about 4d·max|v|. Past the format's fixed tolerance only when the scores are large (a scale
// near the fuzzer's 64, or D·|q|·|k| large): a finding was dense over an f32 cache with RoPE,
// D = 14, scale 0.95, |x| <= 2, error 1.8e-4 against 1e-4, within this bound (2.8e-4).
double rounding_bound(const Case& c, const std::vector<double>& expected_out) {
  const double dim = static_cast<double>(c.q->shape()[3]);
  const double scale = c.options.scale ? std::abs(*c.options.scale) : 1.0 / std::sqrt(dim);
  const double d = (dim + 8) * std::ldexp(1.0, -24) * scale * dim * max_abs(c.q->widened()) *
                   max_abs(c.k->widened());
  double out_scale = 0;
  for (const double e : expected_out) out_scale = std::max(out_scale, std::abs(e));
  return 4 * d * max_abs(c.v->widened()) / std::max(out_scale, 1e-30);
}

void compare_with_reference(const Case& c, std::int64_t cached_len) {
  const std::optional<Expected> expected = c.reference(cached_len);
  if (!expected) return;
  const double tol = std::max(c.tolerance(), rounding_bound(c, expected->result.out));
  const std::vector<float> out = c.out->widened();
  const double out_err =
      reference::max_relative_error(out, expected->result.out, c.absolute_floor());
  if (out_err > tol) {
    std::fprintf(stderr, "out error %g, tolerance %g\n", out_err, tol);
    finding("out differs from the reference");
  }
  if (c.weights && !expected->result.weights.empty()) {
    const double err =
        reference::max_relative_error(c.weights->widened(), expected->result.weights);
    if (err > 1e-4) {
      std::fprintf(stderr, "weights error %g\n", err);
      finding("weights differ from the reference");
    }
  }
  if (c.lse && !expected->result.lse.empty()) {
    const std::vector<float> lse = c.lse->widened();
    for (std::size_t i = 0; i < lse.size(); ++i) {
      const double want = expected->result.lse[i];
      if (std::isinf(want) ? lse[i] != want
                           : std::abs(lse[i] - want) > 1e-4 * (1 + std::abs(want))) {
        finding("lse differs from the reference");
      }
    }
  }
}

}  // namespace
}  // namespace seqattn::fuzz

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace seqattn::fuzz;
  FuzzedDataProvider fdp(data, size);
  Case c = decode_case(fdp);
  current = &c;
  // SEQATTN_FUZZ_PRINT=1 prints every case (to read a finding that a sanitizer reports).
  static const bool print = std::getenv("SEQATTN_FUZZ_PRINT") != nullptr;
  if (print) std::fprintf(stderr, "case: %s\n", c.describe().c_str());
  std::int64_t cached_len = -1;
  if (!run_case(c, &cached_len)) {
    check_untouched(c);
    return 0;
  }
  if (!c.all_fit()) finding("a call over a view larger than its buffer returned");
  check_gaps(c);
  compare_with_reference(c, cached_len);
  return 0;
}
