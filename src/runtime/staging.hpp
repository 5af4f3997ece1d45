// fp32 views of half-precision arguments: the kernels compute in fp32, so a bf16/f16 q, k or v
// is widened (exactly) into an aligned fp32 copy and a bf16/f16 out is computed into an fp32
// staging buffer and rounded (to nearest even) into the caller's view once the kernel is done.
// Every caller view is checked — element size, shape as planned, overlap between outputs and
// inputs — before anything is written, so a bad argument still changes nothing.
#pragma once

#include <hwy/aligned_allocator.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "seqattn/plan.hpp"
#include "seqattn/tensor.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::detail {

// check_view with the view's element size, then its shape against the planned one.
ByteRange bind_any(const std::string& name, const AnyConstTensor& view,
                   const std::array<std::int64_t, 4>& planned);

// dst [B, H, S, D] contiguous = src widened exactly to fp32.
void widen_to(const AnyConstTensor& src, float* dst);
// dst = src rounded to dst's dtype (round to nearest even; a copy when dst is f32).
void narrow_into(const ConstTensor& src, const AnyTensor& dst);

class F32Staging {
 public:
  // arena: where the fp32 copies go (each 64-byte aligned), e.g. a plan's workspace, so a run
  // allocates nothing; empty: each copy is allocated. Staging more than the arena holds is an
  // internal error (the plan sized it).
  explicit F32Staging(std::span<float> arena = {}) : arena_(arena) {}

  // Checks `view` and returns an fp32 view of it: the view itself when it is f32, otherwise a
  // widened contiguous copy (in the arena, or owned by this object). round_f32_to_bf16
  // (Fp32Precision::kBf16): an f32 view is copied with every value rounded to bf16 (nearest even;
  // NaN stays NaN).
  ConstTensor input(const char* name, const AnyConstTensor& view,
                    const std::array<std::int64_t, 4>& planned, bool round_f32_to_bf16 = false);
  // Checks out (shape, self-overlap, disjoint from the inputs and the run's masks) and the
  // per-call fp32 outputs (disjoint from the caller's inputs), and returns where the kernel
  // writes out: the view itself when f32, otherwise a staging buffer that finish() rounds into.
  Tensor output(const AnyTensor& out, const std::array<std::int64_t, 4>& planned,
                const RunArgs& args);
  // Rounds the staged output into the caller's view (nothing to do for an f32 out).
  void finish() const;

 private:
  // A contiguous fp32 buffer of `shape`: the next part of the arena, or an allocation owned by
  // this object (Error naming `name` if none; std::logic_error if the arena is too small).
  float* allocate(const std::string& name, const std::array<std::int64_t, 4>& shape);

  std::span<float> arena_;
  NamedRanges ranges_;  // the caller's inputs
  std::vector<hwy::AlignedFreeUniquePtr<float[]>> buffers_;
  AnyTensor out_;
  Tensor staged_;
};

}  // namespace seqattn::detail
