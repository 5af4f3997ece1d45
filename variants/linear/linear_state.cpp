// The recurrent form of causal linear attention: one HeadState per (batch, kv head) carried
// across step() calls; each step is the batch causal algorithm started from that state.
#include "seqattn/linear_state.hpp"

#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "src/runtime/threads.hpp"
#include "src/runtime/validate.hpp"
#include "variants/linear/linear_core.hpp"

namespace seqattn {

struct LinearAttentionState::Impl {
  LinearStateShape shape;
  detail::LinearPlan plan;
  std::vector<detail::HeadState> heads;  // [batch × heads_kv]
  std::int64_t position = 0;
  int threads = 1;
  // One scratch set per thread, kept across steps: a decoding step is a few microseconds of
  // work, less than allocating and clearing the buffers.
  std::vector<detail::LinearWorkspace> workspaces;
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
  impl_->heads.resize(
      static_cast<std::size_t>(detail::checked_product({shape.batch, shape.heads_kv}, "shape")));
  impl_->workspaces.assign(static_cast<std::size_t>(impl_->threads),
                           detail::LinearWorkspace(impl_->plan));
  reset();
}

LinearAttentionState::~LinearAttentionState() = default;
LinearAttentionState::LinearAttentionState(LinearAttentionState&&) noexcept = default;
LinearAttentionState& LinearAttentionState::operator=(LinearAttentionState&&) noexcept = default;

void LinearAttentionState::reset() {
  for (detail::HeadState& h : impl_->heads) h.reset(impl_->plan);
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
    detail::LinearWorkspace& ws = impl_->workspaces[static_cast<std::size_t>(omp_get_thread_num())];
#pragma omp for schedule(dynamic, 1)
    for (std::int64_t t = 0; t < tasks; ++t) {
      const std::int64_t b = t / s.heads_kv, hk = t % s.heads_kv;
      detail::QueryGroup g;
      for (std::int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        g.q.push_back(detail::head_rows(p.q, b, h));
        g.out.push_back(detail::head_rows(p.out, b, h));
      }
      detail::linear_causal_head(plan, impl_->heads[static_cast<std::size_t>(t)],
                                 detail::head_rows(p.k, b, hk), detail::head_rows(p.v, b, hk), g,
                                 /*offset=*/0, ws);
    }
  }
  impl_->position += n;
}

}  // namespace seqattn
