#include "common/statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace sb {

double quantile_of_sorted(const std::vector<double>& sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double h = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  if (lo + 1 >= sorted.size()) return sorted.back();
  return sorted[lo] + (h - static_cast<double>(lo)) * (sorted[lo + 1] - sorted[lo]);
}

double median_of(std::vector<double> values) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }),
               values.end());
  std::sort(values.begin(), values.end());
  return quantile_of_sorted(values, 0.5);
}

double median_in_place(std::vector<double>& values) {
  if (values.empty()) return std::numeric_limits<double>::quiet_NaN();
  // quantile_of_sorted at 0.5 with the two order statistics it reads selected, not sorted.
  const double h = 0.5 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(h));
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(lo), values.end());
  const double low = values[lo];
  if (lo + 1 >= values.size()) return low;
  const double high = *std::min_element(values.begin() + static_cast<std::ptrdiff_t>(lo + 1), values.end());
  return low + (h - static_cast<double>(lo)) * (high - low);
}

std::optional<SampleStats> sample_stats(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  SampleStats s;
  s.count = static_cast<int64_t>(values.size());
  s.median = quantile_of_sorted(values, 0.5);
  s.min = values.front();
  s.max = values.back();
  s.p25 = quantile_of_sorted(values, 0.25);
  s.p75 = quantile_of_sorted(values, 0.75);
  s.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  return s;
}

}  // namespace sb
