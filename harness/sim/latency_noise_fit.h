#pragma once
// Fits the simulator's latency noise sigma (latency_noise.h) to measured runs.
//
// Observations: every measured (non-warm-up) iteration of the runs' records.jsonl that
// carries a prediction for each micro-batch (microbatch_pred_ms, the planner's, made
// before the iteration) and at least 2 micro-batches; per micro-batch
// x = log(microbatch_ms / microbatch_pred_ms).
// Fit: sigma^2 = sum over iterations of sum_m (x_m - mean_iteration(x))^2 divided by
// sum over iterations of (n_iteration - 1): the pooled within-iteration variance. Taking
// out each iteration's mean leaves out what moves a whole iteration together (the
// machine's drift, a profile measured at another time), which delays every rank alike
// and so makes no DP wait; what is left is what one micro-batch does that its neighbours
// do not.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sb {

struct LatencyNoiseSums {
  double sum_squared = 0;  // sum of squared deviations from the iteration means
  int64_t degrees = 0;     // sum of (micro-batches - 1) over the iterations used
  int64_t microbatches = 0;
  int64_t iterations = 0;
  void add(const LatencyNoiseSums& other);
};

// One iteration's measured and predicted micro-batch times (same length; pairs with a
// non-positive time are skipped).
LatencyNoiseSums latency_noise_sums(const std::vector<double>& measured_ms, const std::vector<double>& predicted_ms);

// Every usable iteration of one records.jsonl.
LatencyNoiseSums latency_noise_sums(const std::filesystem::path& records_file);

struct LatencyNoiseFit {
  double sigma = 0;
  int64_t microbatches = 0;
  int64_t iterations = 0;
  std::vector<std::string> runs;  // run folders the observations came from
};

// sqrt(sum_squared / degrees); std::invalid_argument when degrees is 0.
double latency_noise_sigma(const LatencyNoiseSums& sums);

// Every measured run under results_dir (measured_runs.h). Throws ConfigError naming
// json_path in manifest_file when the folder is missing, no iteration is usable, or the
// fitted sigma is above 2 (the largest a manifest accepts).
LatencyNoiseFit fit_latency_noise_from_results(const std::filesystem::path& results_dir,
                                               const std::string& manifest_file, const std::string& json_path);

}  // namespace sb
