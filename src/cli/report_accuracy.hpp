// The scaling report's accuracy section: each approximate variant's error against exact dense
// per S on every input family (input_families.hpp), not only on uniform random inputs.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <vector>

#include "src/cli/input_families.hpp"
#include "src/cli/report.hpp"

namespace seqattn::cli {

struct FamilyErrorPoint {
  InputFamily family = InputFamily::kUniform;
  std::int64_t seq = 0;
  std::string variant;
  double error = 0;
  std::int64_t rows = 0;  // query rows dense was computed on
};

struct AccuracyReport {
  std::vector<FamilyErrorPoint> points;
  double elapsed_seconds = 0;
};

// Every non-uniform family at every S the sweep measured: each non-dense variant once (all
// threads) against dense on up to config.error_rows evenly spaced query rows. The uniform
// column comes from the sweep's own points.
AccuracyReport run_accuracy(const ReportConfig& config,
                            const std::map<std::string, VariantSpec>& specs,
                            const std::vector<ReportPoint>& points);

void accuracy_markdown(std::ostream& md, const ReportConfig& config, const AccuracyReport& a,
                       const std::vector<ReportPoint>& points);
nlohmann::json accuracy_json(const AccuracyReport& a, const std::vector<ReportPoint>& points);

}  // namespace seqattn::cli
