#pragma once
// How far a real micro-batch's compute time strays from the predictor's prediction, for
// the simulator (docs/simulator.md). Without it every simulated micro-batch takes exactly
// its prediction, so a plan balanced on predictions has no DP wait at all, while real
// ranks wait for each other by whatever the predictions missed.
//
// Model: micro-batch m of DP rank d in iteration i computes for prediction x exp(sigma z)
// on every stage, z standard normal. The factor's median is 1 (its mean exp(sigma^2 / 2):
// 1.005 at sigma 0.1), matching the fit (latency_noise_fit.h), which measures the scatter
// of log(measured / predicted) around each iteration's own mean. z comes from a
// counter-based generator keyed by (seed, i, d, m): the same seed gives the same
// factors whatever order micro-batches are simulated in.

#include <cstdint>

namespace sb {

class LatencyNoise {
 public:
  // sigma >= 0 (0: no noise, every factor is exactly 1).
  LatencyNoise(double sigma, uint64_t seed);

  double factor(int64_t iteration, int64_t dp_rank, int64_t microbatch) const;

 private:
  double sigma_;
  uint64_t seed_;
};

// A standard normal value determined by `key` alone (splitmix64, Box-Muller).
double keyed_standard_normal(uint64_t key);

}  // namespace sb
