// Exact merge of two attention results over disjoint key sets, through their log-sum-exps.
#include <cmath>
#include <limits>

#include "seqattn/attention.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn {
namespace {

void expect_same_shape(const std::string& name, const std::array<std::int64_t, 4>& actual,
                       const std::array<std::int64_t, 4>& expected, const std::string& like) {
  if (actual != expected) {
    detail::fail(name + ".shape", detail::shape_text(expected) + " (same as " + like + ")",
                 detail::shape_text(actual));
  }
}

}  // namespace

void merge_partials(const ConstTensor& out1, const ConstTensor& lse1, const ConstTensor& out2,
                    const ConstTensor& lse2, const Tensor& out, const Tensor& lse) {
  detail::check_view("out1", out1.data, out1.shape, out1.strides, sizeof(float));
  detail::check_view("lse1", lse1.data, lse1.shape, lse1.strides, sizeof(float));
  detail::check_view("out2", out2.data, out2.shape, out2.strides, sizeof(float));
  detail::check_view("lse2", lse2.data, lse2.shape, lse2.strides, sizeof(float));
  detail::check_view("out", out.data, out.shape, out.strides, sizeof(float));
  detail::check_view("lse", lse.data, lse.shape, lse.strides, sizeof(float));
  const std::array<std::int64_t, 4> lse_shape{out1.shape[0], out1.shape[1], out1.shape[2], 1};
  expect_same_shape("out2", out2.shape, out1.shape, "out1");
  expect_same_shape("out", out.shape, out1.shape, "out1");
  expect_same_shape("lse1", lse1.shape, lse_shape, "[B, H, S, 1] of out1");
  expect_same_shape("lse2", lse2.shape, lse_shape, "[B, H, S, 1] of out1");
  expect_same_shape("lse", lse.shape, lse_shape, "[B, H, S, 1] of out1");
  detail::check_no_self_overlap("out", out.shape, out.strides);

  const float neg_inf = -std::numeric_limits<float>::infinity();
  for (std::int64_t b = 0; b < out1.shape[0]; ++b) {
    for (std::int64_t h = 0; h < out1.shape[1]; ++h) {
      for (std::int64_t s = 0; s < out1.shape[2]; ++s) {
        const float l1 = lse1.at(b, h, s, 0), l2 = lse2.at(b, h, s, 0);
        const float m = std::max(l1, l2);
        // Both sides empty: the union is empty too, and gives zeros like a fully masked row.
        const float w1 = m == neg_inf ? 0.0f : std::exp(l1 - m);
        const float w2 = m == neg_inf ? 0.0f : std::exp(l2 - m);
        const float total = w1 + w2;
        const float inv = total > 0 ? 1.0f / total : 0.0f;
        for (std::int64_t d = 0; d < out1.shape[3]; ++d) {
          const float a = w1 > 0 ? out1.at(b, h, s, d) * w1 : 0.0f;
          const float c = w2 > 0 ? out2.at(b, h, s, d) * w2 : 0.0f;
          out.at(b, h, s, d) = (a + c) * inv;
        }
        lse.at(b, h, s, 0) = total > 0 ? m + std::log(total) : neg_inf;
      }
    }
  }
}

}  // namespace seqattn
