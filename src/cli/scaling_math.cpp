#include "src/cli/scaling_math.hpp"

#include <cmath>

namespace seqattn::cli {

std::optional<PowerFit> fit_power_law(const std::vector<double>& n,
                                      const std::vector<double>& time) {
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  int count = 0;
  for (std::size_t i = 0; i < n.size() && i < time.size(); ++i) {
    if (!(n[i] > 0) || !(time[i] > 0) || !std::isfinite(time[i])) continue;
    const double x = std::log(n[i]), y = std::log(time[i]);
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
    ++count;
  }
  const double denominator = count * sxx - sx * sx;
  if (count < 2 || std::abs(denominator) < 1e-12) return std::nullopt;
  PowerFit fit;
  fit.exponent = (count * sxy - sx * sy) / denominator;
  fit.coefficient = std::exp((sy - fit.exponent * sx) / count);
  fit.points = count;
  return fit;
}

Crossover find_crossover(const std::vector<double>& n, const std::vector<double>& candidate,
                         const std::vector<double>& baseline) {
  struct Point {
    double n, log_n, log_ratio;
  };
  std::vector<Point> points;
  for (std::size_t i = 0; i < n.size() && i < candidate.size() && i < baseline.size(); ++i) {
    if (!(candidate[i] > 0) || !(baseline[i] > 0) || !(n[i] > 0)) continue;
    points.push_back({n[i], std::log(n[i]), std::log(candidate[i] / baseline[i])});
  }
  if (points.empty()) return {std::nullopt, "no common measurements"};
  // The last transition from "not faster" to "faster": beyond it the candidate stays ahead.
  std::optional<std::size_t> after;
  for (std::size_t i = 1; i < points.size(); ++i) {
    if (points[i - 1].log_ratio >= 0 && points[i].log_ratio < 0) after = i;
  }
  if (points.back().log_ratio >= 0) return {std::nullopt, "never faster at the largest length"};
  if (!after) return {points.front().n, "faster at every measured length"};
  const Point& lo = points[*after - 1];
  const Point& hi = points[*after];
  const double t = lo.log_ratio / (lo.log_ratio - hi.log_ratio);
  return {std::exp(lo.log_n + t * (hi.log_n - lo.log_n)), "interpolated in log-log"};
}

}  // namespace seqattn::cli
