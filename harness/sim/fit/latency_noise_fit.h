#pragma once
// Fits the simulator's latency noise (latency_noise.h: a micro-batch term sigma and a DP
// rank term rank_sigma) to measured runs.
//
// Observations: every measured (non-warm-up) iteration of the runs' records.jsonl that
// carries a prediction for each micro-batch (microbatch_pred_ms, the planner's, made
// before the iteration) and at least 2 micro-batches; per micro-batch
// x = log(microbatch_ms / microbatch_pred_ms), grouped by the DP rank that ran it
// (microbatch_dp_rank; records without it: one rank).
//
// Model, per iteration: x = a + b_d + e_dm, with a the iteration's own level (the
// machine's drift, a profile measured at another time: it delays every rank alike and so
// makes no DP wait, and is left out), b_d ~ N(0, rank_sigma^2) shared by DP rank d's
// micro-batches, e_dm ~ N(0, sigma^2) each micro-batch's own.
//
// Fit: the first absolute moments of differences, pooled over all pairs of all iterations
// (an iteration counts by its pairs), which take out a (and, within a rank, b_d):
//   sigma: over every pair of micro-batches of one rank in one iteration,
//     E|x_j - x_k| = 2 sigma / sqrt(pi), so sigma = sqrt(pi) / 2 x the mean |x_j - x_k|;
//   rank_sigma: over every pair of ranks (u, v) of one iteration, with rank means m and
//     micro-batch counts n, m_u - m_v ~ N(0, 2 rank_sigma^2 + sigma^2 (1/n_u + 1/n_v)), so
//     the mean |m_u - m_v| = sqrt(2 / pi) x the mean of sqrt(2 rank_sigma^2 + sigma^2 c_uv),
//     c_uv = 1/n_u + 1/n_v, solved for rank_sigma (bisection; 0 when sigma alone already
//     explains the differences).
// Why absolute moments and not variances: the DP wait is a first moment (with two ranks,
// |S_0 - S_1|), and this shared machine's scatter comes in bursts (runs, or parts of runs,
// whose ranks fight over cores): variances weight those bursts by their squares and the
// model fitted to them then makes every iteration wait as if it were in one.
// With one DP rank there are no rank pairs: rank_sigma is 0. When no rank ran 2
// micro-batches in any iteration the two terms cannot be told apart: sigma is then solved
// from the rank pairs with rank_sigma 0 (`separable` false). Records without
// microbatch_dp_rank count as one rank; an iteration whose list has the wrong length is
// left out.

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace sb {

struct LatencyNoiseSums {
  double within_abs_sum = 0;  // sum of |x_j - x_k| over pairs within a rank and iteration
  int64_t within_pairs = 0;
  double rank_abs_sum = 0;    // sum of |m_u - m_v| over pairs of ranks of one iteration
  // Per (n_u, n_v) with n_u <= n_v: how many rank pairs had those micro-batch counts.
  std::map<std::pair<int64_t, int64_t>, int64_t> rank_pair_sizes;
  int64_t microbatches = 0;
  int64_t iterations = 0;
  int64_t rank_pairs() const;
  void add(const LatencyNoiseSums& other);
};

// One iteration's measured and predicted micro-batch times and the DP rank of each (same
// length; empty dp_ranks: all rank 0). Pairs with a non-positive time are skipped; fewer
// than 2 usable micro-batches contribute nothing.
LatencyNoiseSums latency_noise_sums(const std::vector<double>& measured_ms, const std::vector<double>& predicted_ms,
                                    const std::vector<int64_t>& dp_ranks = {});

// Every usable iteration of one records.jsonl.
LatencyNoiseSums latency_noise_sums(const std::filesystem::path& records_file);

struct LatencyNoiseComponents {
  double sigma = 0;
  double rank_sigma = 0;
  bool separable = true;  // false: no two micro-batches shared a rank, everything went to sigma
};

// The estimates above; std::invalid_argument when the sums have no pair at all.
LatencyNoiseComponents latency_noise_components(const LatencyNoiseSums& sums);

struct LatencyNoiseFit {
  LatencyNoiseComponents components;
  LatencyNoiseSums sums;
  std::vector<std::string> runs;  // run folders the observations came from
};

// Every measured run under results_dir (measured_runs.h). Throws ConfigError naming
// json_path in manifest_file when the folder is missing, no iteration is usable, or a
// fitted term is above 2 (the largest a manifest accepts).
LatencyNoiseFit fit_latency_noise_from_results(const std::filesystem::path& results_dir,
                                               const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
