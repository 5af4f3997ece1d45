// What each variant folder contributes to the variant table (seqattn/variant_list.inc): its
// implementation (<stem>_variant()) and its row (<stem>_row(): parameters, description,
// whether auto may choose it). Both are reached through the table; nothing else lists the
// variants.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "seqattn/variant_params.hpp"
#include "src/kernel/decode/cache_rule.hpp"
#include "variants/attention_variant.hpp"

namespace seqattn::detail {

// Typed reads of one variant's parameter text; every error names the parameter.
class ParamReader {
 public:
  ParamReader(std::string_view variant, const VariantParams& params)
      : variant_(variant), params_(params) {}
  bool has(std::string_view name) const { return params_.find(name) != params_.end(); }
  std::int64_t integer(std::string_view name) const;
  std::uint64_t unsigned_integer(std::string_view name) const;
  float number(std::string_view name) const;
  std::vector<std::int64_t> integers(std::string_view name) const;  // "0,1,5"; "" = none
  const std::string& text(std::string_view name) const;

  // field = the parameter's value when it is given.
  void read(std::string_view name, std::int64_t& field) const {
    if (has(name)) field = integer(name);
  }
  void read(std::string_view name, std::uint64_t& field) const {
    if (has(name)) field = unsigned_integer(name);
  }

 private:
  std::string_view variant_;
  const VariantParams& params_;
};

// Text of the values params_of() writes.
std::string integers_text(const std::vector<std::int64_t>& values);
std::string number_text(float value);  // shortest text that reads back to the same float

struct VariantRow {
  std::vector<ParameterInfo> parameters;  // in the order apply() reads them
  bool auto_may_choose = false;           // a profile's budget may pick it
  bool quadratic = false;                 // cost grows as S_q·S_k (benches, report caps)
  // Its attention products run on the tile kernel (flash_forward), so the bf16 compute paths
  // apply to it (docs/architecture.md, "Compute paths"); false: they run in fp32.
  bool tile_kernel = false;
  // Whether and how it runs over a KvCache, on the decode kernel (src/kernel/decode/): null
  // when it does not (a cache run then names the variant in an Error), otherwise the key
  // visibility its spec gives the kernel.
  CacheRule (*over_cache)(const ConcreteSpec& spec) = nullptr;
  // Sets the spec's fields from the given parameters (only this variant's parameters are
  // present: the caller refuses the others). `spec` holds this variant's alternative.
  void (*apply)(const ParamReader& params, ConcreteSpec& spec) = nullptr;
  VariantParams (*params_of)(const ConcreteSpec& spec) = nullptr;
  std::string (*describe)(const ConcreteSpec& spec) = nullptr;
};

// Two functions per row of the table, defined in the row's folder variants/<stem>/: the
// implementation (a process-wide immutable instance) and the row.
#define SEQATTN_VARIANT(id, name, Spec, stem) \
  const AttentionVariant& stem##_variant();   \
  const VariantRow& stem##_row();
#include "seqattn/variant_list.inc"

// The row of `variant`; throws Error(kInvalidArgument) for kAuto (resolved before this).
const VariantRow& row_of(Variant variant);

}  // namespace seqattn::detail
