#include "harness/report/speedup_interval.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <stdexcept>

#include "common/fnv1a.h"
#include "common/statistics.h"

namespace sb {
namespace {

// median_of (common/statistics.h) of a resample: by selection when the run's times are all
// finite (they are unless a record lacks its time), which gives the same bits.
double sample_median(std::vector<double>& sample, bool finite) {
  return finite ? median_in_place(sample) : median_of(sample);
}

bool all_finite(const std::vector<double>& values) {
  return std::all_of(values.begin(), values.end(), [](double v) { return std::isfinite(v); });
}

// The median of `n` values drawn with replacement from `values` (`finite`: all of them
// are); `scratch` is reused.
double resampled_median(const std::vector<double>& values, bool finite, std::mt19937_64& rng,
                        std::vector<double>& scratch) {
  std::uniform_int_distribution<size_t> pick(0, values.size() - 1);
  scratch.resize(values.size());
  for (double& v : scratch) v = values[pick(rng)];
  return sample_median(scratch, finite);
}

SpeedupInterval percentile_interval(std::vector<double> ratios) {
  std::sort(ratios.begin(), ratios.end());
  return {quantile_of_sorted(ratios, 0.025), quantile_of_sorted(ratios, 0.975)};
}

void check_pair(const SpeedupPair& pair) {
  if (pair.baseline_ms == nullptr || pair.run_ms == nullptr || pair.baseline_ms->empty() || pair.run_ms->empty()) {
    throw std::invalid_argument("speedup interval: a run or its baseline has no measured iteration");
  }
  if (pair.paired && pair.baseline_ms->size() != pair.run_ms->size()) {
    throw std::invalid_argument("speedup interval: paired runs measured different numbers of iterations");
  }
}

// A run and its baseline, with whether each one's times are all finite (read once).
struct Sample {
  const SpeedupPair* pair;
  bool baseline_finite, run_finite;
};

// One resampled ratio of a run: its iterations and its baseline's drawn together
// (paired) or apart.
double resampled_ratio(const Sample& sample, std::mt19937_64& rng, std::vector<size_t>& drawn,
                       std::vector<double>& scratch) {
  const SpeedupPair& pair = *sample.pair;
  if (!pair.paired) {
    const double baseline = resampled_median(*pair.baseline_ms, sample.baseline_finite, rng, scratch);
    return baseline / resampled_median(*pair.run_ms, sample.run_finite, rng, scratch);
  }
  std::uniform_int_distribution<size_t> pick(0, pair.run_ms->size() - 1);
  drawn.resize(pair.run_ms->size());
  for (size_t& i : drawn) i = pick(rng);
  scratch.resize(drawn.size());
  for (size_t k = 0; k < drawn.size(); ++k) scratch[k] = (*pair.baseline_ms)[drawn[k]];
  const double baseline = sample_median(scratch, sample.baseline_finite);
  for (size_t k = 0; k < drawn.size(); ++k) scratch[k] = (*pair.run_ms)[drawn[k]];
  return baseline / sample_median(scratch, sample.run_finite);
}

}  // namespace

uint64_t bootstrap_seed(const std::string& text) { return fnv1a64(text); }

SpeedupInterval run_speedup_interval(const std::vector<double>& baseline_ms, const std::vector<double>& run_ms,
                                     bool paired, uint64_t seed, int resamples) {
  return method_speedup_interval({SpeedupPair{&baseline_ms, &run_ms, paired}}, seed, resamples);
}

SpeedupInterval method_speedup_interval(const std::vector<SpeedupPair>& runs, uint64_t seed, int resamples) {
  if (runs.empty()) throw std::invalid_argument("speedup interval: no run");
  if (resamples < 1) throw std::invalid_argument("speedup interval: resamples must be >= 1");
  std::vector<Sample> samples;
  for (const SpeedupPair& pair : runs) {
    check_pair(pair);
    samples.push_back({&pair, all_finite(*pair.baseline_ms), all_finite(*pair.run_ms)});
  }
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick_run(0, runs.size() - 1);
  std::vector<double> ratios, per_run(runs.size()), scratch;
  std::vector<size_t> drawn;
  ratios.reserve(static_cast<size_t>(resamples));
  for (int b = 0; b < resamples; ++b) {
    for (double& ratio : per_run) {
      // One run alone is always itself: no draw, so its interval is the one-run bootstrap's.
      const Sample& sample = samples.size() == 1 ? samples[0] : samples[pick_run(rng)];
      ratio = resampled_ratio(sample, rng, drawn, scratch);
    }
    ratios.push_back(median_of(per_run));
  }
  return percentile_interval(std::move(ratios));
}

}  // namespace sb
