// A one-shot call's options split as a plan takes them: make_plan gets the options without
// their per-call parts, run() gets those parts as RunArgs (as attend() splits them itself).
#pragma once

#include "seqattn/plan.hpp"

namespace seqattn::testing {

struct PlanCall {
  AttentionOptions planned;  // options without key lengths, keep, bias, lse and weights
  RunArgs args;              // views of the caller's options: keep them alive
};

inline PlanCall split_for_plan(const AttentionOptions& options) {
  PlanCall call;
  call.planned = options;
  call.planned.mask.key_lengths.clear();
  call.planned.mask.keep.reset();
  call.planned.mask.bias.reset();
  call.planned.lse.reset();
  call.planned.weights.reset();
  call.args.key_lengths = options.mask.key_lengths;
  call.args.keep = options.mask.keep;
  call.args.bias = options.mask.bias;
  call.args.lse = options.lse;
  call.args.weights = options.weights;
  return call;
}

}  // namespace seqattn::testing
