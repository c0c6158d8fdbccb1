#pragma once
// How far a real micro-batch's compute time strays from the predictor's prediction, for
// the simulator (docs/simulator.md). Without it every simulated micro-batch takes exactly
// its prediction, so a plan balanced on predictions has no DP wait at all, while real
// ranks wait for each other by whatever the predictions missed.
//
// Model: micro-batch m of DP rank d in iteration i computes for
//   prediction x exp(sigma z_idm + rank_sigma z_id)
// on every stage, z standard normal: z_idm is the micro-batch's own scatter, z_id one draw
// the DP rank's micro-batches share in that iteration (a rank slowed for a while by what
// else runs on its cores, or by its clocks). The second term is what makes a rank's sum
// of micro-batches miss its prediction by more than independent scatter would: with n
// micro-batches per rank, independent scatter alone moves the sum by about sigma /
// sqrt(n), the shared draw by rank_sigma whatever n is. The factor's median is 1 (its mean
// exp((sigma^2 + rank_sigma^2) / 2)), matching the fit (latency_noise_fit.h), which
// measures differences within a rank and iteration and between the rank means of one
// iteration, and so never sees what moves a whole iteration. The draws come from a counter-based
// generator keyed by (seed, i, d, m) and (seed, i, d) in separate key domains: the same
// seed gives the same factors whatever order micro-batches are simulated in, and
// rank_sigma 0 gives exactly the factors of the micro-batch term alone.

#include <cstdint>

namespace sb {

class LatencyNoise {
 public:
  // sigma, rank_sigma >= 0 (both 0: no noise, every factor is exactly 1).
  LatencyNoise(double sigma, double rank_sigma, uint64_t seed);

  double factor(int64_t iteration, int64_t dp_rank, int64_t microbatch) const;

 private:
  double sigma_;
  double rank_sigma_;
  uint64_t seed_;
};

// A standard normal value determined by `key` alone (splitmix64, Box-Muller).
double keyed_standard_normal(uint64_t key);

}  // namespace sb
