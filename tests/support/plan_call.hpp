// A one-shot call's options split as a plan takes them: make_plan gets the options without
// their per-call parts, run() gets those parts as RunArgs — the split attend() makes itself
// (detail::plan_options and detail::run_args).
#pragma once

#include "seqattn/plan.hpp"
#include "src/runtime/validate.hpp"

namespace seqattn::testing {

struct PlanCall {
  AttentionOptions planned;  // options without key lengths, keep, bias, lse and weights
  RunArgs args;              // views of the caller's options: keep them alive
};

inline PlanCall split_for_plan(const AttentionOptions& options) {
  return {detail::plan_options(options), detail::run_args(options)};
}

}  // namespace seqattn::testing
