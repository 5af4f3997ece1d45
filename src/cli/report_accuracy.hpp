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

// LSH attention on the clustered family with `hashes` rounds (its other parameters as in the
// report): how its error against dense falls as rounds are added.
struct LshHashesPoint {
  std::int64_t seq = 0;
  std::int64_t hashes = 0;
  double error = 0;
};

struct AccuracyReport {
  std::vector<FamilyErrorPoint> points;
  std::vector<LshHashesPoint> lsh_hashes;
  double elapsed_seconds = 0;
};

// Every non-uniform family at every S the sweep measured: each non-dense variant once (all
// threads) against dense on up to config.error_rows evenly spaced query rows. The uniform
// column comes from the sweep's own points. Where LSH was measured, it also runs on the
// clustered family with 1, 2, 4 and 8 hashes.
AccuracyReport run_accuracy(const ReportConfig& config,
                            const std::map<std::string, VariantSpec>& specs,
                            const std::vector<ReportPoint>& points);

void accuracy_markdown(std::ostream& md, const ReportConfig& config, const AccuracyReport& a,
                       const std::vector<ReportPoint>& points);
nlohmann::json accuracy_json(const AccuracyReport& a, const std::vector<ReportPoint>& points);
nlohmann::json lsh_hashes_json(const AccuracyReport& a);  // [{seq, hashes, relative_error}]

}  // namespace seqattn::cli
