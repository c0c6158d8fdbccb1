#pragma once
// 95 % intervals on speedups (docs/metrics.md, "Speedup intervals"), by percentile
// bootstrap [our rule]:
//   one run       speedup = median(baseline iter_ms) / median(run iter_ms) over measured
//                 iterations; each of kBootstrapResamples resamples draws iterations with
//                 replacement and takes the same ratio; the interval is the 2.5 % and
//                 97.5 % quantiles (linear, common/statistics.h) of the resampled ratios.
//                 Paired when both runs measured the same iterations (same seed and data:
//                 iteration i trains the same global batch in both): one draw of iteration
//                 numbers serves both, so what the batch's composition does to both cancels;
//                 otherwise the two runs' iterations are drawn independently
//   several runs  (a method over seeds or repetitions) the median over the runs of their
//                 speedups; each resample draws the runs with replacement, then each drawn
//                 run's iterations and its baseline's as above (a two-level bootstrap, so
//                 both the spread between runs and the noise within each count)
// Iterations are drawn independently: drift within a run is not modelled, which is why
// methods compared in one invocation should run interleaved. The random draws are
// seeded from the run names, so a report is the same every time it is written.

#include <cstdint>
#include <string>
#include <vector>

namespace sb {

inline constexpr int kBootstrapResamples = 2000;

struct SpeedupInterval {
  double low = 0;
  double high = 0;
  bool includes(double value) const { return low <= value && value <= high; }
  bool overlaps(const SpeedupInterval& other) const { return low <= other.high && other.low <= high; }
};

// One run against its baseline: measured iter_ms of each (both non-empty, else
// std::invalid_argument; paired ones of one length).
SpeedupInterval run_speedup_interval(const std::vector<double>& baseline_ms, const std::vector<double>& run_ms,
                                     bool paired, uint64_t seed, int resamples = kBootstrapResamples);

// The runs of one method, each as (its baseline's measured iter_ms, its own); paired: the
// two lists are the same iterations in the same order.
struct SpeedupPair {
  const std::vector<double>* baseline_ms;
  const std::vector<double>* run_ms;
  bool paired = false;
};
SpeedupInterval method_speedup_interval(const std::vector<SpeedupPair>& runs, uint64_t seed,
                                        int resamples = kBootstrapResamples);

// A seed from names (FNV-1a, 64 bits): the same on every platform.
uint64_t bootstrap_seed(const std::string& text);

}  // namespace sb
