#include "harness/sim/fit/latency_noise_fit.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "common/errors.h"
#include "harness/records/iteration_record.h"
#include "harness/records/measured_runs.h"

namespace sb {

int64_t LatencyNoiseSums::rank_pairs() const {
  int64_t pairs = 0;
  for (const auto& [sizes, count] : rank_pair_sizes) pairs += count;
  return pairs;
}

void LatencyNoiseSums::add(const LatencyNoiseSums& other) {
  within_abs_sum += other.within_abs_sum;
  within_pairs += other.within_pairs;
  rank_abs_sum += other.rank_abs_sum;
  for (const auto& [sizes, count] : other.rank_pair_sizes) rank_pair_sizes[sizes] += count;
  microbatches += other.microbatches;
  iterations += other.iterations;
}

LatencyNoiseSums latency_noise_sums(const std::vector<double>& measured_ms, const std::vector<double>& predicted_ms,
                                    const std::vector<int64_t>& dp_ranks) {
  if (measured_ms.size() != predicted_ms.size()) {
    throw std::invalid_argument("latency_noise_sums: one prediction per measured micro-batch needed");
  }
  if (!dp_ranks.empty() && dp_ranks.size() != measured_ms.size()) {
    throw std::invalid_argument("latency_noise_sums: one DP rank per measured micro-batch needed");
  }
  std::map<int64_t, std::vector<double>> logs_by_rank;
  int64_t n = 0;
  for (size_t m = 0; m < measured_ms.size(); ++m) {
    if (!(measured_ms[m] > 0 && predicted_ms[m] > 0)) continue;
    logs_by_rank[dp_ranks.empty() ? 0 : dp_ranks[m]].push_back(std::log(measured_ms[m] / predicted_ms[m]));
    ++n;
  }
  LatencyNoiseSums sums;
  if (n < 2) return sums;
  struct RankMean {
    double mean;
    int64_t size;
  };
  std::vector<RankMean> means;
  for (const auto& [rank, logs] : logs_by_rank) {
    double mean = 0;
    for (size_t j = 0; j < logs.size(); ++j) {
      mean += logs[j];
      for (size_t k = j + 1; k < logs.size(); ++k) {
        sums.within_abs_sum += std::abs(logs[j] - logs[k]);
        ++sums.within_pairs;
      }
    }
    means.push_back({mean / static_cast<double>(logs.size()), static_cast<int64_t>(logs.size())});
  }
  for (size_t u = 0; u < means.size(); ++u) {
    for (size_t v = u + 1; v < means.size(); ++v) {
      sums.rank_abs_sum += std::abs(means[u].mean - means[v].mean);
      ++sums.rank_pair_sizes[std::minmax(means[u].size, means[v].size)];
    }
  }
  sums.microbatches = n;
  sums.iterations = 1;
  return sums;
}

LatencyNoiseSums latency_noise_sums(const std::filesystem::path& records_file) {
  LatencyNoiseSums sums;
  for (const IterationRecord& r : read_iteration_records(records_file)) {
    if (r.warmup || r.microbatch_pred_ms.size() != r.microbatch_ms.size()) continue;
    // No ranks recorded (older records, one rank): one group. Ranks recorded for only some
    // micro-batches: not to be guessed (pooling two ranks would count the rank term as
    // micro-batch scatter), so the iteration is left out.
    if (!r.microbatch_dp_rank.empty() && r.microbatch_dp_rank.size() != r.microbatch_ms.size()) continue;
    sums.add(latency_noise_sums(r.microbatch_ms, r.microbatch_pred_ms, r.microbatch_dp_rank));
  }
  return sums;
}

namespace {

// The mean over the rank pairs of E|m_u - m_v| under the model:
// sqrt(2 / pi) x sqrt(2 rank_sigma^2 + sigma^2 (1/n_u + 1/n_v)).
double expected_rank_abs_mean(const LatencyNoiseSums& sums, double sigma, double rank_sigma) {
  double total = 0;
  for (const auto& [sizes, count] : sums.rank_pair_sizes) {
    const double c = 1.0 / static_cast<double>(sizes.first) + 1.0 / static_cast<double>(sizes.second);
    total += static_cast<double>(count) * std::sqrt(2 * rank_sigma * rank_sigma + sigma * sigma * c);
  }
  return std::sqrt(2.0 / M_PI) * total / static_cast<double>(sums.rank_pairs());
}

}  // namespace

LatencyNoiseComponents latency_noise_components(const LatencyNoiseSums& sums) {
  const int64_t rank_pairs = sums.rank_pairs();
  if (sums.within_pairs + rank_pairs == 0) {
    throw std::invalid_argument("latency noise fit: no iteration with 2 predicted micro-batches");
  }
  LatencyNoiseComponents c;
  if (sums.within_pairs > 0) {
    c.sigma = std::sqrt(M_PI) / 2 * sums.within_abs_sum / static_cast<double>(sums.within_pairs);
  }
  if (rank_pairs == 0) return c;  // one rank: the within pairs alone
  const double measured = sums.rank_abs_sum / static_cast<double>(rank_pairs);
  if (sums.within_pairs == 0) {  // sigma alone, from the rank pairs (linear in sigma)
    c.separable = false;
    c.sigma = measured / expected_rank_abs_mean(sums, 1.0, 0.0);
    return c;
  }
  if (expected_rank_abs_mean(sums, c.sigma, 0.0) >= measured) return c;
  // The expectation grows with rank_sigma, at least as sqrt(4 / pi) rank_sigma: the root
  // lies below measured x sqrt(pi) / 2 + 1e-12.
  double low = 0, high = measured * std::sqrt(M_PI) / 2 + 1e-12;
  for (int step = 0; step < 100 && high - low > 1e-15; ++step) {
    const double mid = (low + high) / 2;
    (expected_rank_abs_mean(sums, c.sigma, mid) < measured ? low : high) = mid;
  }
  c.rank_sigma = (low + high) / 2;
  return c;
}

LatencyNoiseFit fit_latency_noise_from_results(const std::filesystem::path& results_dir,
                                               const std::string& manifest_file, const std::string& json_path) {
  LatencyNoiseFit fit;
  for (const auto& dir : measured_run_dirs(results_dir, manifest_file, json_path)) {
    const LatencyNoiseSums sums = latency_noise_sums(dir / "records.jsonl");
    if (sums.iterations == 0) continue;
    fit.sums.add(sums);
    fit.runs.push_back(dir.string());
  }
  if (fit.sums.iterations == 0) {
    throw ConfigError(manifest_file, json_path,
                      "found no measured run under " + results_dir.string() +
                          " with predicted micro-batch times (microbatch_pred_ms) in iterations of 2 or more "
                          "micro-batches",
                      "point it at the results of a `sparsebalance run` whose methods name a latency profile, or "
                      "give sigma (and rank_sigma) instead");
  }
  fit.components = latency_noise_components(fit.sums);
  const double largest = std::max(fit.components.sigma, fit.components.rank_sigma);
  if (largest > 2) {
    throw ConfigError(manifest_file, json_path,
                      "the measured micro-batch times under " + results_dir.string() +
                          " scatter around their predictions by sigma = " + std::to_string(fit.components.sigma) +
                          ", rank_sigma = " + std::to_string(fit.components.rank_sigma) +
                          " (log scale), more than the 2 a manifest accepts",
                      "check that those runs used the profile they name, or give sigma (and rank_sigma) instead");
  }
  return fit;
}

}  // namespace sb
