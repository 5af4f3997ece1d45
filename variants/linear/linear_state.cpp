// The recurrent form of causal linear attention: one HeadState per (batch, kv head) carried
// across step() calls; each step is the batch causal algorithm started from that state.
#include "seqattn/linear_state.hpp"

#include <hwy/aligned_allocator.h>
#include <omp.h>

#include <cmath>
#include <cstddef>
#include <string>

#include "src/runtime/checked_size.hpp"
#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"
#include "variants/linear/linear_core.hpp"

namespace seqattn {

struct LinearAttentionState::Impl {
  LinearStateShape shape;
  detail::LinearPlan plan;
  std::int64_t position = 0;
  int threads = 1;
  // Carved from `storage`, once: the states [batch × heads_kv], then one scratch set and one
  // query group per thread, kept across steps (a decoding step is a few microseconds of work,
  // less than allocating and clearing the buffers).
  hwy::AlignedFreeUniquePtr<std::byte[]> storage;
  detail::HeadState* heads = nullptr;
  std::int64_t head_count = 0;
  detail::LinearWorkspace* workspaces = nullptr;
  detail::QueryGroup* groups = nullptr;

  void carve(detail::ScratchArena& arena) {
    heads = detail::carve_objects<detail::HeadState>(arena, head_count, plan);
    workspaces = detail::carve_objects<detail::LinearWorkspace>(arena, threads, plan);
    groups =
        detail::carve_objects<detail::QueryGroup>(arena, threads, shape.heads_q / shape.heads_kv);
  }
};

namespace {

constexpr std::int64_t kMinParallelTokens = 16;

using detail::str;

void check_shape(const LinearStateShape& s) {
  const std::pair<const char*, std::int64_t> extents[] = {{"shape.batch", s.batch},
                                                          {"shape.heads_q", s.heads_q},
                                                          {"shape.heads_kv", s.heads_kv},
                                                          {"shape.dim", s.dim},
                                                          {"shape.dim_v", s.dim_v}};
  for (const auto& [name, value] : extents) {
    if (value < 1) detail::fail(name, ">= 1", str(value));
  }
  if (s.heads_q % s.heads_kv != 0) {
    detail::fail("shape.heads_kv", "a divisor of heads_q = " + str(s.heads_q), str(s.heads_kv));
  }
}

void expect_shape(const char* name, const std::array<std::int64_t, 4>& actual,
                  const std::array<std::int64_t, 4>& expected, const char* meaning) {
  if (actual != expected) {
    detail::fail(std::string(name) + ".shape", detail::shape_text(expected) + " = " + meaning,
                 detail::shape_text(actual));
  }
}

}  // namespace

LinearAttentionState::LinearAttentionState(const LinearSpec& spec, const LinearStateShape& shape,
                                           std::optional<float> scale, int threads)
    : impl_(std::make_unique<Impl>()) {
  check_shape(shape);
  if (scale) detail::check_scale(*scale);
  const int team = detail::resolve_threads(threads, "threads");
  impl_->shape = shape;
  impl_->plan = detail::make_linear_plan(spec, shape.dim, shape.dim_v, scale);
  impl_->threads = team;
  impl_->head_count = detail::checked_product({shape.batch, shape.heads_kv}, "shape");
  detail::checked_product({impl_->head_count, impl_->plan.features, shape.dim_v},
                          "shape (B x H_kv x m x D_v: the heads' states)");
  detail::ScratchArena count;
  impl_->carve(count);
  impl_->storage = hwy::AllocateAligned<std::byte>(count.used());
  if (impl_->storage == nullptr) {
    detail::fail_allocation("LinearAttentionState", static_cast<double>(count.used()));
  }
  detail::ScratchArena arena(impl_->storage.get(), count.used());
  impl_->carve(arena);
  reset();
}

LinearAttentionState::~LinearAttentionState() = default;
LinearAttentionState::LinearAttentionState(LinearAttentionState&&) noexcept = default;
LinearAttentionState& LinearAttentionState::operator=(LinearAttentionState&&) noexcept = default;

void LinearAttentionState::reset() {
  for (std::int64_t i = 0; i < impl_->head_count; ++i) impl_->heads[i].reset(impl_->plan);
  impl_->position = 0;
}

std::int64_t LinearAttentionState::position() const { return impl_->position; }
std::int64_t LinearAttentionState::num_features() const { return impl_->plan.features; }
const LinearStateShape& LinearAttentionState::shape() const { return impl_->shape; }

void LinearAttentionState::step(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                                const Tensor& out) {
  const LinearStateShape& s = impl_->shape;
  const std::int64_t n = q.shape[2];
  expect_shape("q", q.shape, {s.batch, s.heads_q, n, s.dim}, "[B, H_q, n, D] of the state");
  expect_shape("k", k.shape, {s.batch, s.heads_kv, n, s.dim}, "[B, H_kv, n, D] of the state");
  expect_shape("v", v.shape, {s.batch, s.heads_kv, n, s.dim_v}, "[B, H_kv, n, D_v] of the state");
  // Pointers, strides, overlap and the remaining consistency rules are attend()'s.
  const detail::Problem p = detail::validate_problem(q, k, v, out, AttentionOptions{});
  const detail::LinearPlan& plan = impl_->plan;
  const std::int64_t tasks = s.batch * s.heads_kv, group = s.heads_q / s.heads_kv;
  // A decoding step (a few tokens) costs O(m·D) per head: less than waking a thread team.
  const bool parallel = n >= kMinParallelTokens && tasks > 1 && impl_->threads > 1;
#pragma omp parallel num_threads(impl_->threads) if (parallel)
  {
    const int thread = omp_get_thread_num();
    detail::LinearWorkspace& ws = impl_->workspaces[thread];
    detail::QueryGroup& g = impl_->groups[thread];
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t b = t / s.heads_kv, hk = t % s.heads_kv;
      for (std::int64_t i = 0; i < group; ++i) {
        g.q[static_cast<std::size_t>(i)] = detail::head_rows(p.q, b, hk * group + i);
        g.out[static_cast<std::size_t>(i)] = detail::head_rows(p.out, b, hk * group + i);
      }
      detail::linear_causal_head(plan, impl_->heads[t], detail::head_rows(p.k, b, hk),
                                 detail::head_rows(p.v, b, hk), g, /*offset=*/0, ws);
    }
  }
  impl_->position += n;
}

}  // namespace seqattn
