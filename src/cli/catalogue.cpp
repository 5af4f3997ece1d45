#include "src/cli/catalogue.hpp"

#include <algorithm>
#include <cmath>

#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "src/runtime/checked_size.hpp"

namespace seqattn::cli {

std::vector<CatalogueEntry> catalogue(const VariantParams& given) {
  std::vector<CatalogueEntry> entries;
  for (const Variant v : concrete_variants()) {
    VariantParams params;
    for (const ParameterInfo& p : parameters_of(v)) {
      if (const auto it = given.find(p.name); it != given.end()) params.insert(*it);
    }
    const ConcreteSpec spec = make_spec(v, params);
    entries.push_back({std::string(to_string(v)), spec, describe(spec)});
  }
  return entries;
}

std::optional<std::string> not_built_reason(const ConcreteSpec& spec) {
  Shape tiny;
  tiny.heads = tiny.kv_heads = 1;
  tiny.seq = 4;
  tiny.dim = tiny.dim_v = 4;
  Workload w(tiny);
  AttentionOptions options;
  options.variant = as_variant_spec(spec);
  options.threads = 1;
  try {
    attend(w.q_view(), w.k_view(), w.v_view(), w.out_view(), options);
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::kNotImplemented) return std::string(e.what());
    throw;
  }
  return std::nullopt;
}

double relative_error(const std::vector<float>& actual, const std::vector<float>& reference) {
  double max_diff = 0, max_ref = 0;
  for (std::size_t i = 0; i < reference.size() && i < actual.size(); ++i) {
    const double diff = std::abs(static_cast<double>(actual[i]) - reference[i]);
    max_diff = std::isnan(diff) ? INFINITY : std::max(max_diff, diff);
    max_ref = std::max(max_ref, std::abs(static_cast<double>(reference[i])));
  }
  return max_diff / std::max(max_ref, 1e-30);
}

SampledReference dense_on_rows(const Workload& w, std::int64_t max_rows, int threads) {
  const Shape& s = w.shape;
  SampledReference ref;
  ref.step = std::max<std::int64_t>(1, (s.seq + max_rows - 1) / max_rows);
  ref.rows = (s.seq + ref.step - 1) / ref.step;
  AnyConstTensor q = w.q_view();
  q.shape[2] = ref.rows;
  q.strides[2] *= ref.step;  // a strided view: the sampled rows, no copy
  ref.out = detail::checked_vector<float>(
      detail::checked_product({s.batch, s.heads, ref.rows, s.dim_v}, "--seq"), "--seq");
  AttentionOptions options;
  options.threads = threads;
  attend(q, w.k_view(), w.v_view(), bhsd(ref.out.data(), s.batch, s.heads, ref.rows, s.dim_v),
         options);
  return ref;
}

std::vector<float> pick_rows(const Workload& w, const std::vector<float>& out,
                             const SampledReference& reference) {
  const Shape& s = w.shape;
  std::vector<float> picked;
  picked.reserve(reference.out.size());
  for (std::int64_t bh = 0; bh < s.batch * s.heads; ++bh) {
    for (std::int64_t r = 0; r < reference.rows; ++r) {
      const float* row = out.data() + (bh * s.seq + r * reference.step) * s.dim_v;
      picked.insert(picked.end(), row, row + s.dim_v);
    }
  }
  return picked;
}

}  // namespace seqattn::cli
