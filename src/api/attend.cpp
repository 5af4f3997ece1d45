// attend(): validate → resolve the variant (explicit or by policy) → variant check → run.
#include <chrono>
#include <cmath>
#include <string>

#include "runtime/validate.hpp"
#include "seqattn/attention.hpp"
#include "seqattn/error.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn {
namespace {

struct Resolved {
  VariantSpec spec;
  std::string reason;
};

Resolved resolve(const VariantSpec& requested, const detail::Problem& p) {
  const auto* automatic = std::get_if<AutoSpec>(&requested);
  if (automatic == nullptr) {
    return {requested, "requested explicitly"};
  }
  const SelectionPolicy& policy = automatic->policy;
  Selection sel = select_variant(policy, p.seq_k());
  switch (sel.variant) {
    case Variant::kDense:
      return {DenseSpec{}, sel.reason};
    case Variant::kSlidingWindow:
      return {SlidingWindowSpec{policy.window, policy.window, {}}, sel.reason};
    case Variant::kLinear: {
      LinearSpec spec;
      spec.feature_map = parse_feature_map(policy.feature_map, "policy.feature_map");
      spec.num_features = policy.num_features;
      return {spec, sel.reason};
    }
    default:
      break;
  }
  throw Error(ErrorKind::kInvalidArgument, "policy",
              "a decision of dense, sliding-window or linear", std::string(to_string(sel.variant)));
}

}  // namespace

RunRecord attend(const ConstTensor& q, const ConstTensor& k, const ConstTensor& v,
                 const Tensor& out, const AttentionOptions& options) {
  const detail::Problem problem = detail::validate_problem(q, k, v, out, options);
  const Resolved resolved = resolve(options.variant, problem);
  const Variant id = variant_of(resolved.spec);
  const detail::AttentionVariant& impl = detail::variant_for(id);
  impl.check(problem, resolved.spec);
  const detail::Cost cost = impl.cost(problem, resolved.spec);

  const auto start = std::chrono::steady_clock::now();
  impl.run(problem, resolved.spec);
  const auto stop = std::chrono::steady_clock::now();

  RunRecord record;
  record.variant = id;
  record.reason = resolved.reason;
  record.flops = cost.flops;
  record.bytes = cost.bytes;
  record.seconds = std::chrono::duration<double>(stop - start).count();
  record.threads = problem.threads;
  record.simd_target = simd_target();
  return record;
}

}  // namespace seqattn
