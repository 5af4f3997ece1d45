// The internal interface every attention algorithm implements. attend() validates the
// common arguments, resolves the variant (explicit or by policy) and hands a Problem
// (src/core/problem.hpp) to the variant; the variant checks what only it knows, then runs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "seqattn/options.hpp"
#include "seqattn/tensor.hpp"
#include "src/core/problem.hpp"

namespace seqattn::detail {

// What a plan keeps of its variant: everything derived from the shape and the spec alone
// (block structure, random matrices), immutable, so one instance serves concurrent runs.
class PreparedVariant {
 public:
  virtual ~PreparedVariant() = default;
  virtual void run(const Problem& problem) const = 0;
  // The scratch a run of `planned` (shapes, threads; full key lengths) carves from a caller's
  // workspace (Problem::workspace), on planned.compute_path (the plan asks for the fp32 path
  // when it is made, for a tile path when a run first takes it); nullopt: the variant allocates
  // its own scratch and takes no workspace (the default).
  virtual std::optional<std::size_t> workspace_bytes(const Problem& planned) const {
    (void)planned;
    return std::nullopt;
  }
  // The same for a run that also asks for the attention weights (RunArgs::weights); nullopt:
  // the variant writes no weights (its check() refuses them), the default.
  virtual std::optional<std::size_t> weights_workspace_bytes(const Problem& planned) const {
    (void)planned;
    return std::nullopt;
  }
};

class AttentionVariant {
 public:
  virtual ~AttentionVariant() = default;
  virtual Variant id() const = 0;
  // Throws Error(kUnsupported / kInvalidArgument / kNotImplemented) for options or parameters
  // this variant cannot honour. Must not write to the problem's outputs.
  virtual void check(const Problem& problem, const VariantSpec& spec) const = 0;
  virtual Cost cost(const Problem& problem, const VariantSpec& spec) const = 0;
  // Whether cost() depends on the key lengths: when it does not, a run with key lengths reuses
  // the plan's cost instead of recounting (dense and sliding window count the structure only;
  // sliding window's recount built its band per run, an allocation in a steady loop).
  virtual bool cost_counts_key_lengths() const { return true; }
  virtual void run(const Problem& problem, const VariantSpec& spec) const = 0;
  // Called once per plan with a problem that carries shapes (no data) and passed check().
  // The default keeps the spec and calls run(problem, spec); variants with per-shape state
  // (patterns, matrices) build it here instead of on every run.
  virtual std::shared_ptr<const PreparedVariant> prepare(const Problem& shape,
                                                         const VariantSpec& spec) const;
};

// The variant implementing `id` (never kAuto). Variants are listed in variants/registry.cpp.
const AttentionVariant& variant_for(Variant id);

}  // namespace seqattn::detail
