// Log-log arithmetic for the scaling report and calibration: power-law fits and crossovers.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace seqattn::cli {

// time ≈ coefficient · n^exponent, least squares on (log n, log time).
struct PowerFit {
  double coefficient = 0;
  double exponent = 0;
  int points = 0;
};

// Needs at least two points with distinct n > 0 and time > 0 (others are skipped); returns
// nothing otherwise.
std::optional<PowerFit> fit_power_law(const std::vector<double>& n,
                                      const std::vector<double>& time);

// Where `candidate` starts to beat `baseline`: the first n at which candidate/baseline drops
// below 1 after being >= 1, with log(ratio) interpolated linearly in log n between the two
// bracketing points. Inputs are aligned by index (same n); NaN entries are skipped.
struct Crossover {
  std::optional<double> n;  // nothing when the candidate never wins on the measured range
  std::string note;         // "interpolated", "faster at every measured length", "never faster"
};
Crossover find_crossover(const std::vector<double>& n, const std::vector<double>& candidate,
                         const std::vector<double>& baseline);

}  // namespace seqattn::cli
