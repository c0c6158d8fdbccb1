#include "harness/sim/latency_noise_fit.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <stdexcept>

#include "harness/common/errors.h"
#include "harness/sim/measured_runs.h"
#include "harness/train/iteration_record.h"

namespace sb {

void LatencyNoiseSums::add(const LatencyNoiseSums& other) {
  sum_squared += other.sum_squared;
  degrees += other.degrees;
  microbatches += other.microbatches;
  iterations += other.iterations;
}

LatencyNoiseSums latency_noise_sums(const std::vector<double>& measured_ms, const std::vector<double>& predicted_ms) {
  if (measured_ms.size() != predicted_ms.size()) {
    throw std::invalid_argument("latency_noise_sums: one prediction per measured micro-batch needed");
  }
  std::vector<double> logs;
  for (size_t m = 0; m < measured_ms.size(); ++m) {
    if (measured_ms[m] > 0 && predicted_ms[m] > 0) logs.push_back(std::log(measured_ms[m] / predicted_ms[m]));
  }
  LatencyNoiseSums sums;
  if (logs.size() < 2) return sums;
  double mean = 0;
  for (double x : logs) mean += x;
  mean /= static_cast<double>(logs.size());
  for (double x : logs) sums.sum_squared += (x - mean) * (x - mean);
  sums.degrees = static_cast<int64_t>(logs.size()) - 1;
  sums.microbatches = static_cast<int64_t>(logs.size());
  sums.iterations = 1;
  return sums;
}

LatencyNoiseSums latency_noise_sums(const std::filesystem::path& records_file) {
  std::ifstream in(records_file);
  if (!in) throw std::runtime_error("cannot open " + records_file.string());
  LatencyNoiseSums sums;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const IterationRecord r = iteration_record_from_json(nlohmann::json::parse(line));
    if (r.warmup || r.microbatch_pred_ms.size() != r.microbatch_ms.size()) continue;
    sums.add(latency_noise_sums(r.microbatch_ms, r.microbatch_pred_ms));
  }
  return sums;
}

double latency_noise_sigma(const LatencyNoiseSums& sums) {
  if (sums.degrees <= 0) throw std::invalid_argument("latency noise fit: no iteration with 2 predicted micro-batches");
  return std::sqrt(sums.sum_squared / static_cast<double>(sums.degrees));
}

LatencyNoiseFit fit_latency_noise_from_results(const std::filesystem::path& results_dir,
                                               const std::string& manifest_file, const std::string& json_path) {
  LatencyNoiseSums total;
  LatencyNoiseFit fit;
  for (const auto& dir : measured_run_dirs(results_dir, manifest_file, json_path)) {
    const LatencyNoiseSums sums = latency_noise_sums(dir / "records.jsonl");
    if (sums.degrees == 0) continue;
    total.add(sums);
    fit.runs.push_back(dir.string());
  }
  if (total.degrees == 0) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() +
                          " with predicted micro-batch times (microbatch_pred_ms) in iterations of 2 or more "
                          "micro-batches",
                      "point it at the results of a `sparsebalance run` whose methods name a latency profile, or "
                      "give sigma instead");
  }
  fit.sigma = latency_noise_sigma(total);
  if (fit.sigma > 2) {
    throw ConfigError(manifest_file, json_path,
                      "the measured micro-batch times under " + results_dir.string() +
                          " scatter around their predictions by sigma = " + std::to_string(fit.sigma) +
                          " (log scale), more than the 2 a manifest accepts",
                      "check that those runs used the profile they name, or give sigma instead");
  }
  fit.microbatches = total.microbatches;
  fit.iterations = total.iterations;
  return fit;
}

}  // namespace sb
