// The simulator's latency noise (harness/sim/latency_noise.h) and its fit to measured
// runs (harness/sim/fit/latency_noise_fit.h): the draws' distribution against the standard
// normal, the generator against an independent implementation of its definition,
// determinism by key, the DP rank term shared by a rank's micro-batches, the fit's
// absolute-moment estimates by hand and against data drawn from the model with a separate
// generator, which runs and ranks it reads, and the factor reaching every stage of a
// simulated micro-batch.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <random>
#include <utility>

#include "common/errors.h"
#include "harness/config/manifest.h"
#include "harness/records/iteration_record.h"
#include "harness/sim/fit/latency_noise_fit.h"
#include "harness/sim/latency_noise.h"
#include "harness/sim/run_simulator.h"
#include "harness/sim/sim_runner.h"
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
  EXPECT_EQ(LatencyNoise(0.0, 0.0, 3).factor(5, 1, 2), 1.0);
  const LatencyNoise a(0.2, 0.0, 11), b(0.2, 0.0, 11), c(0.2, 0.0, 12);
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
  EXPECT_THROW(LatencyNoise(-0.1, 0.0, 1), std::invalid_argument);
  EXPECT_THROW(LatencyNoise(0.1, -0.1, 1), std::invalid_argument);
}

TEST(LatencyNoise, FactorsFollowTheDefinitionComputedIndependently) {
  // Computed in Python from the definition in latency_noise.cpp (splitmix64 key chains from
  // the seed and from seed ^ 0x52414E4B5F4E4F49, Box-Muller): z(11; 4, 1, 3) =
  // -0.3486300520923561, z_rank(11; 4, 1) = 0.5248454636939024. The first is also what the
  // simulator drew before the rank term existed, so earlier simulations reproduce.
  EXPECT_NEAR(LatencyNoise(0.2, 0.0, 11).factor(4, 1, 3), 0.9326493210992184, 1e-13);
  EXPECT_NEAR(LatencyNoise(0.2, 0.1, 11).factor(4, 1, 3), 0.9829063194387233, 1e-13);
}

TEST(LatencyNoise, RankTermIsSharedByTheRanksMicroBatchesOfOneIteration) {
  const double sigma = 0.1, rank_sigma = 0.3;
  const LatencyNoise rank_only(0.0, rank_sigma, 5);
  EXPECT_EQ(rank_only.factor(2, 1, 0), rank_only.factor(2, 1, 7));
  EXPECT_NE(rank_only.factor(2, 1, 0), rank_only.factor(2, 0, 0));
  EXPECT_NE(rank_only.factor(2, 1, 0), rank_only.factor(3, 1, 0));
  // Both terms: log factors have variance sigma^2 + rank_sigma^2 over everything, sigma^2
  // around each (iteration, rank)'s own mean; the two terms are uncorrelated.
  const LatencyNoise both(sigma, rank_sigma, 5), micro_only(sigma, 0.0, 5);
  double sum = 0, sum_sq = 0, within_sq = 0, cross = 0;
  int n = 0, within_degrees = 0;
  for (int64_t it = 0; it < 200; ++it) {
    for (int64_t d = 0; d < 8; ++d) {
      std::vector<double> logs;
      for (int64_t m = 0; m < 6; ++m) {
        logs.push_back(std::log(both.factor(it, d, m)));
        // The micro-batch term alone is what `both` draws without its rank term.
        const double micro = std::log(micro_only.factor(it, d, m));
        const double rank = std::log(rank_only.factor(it, d, m));
        EXPECT_NEAR(logs.back(), micro + rank, 1e-12);
        cross += micro * rank;
      }
      double rank_mean = 0;
      for (double x : logs) rank_mean += x / static_cast<double>(logs.size());
      for (double x : logs) {
        within_sq += (x - rank_mean) * (x - rank_mean);
        sum += x;
        sum_sq += x * x;
        ++n;
      }
      within_degrees += static_cast<int>(logs.size()) - 1;
    }
  }
  const double mean = sum / n;
  EXPECT_NEAR(std::sqrt(sum_sq / n - mean * mean), std::sqrt(sigma * sigma + rank_sigma * rank_sigma), 0.02);
  EXPECT_NEAR(std::sqrt(within_sq / within_degrees), sigma, 0.004);
  // Standard error: sigma x rank_sigma x sqrt(6 x 1600) / 9600 = 0.0003 (1600 rank draws,
  // each multiplying 6 micro-batch draws).
  EXPECT_NEAR(cross / n, 0.0, 0.0015);
}

// sqrt(pi) / 2: sigma per unit of mean |x_j - x_k| (E|x_j - x_k| = 2 sigma / sqrt(pi)).
const double kSigmaPerAbsDifference = std::sqrt(M_PI) / 2;

TEST(LatencyNoiseFit, OneRankByHand) {
  // Ratios 2, 4, 8: logs a, 2a, 3a (a = ln 2); pairs a, 2a, a: mean 4a / 3.
  const double a = std::log(2.0), b = std::log(3.0);
  const LatencyNoiseSums s = latency_noise_sums({2.0, 4.0, 8.0}, {1.0, 1.0, 1.0});
  EXPECT_NEAR(s.within_abs_sum, 4 * a, 1e-12);
  EXPECT_EQ(s.within_pairs, 3);
  EXPECT_EQ(s.rank_pairs(), 0);
  EXPECT_EQ(s.microbatches, 3);
  EXPECT_NEAR(latency_noise_components(s).sigma, kSigmaPerAbsDifference * 4 * a / 3, 1e-12);
  EXPECT_EQ(latency_noise_components(s).rank_sigma, 0.0);
  // One factor for the whole iteration (drift, a stale profile) is no scatter.
  EXPECT_NEAR(latency_noise_sums({3.0, 6.0, 1.5}, {2.0, 4.0, 1.0}).within_abs_sum, 0.0, 1e-12);
  // Pooled over iterations: pairs a, 2a, a and b (ratios 3 and 1).
  LatencyNoiseSums pooled = s;
  pooled.add(latency_noise_sums({3.0, 1.0}, {1.0, 1.0}));
  EXPECT_NEAR(latency_noise_components(pooled).sigma, kSigmaPerAbsDifference * (4 * a + b) / 4, 1e-12);
  EXPECT_EQ(pooled.iterations, 2);
  // A single (usable) micro-batch has no scatter to measure; non-positive times are skipped.
  EXPECT_EQ(latency_noise_sums({5.0}, {4.0}).iterations, 0);
  EXPECT_EQ(latency_noise_sums({5.0, 0.0}, {4.0, 3.0}).iterations, 0);
  EXPECT_THROW(latency_noise_components(LatencyNoiseSums{}), std::invalid_argument);
  EXPECT_THROW(latency_noise_sums({1.0}, {1.0, 2.0}), std::invalid_argument);
  EXPECT_THROW(latency_noise_sums({1.0, 2.0}, {1.0, 2.0}, {0}), std::invalid_argument);
}

TEST(LatencyNoiseFit, WithinAndBetweenDpRanksByHand) {
  const double a = std::log(2.0);
  // Rank 0 ran ratios 1 and 4 (logs 0, 2a), rank 1 ratio 2 (log a): one pair within
  // (|2a|, sigma = sqrt(pi) a), equal rank means: rank_sigma 0.
  const LatencyNoiseSums same_means = latency_noise_sums({1.0, 4.0, 2.0}, {1.0, 1.0, 1.0}, {0, 0, 1});
  EXPECT_NEAR(same_means.within_abs_sum, 2 * a, 1e-12);
  EXPECT_EQ(same_means.within_pairs, 1);
  EXPECT_NEAR(same_means.rank_abs_sum, 0.0, 1e-12);
  EXPECT_EQ(same_means.rank_pair_sizes, (std::map<std::pair<int64_t, int64_t>, int64_t>{{{1, 2}, 1}}));
  EXPECT_NEAR(latency_noise_components(same_means).sigma, std::sqrt(M_PI) * a, 1e-12);
  EXPECT_EQ(latency_noise_components(same_means).rank_sigma, 0.0);
  // Rank 0 at its predictions, rank 1 at 4 x them (the ranks in any order): no scatter
  // within a rank; rank means 0 and 2a: 2a = sqrt(2 / pi) sqrt(2 rank_sigma^2), so
  // rank_sigma = sqrt(pi) a.
  const LatencyNoiseSums apart = latency_noise_sums({4.0, 1.0, 4.0, 1.0}, {1.0, 1.0, 1.0, 1.0}, {1, 0, 1, 0});
  EXPECT_NEAR(apart.within_abs_sum, 0.0, 1e-12);
  EXPECT_EQ(apart.within_pairs, 2);
  EXPECT_NEAR(apart.rank_abs_sum, 2 * a, 1e-12);
  const LatencyNoiseComponents c = latency_noise_components(apart);
  EXPECT_NEAR(c.sigma, 0.0, 1e-12);
  EXPECT_NEAR(c.rank_sigma, std::sqrt(M_PI) * a, 1e-9);
  EXPECT_TRUE(c.separable);
  // Both terms: pooled with an iteration whose two ranks of 2 micro-batches have the pairs
  // |0 - 2a| and |a - a| within and equal means (logs 0, 2a and a, a): within pairs sum
  // to 2a over 4, sigma = sqrt(pi) / 2 x a / 2; rank differences 2a and 0, mean a, both
  // with c = 1/2 + 1/2: a = sqrt(2 / pi) sqrt(2 r^2 + sigma^2), r = sqrt((pi a^2 / 2 -
  // sigma^2) / 2).
  LatencyNoiseSums both = apart;
  both.add(latency_noise_sums({1.0, 4.0, 2.0, 2.0}, {1.0, 1.0, 1.0, 1.0}, {0, 0, 1, 1}));
  const double sigma = kSigmaPerAbsDifference * a / 2;
  const LatencyNoiseComponents bc = latency_noise_components(both);
  EXPECT_NEAR(bc.sigma, sigma, 1e-12);
  EXPECT_NEAR(bc.rank_sigma, std::sqrt((M_PI * a * a / 2 - sigma * sigma) / 2), 1e-9);
  // One micro-batch per rank: the terms cannot be told apart. Rank pairs |a|, |2a|, |a|
  // with c = 2: 4a / 3 = sqrt(2 / pi) sqrt(2) sigma, the one-rank figure again.
  const LatencyNoiseComponents one_each =
      latency_noise_components(latency_noise_sums({2.0, 4.0, 8.0}, {1.0, 1.0, 1.0}, {0, 1, 2}));
  EXPECT_FALSE(one_each.separable);
  EXPECT_NEAR(one_each.sigma, kSigmaPerAbsDifference * 4 * a / 3, 1e-12);
  EXPECT_EQ(one_each.rank_sigma, 0.0);
}

struct DrawnIterations {
  LatencyNoiseSums sums;
  double rank_abs_mean = 0;  // the data's mean |rank mean difference|
};

// Iterations of 4 DP ranks with 1 to 4 micro-batches each, drawn with the standard
// library's generator (not the simulator's): log(measured / predicted) = drift + b + e,
// drift uniform in [-0.5, 0.5] per iteration, b ~ N(0, rank_sigma^2) per rank, e ~ N(0,
// sigma^2) per micro-batch; `burst_scale` multiplies b and e in every fourth iteration.
DrawnIterations draw_iterations(int iterations, double sigma, double rank_sigma, double burst_scale) {
  std::mt19937_64 generator(20261122);
  std::normal_distribution<double> standard(0.0, 1.0);
  std::uniform_real_distribution<double> drift(-0.5, 0.5);
  std::uniform_int_distribution<int> sizes(1, 4), predictions(50, 500);
  DrawnIterations out;
  for (int it = 0; it < iterations; ++it) {
    const double scale = it % 4 == 3 ? burst_scale : 1.0;
    std::vector<double> measured, predicted;
    std::vector<int64_t> ranks;
    const double level = drift(generator);
    for (int64_t d = 0; d < 4; ++d) {
      const double b = scale * rank_sigma * standard(generator);
      for (int m = sizes(generator); m > 0; --m) {
        const double p = predictions(generator);
        predicted.push_back(p);
        measured.push_back(p * std::exp(level + b + scale * sigma * standard(generator)));
        ranks.push_back(d);
      }
    }
    out.sums.add(latency_noise_sums(measured, predicted, ranks));
  }
  out.rank_abs_mean = out.sums.rank_abs_sum / static_cast<double>(out.sums.rank_pairs());
  return out;
}

TEST(LatencyNoiseFit, RecoversBothTermsFromDataDrawnFromTheModel) {
  // 3000 iterations; standard errors of the estimates about 0.001 (sigma) and 0.002
  // (rank_sigma).
  const LatencyNoiseComponents c = latency_noise_components(draw_iterations(3000, 0.12, 0.08, 1.0).sums);
  EXPECT_NEAR(c.sigma, 0.12, 0.005);
  EXPECT_NEAR(c.rank_sigma, 0.08, 0.01);
  EXPECT_TRUE(c.separable);
}

TEST(LatencyNoiseFit, BurstsAreMatchedInTheMeanNotInTheSquare) {
  // Every fourth iteration scatters 4 x as far. The fitted model's mean |rank mean
  // difference| (what the DP wait follows) equals the data's, where a model with the pooled
  // variances (sqrt(1/4 x 16 + 3/4) = 2.18 x the calm scale, against a mean scale of
  // 1/4 x 4 + 3/4 = 1.75) would overshoot it by about 25 %.
  const DrawnIterations drawn = draw_iterations(4000, 0.05, 0.05, 4.0);
  const LatencyNoiseComponents c = latency_noise_components(drawn.sums);
  EXPECT_NEAR(c.sigma, 0.05 * 1.75, 0.004);
  EXPECT_NEAR(c.rank_sigma, 0.05 * 1.75, 0.008);
  // The model's mean |rank mean difference| at the fit, by drawing from it.
  const DrawnIterations refit = draw_iterations(4000, c.sigma, c.rank_sigma, 1.0);
  EXPECT_NEAR(refit.rank_abs_mean / drawn.rank_abs_mean, 1.0, 0.03);
}

TEST(LatencyNoiseFit, ReadsMeasuredIterationsWithPredictionsOnly) {
  const std::filesystem::path dir = test::fresh_temp_dir("latency_noise_fit");
  // Iteration 0 is warm-up (wild ratios), iteration 1 has ratios 1 and 4, iteration 2 no
  // predictions: only iteration 1 counts, sigma = sqrt(pi) / 2 x |ln 4 - ln 1|.
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
  EXPECT_NEAR(fit.components.sigma, kSigmaPerAbsDifference * std::log(4.0), 1e-12);
  EXPECT_EQ(fit.components.rank_sigma, 0.0);
  EXPECT_EQ(fit.sums.iterations, 1);
  EXPECT_EQ(fit.sums.microbatches, 2);
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

TEST(LatencyNoiseFit, GroupsMicroBatchesByTheDpRankTheRecordNames) {
  const std::filesystem::path dir = test::fresh_temp_dir("latency_noise_fit_ranks");
  // Measured iteration 1: rank 0 at its predictions, rank 1 at 4 x them (the example of
  // WithinAndBetweenDpRanksByHand). Iteration 2 records no ranks: one rank, logs 0, 0,
  // 2a, 2a (a = ln 2).
  std::vector<IterationRecord> records(3);
  for (int64_t it = 0; it < 3; ++it) {
    IterationRecord& r = records[static_cast<size_t>(it)];
    r.iteration = it;
    r.warmup = false;
    r.microbatch_tokens = {100, 100, 100, 100};
    r.microbatch_ms = {10.0, 10.0, 40.0, 40.0};
    r.microbatch_pred_ms = {10.0, 10.0, 10.0, 10.0};
  }
  records[0].warmup = true;
  records[1].microbatch_dp_rank = {0, 0, 1, 1};
  // Iteration 3 names ranks for 2 of its 4 micro-batches: left out, not guessed.
  IterationRecord partial = records[2];
  partial.iteration = 3;
  partial.microbatch_ms = {10.0, 80.0, 10.0, 80.0};
  partial.microbatch_dp_rank = {0, 0};
  records.push_back(partial);
  test::write_measured_run_folder(dir / "measured", false, records);
  const LatencyNoiseSums sums = latency_noise_sums(dir / "measured" / "records.jsonl");
  const double a = std::log(2.0);
  EXPECT_EQ(sums.iterations, 2);
  // Within: iteration 1's pairs (0, 0) and (2a, 2a); iteration 2's six pairs, four of
  // them 2a apart.
  EXPECT_NEAR(sums.within_abs_sum, 8 * a, 1e-12);
  EXPECT_EQ(sums.within_pairs, 2 + 6);
  EXPECT_NEAR(sums.rank_abs_sum, 2 * a, 1e-12);  // iteration 1 alone
  EXPECT_EQ(sums.rank_pairs(), 1);
  // A cut-off line (a run killed mid-write) is named with its file and line, as the report
  // names it (read_iteration_records).
  std::ofstream(dir / "measured" / "records.jsonl", std::ios::app) << "{\"iteration\": 4, \"warm\n";
  try {
    latency_noise_sums(dir / "measured" / "records.jsonl");
    FAIL() << "a broken line must be refused";
  } catch (const ConfigError& e) {
    EXPECT_NE(e.file().find("records.jsonl:5"), std::string::npos) << e.file();
  }
  std::filesystem::remove_all(dir);
}

json noisy_manifest_json(double sigma, double rank_sigma = 0) {
  json j = test::small_simulation_manifest_json();
  if (sigma > 0) j["simulation"]["latency_noise"] = {{"sigma", sigma}};
  if (rank_sigma > 0) j["simulation"]["latency_noise"]["rank_sigma"] = rank_sigma;
  return j;
}

TEST(LatencyNoise, ScalesEveryStageOfItsMicroBatchAndLeavesThePlanAlone) {
  RunSimulator exact = test::simulator_of(noisy_manifest_json(0));
  RunSimulator noisy = test::simulator_of(noisy_manifest_json(0.3, 0.2));
  const LatencyNoise oracle(0.3, 0.2, 9);  // the manifest's seed
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
  j["simulation"]["latency_noise"]["rank_sigma"] = 2.5;
  EXPECT_EQ(test::manifest_error_path(j), "$.simulation.latency_noise.rank_sigma");
  j = noisy_manifest_json(0.1);
  j["simulation"]["latency_noise"]["cv"] = 0.1;
  EXPECT_EQ(test::manifest_error_path(j), "$.simulation.latency_noise.cv");
  const Manifest m = parse_manifest(noisy_manifest_json(0.1, 0.05), "m.json");
  ASSERT_TRUE(m.simulation.has_value());
  EXPECT_DOUBLE_EQ(m.simulation->latency_noise.sigma, 0.1);
  EXPECT_DOUBLE_EQ(m.simulation->latency_noise.rank_sigma, 0.05);
  EXPECT_EQ(manifest_to_json(parse_manifest(manifest_to_json(m), "m.json")), manifest_to_json(m));
  // A rank term alone is noise too; without one, the resolved manifest reads as before it
  // existed (earlier simulated runs are not refused as changed).
  EXPECT_TRUE(parse_manifest(noisy_manifest_json(0, 0.05), "m.json").simulation->latency_noise.enabled());
  EXPECT_FALSE(manifest_to_json(parse_manifest(noisy_manifest_json(0.1), "m.json"))
                   .at("simulation")
                   .at("latency_noise")
                   .contains("rank_sigma"));
  // Absent: no noise, and the resolved manifest does not invent the block.
  const Manifest quiet = parse_manifest(noisy_manifest_json(0), "m.json");
  EXPECT_FALSE(quiet.simulation->latency_noise.enabled());
  EXPECT_FALSE(manifest_to_json(quiet).at("simulation").contains("latency_noise"));
}

}  // namespace
}  // namespace sb
