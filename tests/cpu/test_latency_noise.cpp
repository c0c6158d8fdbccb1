// The simulator's latency noise (harness/sim/latency_noise.h) and its fit to measured
// runs (harness/sim/latency_noise_fit.h): the draws' distribution against the standard
// normal, determinism by key, the fit's pooled within-iteration variance by hand, which
// runs it reads, and the factor reaching every stage of a simulated micro-batch.
#include <gtest/gtest.h>

#include <cmath>

#include "harness/common/errors.h"
#include "harness/config/manifest.h"
#include "harness/sim/latency_noise.h"
#include "harness/sim/latency_noise_fit.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
#include "harness/train/iteration_record.h"
#include "tests/support/manifest_error_path.h"
#include "tests/support/measured_run_folder.h"
#include "tests/support/run_command.h"
#include "tests/support/small_simulation.h"

namespace sb {
namespace {

using nlohmann::json;

TEST(LatencyNoise, KeyedDrawsAreStandardNormal) {
  // 40000 keyed draws: mean 0 (standard error 0.005), variance 1 (standard error 0.007),
  // 5 % beyond +-1.96 (standard error 0.0011).
  const int n = 40000;
  double sum = 0, sum_sq = 0;
  int tails = 0;
  for (int i = 0; i < n; ++i) {
    const double z = keyed_standard_normal(static_cast<uint64_t>(i));
    sum += z;
    sum_sq += z * z;
    if (std::abs(z) > 1.959964) ++tails;
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.02);
  EXPECT_NEAR(sum_sq / n - mean * mean, 1.0, 0.03);
  EXPECT_NEAR(static_cast<double>(tails) / n, 0.05, 0.005);
  EXPECT_EQ(keyed_standard_normal(7), keyed_standard_normal(7));
  EXPECT_NE(keyed_standard_normal(7), keyed_standard_normal(8));
}

TEST(LatencyNoise, FactorsAreLogNormalWithMedianOneAndFixedBySeedAndKey) {
  EXPECT_EQ(LatencyNoise(0.0, 3).factor(5, 1, 2), 1.0);
  const LatencyNoise a(0.2, 11), b(0.2, 11), c(0.2, 12);
  EXPECT_EQ(a.factor(4, 1, 3), b.factor(4, 1, 3));
  EXPECT_NE(a.factor(4, 1, 3), c.factor(4, 1, 3));
  // Every part of the key matters.
  EXPECT_NE(a.factor(4, 1, 3), a.factor(5, 1, 3));
  EXPECT_NE(a.factor(4, 1, 3), a.factor(4, 0, 3));
  EXPECT_NE(a.factor(4, 1, 3), a.factor(4, 1, 2));
  // log(factor) over many keys: mean 0, standard deviation sigma.
  double sum = 0, sum_sq = 0;
  int n = 0;
  for (int64_t it = 0; it < 100; ++it) {
    for (int64_t d = 0; d < 4; ++d) {
      for (int64_t m = 0; m < 50; ++m) {
        const double x = std::log(a.factor(it, d, m));
        sum += x;
        sum_sq += x * x;
        ++n;
      }
    }
  }
  const double mean = sum / n;
  EXPECT_NEAR(mean, 0.0, 0.01);
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), 0.2, 0.006);
  EXPECT_THROW(LatencyNoise(-0.1, 1), std::invalid_argument);
}

TEST(LatencyNoiseFit, PooledWithinIterationScatterByHand) {
  // Ratios 2, 4, 8: logs a, 2a, 3a (a = ln 2), iteration mean 2a, deviations -a, 0, a.
  const LatencyNoiseSums s = latency_noise_sums({2.0, 4.0, 8.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(s.sum_squared, 2 * std::log(2.0) * std::log(2.0), 1e-12);
  EXPECT_EQ(s.degrees, 2);
  EXPECT_EQ(s.microbatches, 3);
  EXPECT_NEAR(latency_noise_sigma(s), std::log(2.0), 1e-12);
  // One factor for the whole iteration (drift, a stale profile) is no scatter.
  EXPECT_NEAR(latency_noise_sums({3.0, 6.0, 1.5}, {2.0, 4.0, 1.0}).sum_squared, 0.0, 1e-12);
  // Pooled over iterations: (2 a^2 + b^2 / 2) / (2 + 1), b = ln 3.
  LatencyNoiseSums pooled = s;
  pooled.add(latency_noise_sums({3.0, 1.0}, {1.0, 1.0}));
  const double a = std::log(2.0), b = std::log(3.0);
  EXPECT_NEAR(latency_noise_sigma(pooled), std::sqrt((2 * a * a + b * b / 2) / 3), 1e-12);
  EXPECT_EQ(pooled.iterations, 2);
  // A single (usable) micro-batch has no scatter to measure; non-positive times are skipped.
  EXPECT_EQ(latency_noise_sums({5.0}, {4.0}).degrees, 0);
  EXPECT_EQ(latency_noise_sums({5.0, 0.0}, {4.0, 3.0}).degrees, 0);
  EXPECT_THROW(latency_noise_sigma(LatencyNoiseSums{}), std::invalid_argument);
  EXPECT_THROW(latency_noise_sums({1.0}, {1.0, 2.0}), std::invalid_argument);
}

TEST(LatencyNoiseFit, ReadsMeasuredIterationsWithPredictionsOnly) {
  const std::filesystem::path dir = test::fresh_temp_dir("latency_noise_fit");
  // Iteration 0 is warm-up (wild ratios), iteration 1 has ratios 1 and 4, iteration 2 no
  // predictions: only iteration 1 counts, sigma = |ln 4 - ln 1| / sqrt(2).
  const auto write_run = [&](const std::string& name, bool simulated) {
    std::vector<IterationRecord> records;
    for (int64_t it = 0; it < 3; ++it) {
      IterationRecord r;
      r.iteration = it;
      r.warmup = it == 0;
      r.microbatch_tokens = {100, 200};
      r.microbatch_ms = it == 0 ? std::vector<double>{1.0, 100.0} : std::vector<double>{10.0, 40.0};
      if (it < 2) r.microbatch_pred_ms = {10.0, 10.0};
      records.push_back(r);
    }
    test::write_measured_run_folder(dir / name, simulated, records);
  };
  write_run("measured", false);
  write_run("simulated", true);
  const LatencyNoiseFit fit = fit_latency_noise_from_results(dir, "m.json", "$.simulation.latency_noise.fit_from");
  EXPECT_NEAR(fit.sigma, std::log(4.0) / std::sqrt(2.0), 1e-12);
  EXPECT_EQ(fit.iterations, 1);
  EXPECT_EQ(fit.microbatches, 2);
  EXPECT_EQ(fit.runs, (std::vector<std::string>{(dir / "measured").string()}));
  std::filesystem::remove_all(dir / "measured");
  try {
    fit_latency_noise_from_results(dir, "m.json", "$.simulation.latency_noise.fit_from");
    FAIL() << "only a simulated run is left";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.simulation.latency_noise.fit_from");
  }
  EXPECT_THROW(fit_latency_noise_from_results(dir / "missing", "m.json", "$"), ConfigError);
  std::filesystem::remove_all(dir);
}

json noisy_manifest_json(double sigma) {
  json j = test::small_simulation_manifest_json();
  if (sigma > 0) j["simulation"]["latency_noise"] = {{"sigma", sigma}};
  return j;
}

TEST(LatencyNoise, ScalesEveryStageOfItsMicroBatchAndLeavesThePlanAlone) {
  RunSimulator exact = test::simulator_of(noisy_manifest_json(0));
  RunSimulator noisy = test::simulator_of(noisy_manifest_json(0.3));
  const LatencyNoise oracle(0.3, 9);  // the manifest's seed
  bool moved = false;
  for (int64_t it = 0; it < 3; ++it) {
    const SimulatedIteration x = exact.simulate_iteration(it), y = noisy.simulate_iteration(it);
    ASSERT_EQ(x.record.microbatch_lengths, y.record.microbatch_lengths) << "noise must not change the plan";
    ASSERT_FALSE(x.record.microbatch_pred_ms.empty()) << "sab predicts every micro-batch";
    EXPECT_EQ(x.record.microbatch_pred_ms, y.record.microbatch_pred_ms) << "nor the predictions";
    // Records list rank 0's micro-batches, then rank 1's.
    size_t k = 0;
    for (int64_t d = 0; d < 2; ++d) {
      for (size_t m = 0; m < x.plan.ranks[static_cast<size_t>(d)].size(); ++m, ++k) {
        const double f = oracle.factor(it, d, static_cast<int64_t>(m));
        EXPECT_NEAR(y.record.microbatch_ms.at(k), x.record.microbatch_ms.at(k) * f, 1e-9 * f);
        moved = moved || std::abs(f - 1.0) > 0.01;
      }
    }
  }
  EXPECT_TRUE(moved);
}

TEST(SimulationManifest, LatencyNoiseBlockIsCheckedAndRoundTrips) {
  json j = noisy_manifest_json(0.1);
  j["simulation"]["latency_noise"]["sigma"] = -0.5;
  EXPECT_EQ(test::manifest_error_path(j), "$.simulation.latency_noise.sigma");
  j = noisy_manifest_json(0.1);
  j["simulation"]["latency_noise"]["cv"] = 0.1;
  EXPECT_EQ(test::manifest_error_path(j), "$.simulation.latency_noise.cv");
  const Manifest m = parse_manifest(noisy_manifest_json(0.1), "m.json");
  ASSERT_TRUE(m.simulation.has_value());
  EXPECT_DOUBLE_EQ(m.simulation->latency_noise.sigma, 0.1);
  EXPECT_EQ(manifest_to_json(parse_manifest(manifest_to_json(m), "m.json")), manifest_to_json(m));
  // Absent: no noise, and the resolved manifest does not invent the block.
  const Manifest quiet = parse_manifest(noisy_manifest_json(0), "m.json");
  EXPECT_FALSE(quiet.simulation->latency_noise.enabled());
  EXPECT_FALSE(manifest_to_json(quiet).at("simulation").contains("latency_noise"));
}

}  // namespace
}  // namespace sb
