// The variants calibrate and report compare, with the parameters they are measured at, and
// accuracy checks against exact dense attention.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "seqattn/options.hpp"
#include "seqattn/variant_params.hpp"
#include "src/cli/measure.hpp"

namespace seqattn::cli {

struct CatalogueEntry {
  std::string name;  // the table's name, e.g. "sliding-window"
  ConcreteSpec spec;
  std::string parameters;  // describe(spec), e.g. "window 256+256", for tables
};

// One entry per row of the variant table, dense first: each variant's defaults with the
// given parameters it takes applied (--window reaches sliding-window, --block hierarchical).
std::vector<CatalogueEntry> catalogue(const VariantParams& given);

// Why `spec` cannot run (the kNotImplemented message), or nothing when it is built: one tiny
// attend() call decides.
std::optional<std::string> not_built_reason(const ConcreteSpec& spec);

// max |actual - reference| / max |reference| (the project's error metric).
double relative_error(const std::vector<float>& actual, const std::vector<float>& reference);

// Exact dense output for every `step`-th query row of `w` (rows 0, step, 2·step, …; all keys,
// no mask), [B, H, rows, D_v] contiguous. With step = 1 it is the full dense output.
struct SampledReference {
  std::int64_t step = 1;
  std::int64_t rows = 0;
  std::vector<float> out;
};
SampledReference dense_on_rows(const Workload& w, std::int64_t max_rows, int threads);

// The same rows picked out of a full [B, H, S, D_v] output.
std::vector<float> pick_rows(const Workload& w, const std::vector<float>& out,
                             const SampledReference& reference);

}  // namespace seqattn::cli
