// The reference of any variant by its spec: one overload per alternative of ConcreteSpec,
// chosen by std::visit, so a row added to the variant table without a reference here does not
// compile. Random matrices a spec leaves to its seed are drawn as the library draws them.
#include <cmath>
#include <variant>

#include "reference.hpp"
#include "seqattn/attention.hpp"

namespace seqattn::reference {
namespace {

struct Inputs {
  const ConstTensor &q, &k, &v;
  const Mask& mask;
  std::optional<double> scale;
  const Positional& positional;

  double softmax_scale() const {
    return scale ? *scale : 1.0 / std::sqrt(static_cast<double>(q.shape[3]));
  }
};

std::vector<float> rows_of(const MatrixView<const float>& m) {
  std::vector<float> out;
  for (std::int64_t r = 0; r < m.rows; ++r) out.insert(out.end(), m.row(r), m.row(r) + m.cols);
  return out;
}

Result of(const DenseSpec&, const Inputs& in) {
  return dense(in.q, in.k, in.v, in.mask, in.softmax_scale(), {}, in.positional);
}

Result of(const SlidingWindowSpec& spec, const Inputs& in) {
  return sliding_window(in.q, in.k, in.v, spec, in.mask, in.softmax_scale(), in.positional);
}

Result of(const LinearSpec& spec, const Inputs& in) {
  const std::int64_t dim = in.q.shape[3];
  std::int64_t m = 0;
  std::vector<float> w;
  if (spec.feature_map == FeatureMap::kFavor) {
    m = spec.favor_matrix.data != nullptr ? spec.favor_matrix.rows
                                          : (spec.num_features > 0 ? spec.num_features : dim);
    w = spec.favor_matrix.data != nullptr ? rows_of(spec.favor_matrix)
                                          : favor_random_matrix(m, dim, spec.seed);
  }
  return linear(in.q, in.k, in.v, spec.feature_map, w, m, spec.epsilon, in.mask, in.scale,
                in.positional.rope);
}

Result of(const LinformerSpec& spec, const Inputs& in) {
  const std::int64_t s_k = in.k.shape[2];
  std::vector<float> e, f;
  MatrixView<const float> ev = spec.e, fv = spec.f;
  if (ev.data == nullptr) {
    e = linformer_random_projection(spec.proj_len, s_k, spec.seed);
    ev = {e.data(), spec.proj_len, s_k, s_k};
  }
  if (fv.data == nullptr) {
    f = linformer_random_projection(spec.proj_len, s_k, spec.seed + 1);
    fv = {f.data(), spec.proj_len, s_k, s_k};
  }
  return linformer(in.q, in.k, in.v, ev, fv, in.mask, in.softmax_scale(), in.positional.rope);
}

Result of(const HierarchicalSpec& spec, const Inputs& in) {
  return hierarchical(in.q, in.k, in.v, spec, in.mask, in.softmax_scale(), in.positional.rope);
}

Result of(const LshSpec& spec, const Inputs& in) {
  return lsh(in.q, in.k, in.v, spec, in.mask, in.softmax_scale());
}

}  // namespace

Result variant(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
               const ConcreteSpec& spec, const Mask& mask, std::optional<double> scale,
               const Positional& positional) {
  const Inputs in{q, k, v, mask, scale, positional};
  return std::visit([&](const auto& s) { return of(s, in); }, spec);
}

}  // namespace seqattn::reference
