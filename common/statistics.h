#pragma once
// Order statistics over a sample: the one definition every part of the project uses
// (reports, simulator validation, latency profiles, kernel benchmarks).
// Quantiles interpolate linearly between order statistics (numpy's default, "linear"):
// q-quantile of sorted x[0..n-1] = x[h] + (h - floor h)(x[floor h + 1] - x[floor h]),
// h = q (n - 1); the median of an even count is the mean of the middle pair.
// An empty sample has no statistics: NaN from the scalar functions, nullopt from
// sample_stats, so absent data stays absent.

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

std::optional<SampleStats> sample_stats(std::vector<double> values);

// `sorted` ascending; NaN when empty.
double quantile_of_sorted(const std::vector<double>& sorted, double q);

// The median of the finite values (NaN and infinities, which stand for "not measured",
// are left out); NaN when there are none.
double median_of(std::vector<double> values);

// median_of's value, bit for bit, of finite `values` by selection instead of a sort
// (O(n); the bootstrap's resamples take one each); reorders `values`. NaN when empty.
double median_in_place(std::vector<double>& values);

}  // namespace sb
