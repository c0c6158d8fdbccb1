#pragma once
// Order statistics over a sample (a run's measured iterations, or a method's runs).
// Quantiles interpolate linearly between order statistics (numpy's default, "linear"):
// q-quantile of sorted x[0..n-1] = x[h] + (h - floor h)(x[floor h + 1] - x[floor h]),
// h = q (n - 1); the median of an even count is the mean of the middle pair.

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

namespace sb {

struct SampleStats {
  int64_t count = 0;
  double median = 0;
  double min = 0;
  double max = 0;
  double p25 = 0;
  double p75 = 0;
  double mean = 0;
};

// nullopt for an empty sample: absent data stays absent.
std::optional<SampleStats> sample_stats(std::vector<double> values);

double median_of(std::vector<double> values);  // 0 for an empty sample
double quantile_of_sorted(const std::vector<double>& sorted, double q);

// {"median", "min", "max", "p25", "p75"} (per-run spreads) or {"median", "min", "max",
// "count"} (aggregates over runs); null when absent.
nlohmann::json spread_to_json(const std::optional<SampleStats>& stats);
nlohmann::json range_to_json(const std::optional<SampleStats>& stats);

}  // namespace sb
