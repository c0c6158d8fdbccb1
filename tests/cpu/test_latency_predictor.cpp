#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "common/errors.h"
#include "harness/latency/latency_predictor.h"
#include "harness/latency/microbatch_latency_curves.h"
#include "tests/support/analytic_test_profile.h"

namespace sb {
namespace {

using test::analytic_attention_ms;
using test::analytic_rest_ms;
using test::analytic_test_profile;

LatencyProfile grid_profile() { return analytic_test_profile({256, 512, 1024, 2048}, {1, 2, 4, 8}, 64); }

TEST(LatencyPredictor, ExactOnGridPoints) {
  const LatencyProfile profile = grid_profile();
  const LatencyPredictor predictor(profile);
  for (size_t i = 0; i < profile.seq_lens.size(); ++i) {
    for (size_t j = 0; j < profile.budgets.size(); ++j) {
      EXPECT_DOUBLE_EQ(predictor.layer_ms(profile.seq_lens[i], profile.budgets[j]),
                       profile.layer_ms[i][j].median);
    }
    EXPECT_DOUBLE_EQ(predictor.rest_ms(profile.seq_lens[i]), profile.rest_ms[i].median);
    EXPECT_DOUBLE_EQ(predictor.head_ms(profile.seq_lens[i]), profile.head_ms[i].median);
  }
}

TEST(LatencyPredictor, BilinearBetweenGridPointsAndBoundedByCorners) {
  const LatencyProfile profile = grid_profile();
  const LatencyPredictor predictor(profile);
  // (768, 3) lies in the cell [512, 1024] x [2, 4] at (0.5, 0.5): the mean of the corners.
  const double corners = profile.layer_ms[1][1].median + profile.layer_ms[1][2].median +
                         profile.layer_ms[2][1].median + profile.layer_ms[2][2].median;
  EXPECT_NEAR(predictor.layer_ms(768, 3), corners / 4, 1e-12);
  for (int64_t length = 256; length <= 2048; length += 37) {
    for (int64_t k = 1; k <= 8; ++k) {
      size_t i = 0, j = 0;
      while (i + 2 < profile.seq_lens.size() && length > profile.seq_lens[i + 1]) ++i;
      while (j + 2 < profile.budgets.size() && k > profile.budgets[j + 1]) ++j;
      const double lo = std::min({profile.layer_ms[i][j].median, profile.layer_ms[i + 1][j].median,
                                  profile.layer_ms[i][j + 1].median, profile.layer_ms[i + 1][j + 1].median});
      const double hi = std::max({profile.layer_ms[i][j].median, profile.layer_ms[i + 1][j].median,
                                  profile.layer_ms[i][j + 1].median, profile.layer_ms[i + 1][j + 1].median});
      const double v = predictor.layer_ms(length, k);
      EXPECT_GE(v, lo - 1e-12) << length << " " << k;
      EXPECT_LE(v, hi + 1e-12) << length << " " << k;
    }
  }
}

TEST(LatencyPredictor, ExtrapolatesLinearlyInLengthAndClampsBudget) {
  const LatencyProfile profile = grid_profile();
  const LatencyPredictor predictor(profile);
  // Beyond 2048: the line through (1024, .) and (2048, .) at budget 8.
  const double a = profile.layer_ms[2][3].median, b = profile.layer_ms[3][3].median;
  EXPECT_NEAR(predictor.layer_ms(4096, 8), b + 2 * (b - a), 1e-12);
  // Below 256: the line through (256, .) and (512, .), never below 0.
  const double c = profile.layer_ms[0][0].median, d = profile.layer_ms[1][0].median;
  EXPECT_NEAR(predictor.layer_ms(128, 1), std::max(0.0, c - 0.5 * (d - c)), 1e-12);
  EXPECT_GE(predictor.layer_ms(1, 1), 0.0);
  // Budgets outside [1, 8] are clamped.
  EXPECT_DOUBLE_EQ(predictor.layer_ms(1024, 100), predictor.layer_ms(1024, 8));
  EXPECT_DOUBLE_EQ(predictor.layer_ms(1024, 0), predictor.layer_ms(1024, 1));
}

TEST(LatencyPredictor, NonMonotoneBudgetRowsBecomeTheirRunningMaximum) {
  LatencyProfile profile = grid_profile();
  profile.layer_ms[1][2].median = profile.layer_ms[1][1].median - 1.0;  // noise: k=4 "cheaper" than k=2
  const LatencyPredictor predictor(profile);
  EXPECT_DOUBLE_EQ(predictor.layer_ms(512, 4), profile.layer_ms[1][1].median);
  for (int64_t k = 1; k < 8; ++k) EXPECT_LE(predictor.layer_ms(700, k), predictor.layer_ms(700, k + 1));
}

TEST(LatencyPredictor, PackedMicroBatchIsSumOfAttentionTermsPlusRestOfTotal) {
  const LatencyPredictor predictor(grid_profile());
  // Without a measured packed point nothing is shared: the plain sum.
  EXPECT_DOUBLE_EQ(predictor.attention_fixed_ms(), 0.0);
  // On grid points the analytic terms are exact: rest is linear, so rest(256 + 512) is exact too.
  const double expected = analytic_attention_ms(256, 4, 64) + analytic_attention_ms(512, 4, 64) +
                          analytic_rest_ms(768);
  EXPECT_NEAR(predictor.packed_layer_ms({256, 512}, 4), expected, 1e-12);
  EXPECT_NEAR(predictor.stage_ms({256, 512}, 4, 3, /*last_stage=*/true), 3 * expected, 1e-12);
  EXPECT_NEAR(predictor.microbatch_ms({256, 512}, 4, 5), 5 * expected, 1e-12);
  EXPECT_THROW(predictor.packed_layer_ms({}, 4), std::invalid_argument);
  EXPECT_THROW(predictor.packed_attention_ms({}), std::invalid_argument);
}

// A GPU-like profile: every attention call costs a fixed 2 ms (launches) plus its work,
// and the profile's packed point (4 x 256 tokens at k = 1) shows that 4 packed sequences
// pay the 2 ms once. Packing n sequences then pays it once.
LatencyProfile launch_bound_profile(double packed_fixed_ms) {
  LatencyProfile profile = grid_profile();
  for (auto& row : profile.layer_ms) {
    for (LatencyStat& point : row) point.median += 2.0;
  }
  profile.packed_count = 4;
  profile.packed_ms = LatencyStat{analytic_rest_ms(1024) + 4 * analytic_attention_ms(256, 1, 64) + packed_fixed_ms, 0, {}};
  return profile;
}

TEST(LatencyPredictor, PackedMicroBatchPaysTheMeasuredSharedAttentionCostOnce) {
  const LatencyProfile profile = launch_bound_profile(2.0);
  const LatencyPredictor predictor(profile);
  EXPECT_NEAR(predictor.attention_fixed_ms(), 2.0, 1e-12);
  // One sequence: its own layer time, exactly as before.
  EXPECT_NEAR(predictor.packed_layer_ms({512}, 4), profile.layer_ms[1][2].median, 1e-12);
  // Three sequences: three work terms, one fixed cost, rest of the total tokens.
  const double work = 2 * analytic_attention_ms(256, 4, 64) + analytic_attention_ms(512, 4, 64);
  EXPECT_NEAR(predictor.packed_layer_ms({256, 256, 512}, 4), 2.0 + work + analytic_rest_ms(1024), 1e-12);
  // Never below the largest sequence's own term.
  EXPECT_DOUBLE_EQ(predictor.packed_attention_ms({1.0, 1.5, 5.0}), 5.0);
  EXPECT_DOUBLE_EQ(predictor.packed_attention_ms({3.0, 4.0, 5.0}), 12.0 - 2 * 2.0);

  // A packed point as slow as the plain sum (per-sequence costs, as on this CPU) shares
  // nothing; a faster one than a single sequence's own attention cannot make packing free:
  // the shared part is clamped to [0, a(L0)].
  LatencyProfile per_sequence = launch_bound_profile(2.0 + 3 * 2.0);
  EXPECT_DOUBLE_EQ(LatencyPredictor(per_sequence).attention_fixed_ms(), 0.0);
  LatencyProfile slower = launch_bound_profile(2.0 + 4 * 2.0);
  EXPECT_DOUBLE_EQ(LatencyPredictor(slower).attention_fixed_ms(), 0.0);
  LatencyProfile too_fast = launch_bound_profile(-4.0);
  EXPECT_NEAR(LatencyPredictor(too_fast).attention_fixed_ms(), 2.0 + analytic_attention_ms(256, 1, 64), 1e-12);
}

TEST(LatencyProfile, PackedPointRoundTripsAndNeedsTwoSequences) {
  LatencyProfile profile = launch_bound_profile(2.0);
  nlohmann::json json = latency_profile_to_json(profile);
  EXPECT_EQ(json.at("packed_count"), 4);
  const LatencyProfile back = latency_profile_from_json(json, "<test>");
  ASSERT_TRUE(back.packed_ms.has_value());
  EXPECT_DOUBLE_EQ(back.packed_ms->median, profile.packed_ms->median);
  EXPECT_EQ(latency_profile_to_json(back), json);
  json["packed_count"] = 1;
  EXPECT_THROW(latency_profile_from_json(json, "<test>"), ConfigError);
  json.erase("packed_count");
  EXPECT_THROW(latency_profile_from_json(json, "<test>"), ConfigError);
  json.erase("packed_ms");
  EXPECT_FALSE(latency_profile_from_json(json, "<test>").packed_ms.has_value());
}

TEST(LatencyPredictor, HeadTermOnlyOnTheLastStageWhenEnabled) {
  const LatencyPredictor predictor(grid_profile(), LatencyPredictorOptions{/*include_head=*/true});
  const double layer = predictor.packed_layer_ms({1024}, 2);
  EXPECT_NEAR(predictor.stage_ms({1024}, 2, 2, false), 2 * layer, 1e-12);
  EXPECT_NEAR(predictor.stage_ms({1024}, 2, 2, true), 2 * layer + 0.002 * 1024, 1e-12);
}

// A profile whose whole-model time is 3 layers at k = 4 plus a head plus a known overhead.
LatencyProfile profile_with_model_ms(const std::vector<double>& overhead) {
  LatencyProfile p = grid_profile();
  p.model = {{"preset", "closed-form"}, {"num_hidden_layers", 3}};
  p.model_budget = 4;
  for (size_t i = 0; i < p.seq_lens.size(); ++i) {
    const double layers = 3 * p.layer_ms[i][2].median;
    p.model_ms.push_back(LatencyStat{layers + p.head_ms[i].median + overhead[i], 0, {}});
  }
  return p;
}

TEST(LatencyPredictor, MicroBatchPaysTheMeasuredOverheadOnce) {
  const std::vector<double> overhead{2.0, 2.5, 3.5, 5.5};  // at 256, 512, 1024, 2048 tokens
  const LatencyProfile profile = profile_with_model_ms(overhead);
  const LatencyPredictor predictor(profile);  // head left out: the overhead absorbs it
  for (size_t i = 0; i < profile.seq_lens.size(); ++i) {
    EXPECT_NEAR(predictor.microbatch_overhead_ms(profile.seq_lens[i]), overhead[i] + profile.head_ms[i].median, 1e-12);
  }
  // Interpolated in the total tokens of a packed micro-batch; constant below the grid.
  const double at_768 = 0.5 * (2.5 + 0.002 * 512) + 0.5 * (3.5 + 0.002 * 1024);
  EXPECT_NEAR(predictor.microbatch_overhead_ms(768), at_768, 1e-12);
  EXPECT_NEAR(predictor.microbatch_overhead_ms(16), 2.0 + 0.002 * 256, 1e-12);
  EXPECT_NEAR(predictor.microbatch_ms({256, 512}, 4, 5), 5 * predictor.packed_layer_ms({256, 512}, 4) + at_768, 1e-12);
  EXPECT_NEAR(predictor.stage_ms({256, 512}, 4, 5, true), 5 * predictor.packed_layer_ms({256, 512}, 4), 1e-12);

  // With the head counted on its own the overhead is what is left.
  const LatencyPredictor with_head(profile, LatencyPredictorOptions{true});
  EXPECT_NEAR(with_head.microbatch_overhead_ms(512), 2.5, 1e-12);
  // A whole model faster than its layers timed alone: the overhead is negative and the
  // micro-batch at model_budget on the grid is exactly the whole-model measurement.
  const LatencyProfile faster = profile_with_model_ms({-1.0, -1.5, -2.0, -3.0});
  const LatencyPredictor negative(faster, LatencyPredictorOptions{true});
  EXPECT_NEAR(negative.microbatch_overhead_ms(512), -1.5, 1e-12);
  EXPECT_NEAR(negative.microbatch_overhead_ms(768), -1.75, 1e-12);
  for (size_t i = 0; i < faster.seq_lens.size(); ++i) {
    EXPECT_NEAR(negative.microbatch_ms({faster.seq_lens[i]}, 4, 3), faster.model_ms[i].median, 1e-9);
  }
  // The sum never falls below 0: a whole model measured at almost nothing makes the raw
  // sum at a smaller budget negative.
  LatencyProfile tiny = profile_with_model_ms({0, 0, 0, 0});
  for (LatencyStat& stat : tiny.model_ms) stat = LatencyStat{1e-6, 0, {}};
  const LatencyPredictor clamped(tiny);
  const double raw = 3 * (clamped.layer_ms(512, 1) - clamped.layer_ms(512, 4)) + 1e-6;
  ASSERT_LT(raw, 0.0);
  EXPECT_NEAR(clamped.microbatch_overhead_ms(512) + 3 * clamped.layer_ms(512, 1), raw, 1e-9);
  EXPECT_DOUBLE_EQ(clamped.microbatch_ms({512}, 1, 3), 0.0);
  // Profiles without model_ms (analytic, older files) predict no overhead.
  EXPECT_DOUBLE_EQ(LatencyPredictor(grid_profile()).microbatch_overhead_ms(512), 0.0);
}

TEST(LatencyPredictor, OverheadSharesPutTheHeadOnTheLastStage) {
  const LatencyProfile profile = profile_with_model_ms({2.0, 2.5, 3.5, 5.5});
  const LatencyPredictor predictor(profile);  // head left out of stage_ms: it is in the overhead
  const double overhead = predictor.microbatch_overhead_ms(768);
  const double head = predictor.head_ms(768);
  for (int64_t stages : {1, 2, 4}) {
    double sum = 0;
    for (int64_t s = 0; s < stages; ++s) sum += predictor.microbatch_overhead_share_ms(768, s, stages);
    EXPECT_NEAR(sum, overhead, 1e-12) << stages << " stages";
  }
  EXPECT_NEAR(predictor.microbatch_overhead_share_ms(768, 0, 4), (overhead - head) / 4, 1e-12);
  EXPECT_NEAR(predictor.microbatch_overhead_share_ms(768, 3, 4), (overhead - head) / 4 + head, 1e-12);
  // With the head counted in the last stage's stage_ms, the overhead is spread evenly.
  const LatencyPredictor with_head(profile, LatencyPredictorOptions{true});
  EXPECT_NEAR(with_head.microbatch_overhead_share_ms(768, 3, 4), with_head.microbatch_overhead_ms(768) / 4, 1e-12);
  // No model_ms, no overhead to share; a stage outside the pipeline is an error.
  EXPECT_DOUBLE_EQ(LatencyPredictor(grid_profile()).microbatch_overhead_share_ms(768, 1, 2), 0.0);
  EXPECT_THROW(predictor.microbatch_overhead_share_ms(768, 2, 2), std::invalid_argument);
}

TEST(LatencyProfile, ModelMsRoundTripsAndMustMatchTheGrid) {
  LatencyProfile profile = profile_with_model_ms({1, 1, 1, 1});
  nlohmann::json json = latency_profile_to_json(profile);
  EXPECT_EQ(json.at("model_budget"), 4);
  EXPECT_EQ(latency_profile_to_json(latency_profile_from_json(json, "<test>")), json);
  json["model_budget"] = 3;  // not a profiled budget
  EXPECT_THROW(latency_profile_from_json(json, "<test>"), ConfigError);
  json = latency_profile_to_json(profile);
  json["model_ms"]["median"] = {1.0, 2.0};
  EXPECT_THROW(latency_profile_from_json(json, "<test>"), ConfigError);
}

TEST(LatencyProfile, MeasuredThreadsComeFromTheContextAndSurviveTheFile) {
  LatencyProfile profile = grid_profile();
  EXPECT_EQ(profile.measured_threads(), 0);  // nothing recorded: unknown
  profile.context["intra_op_threads"] = 1;
  EXPECT_EQ(profile.measured_threads(), 1);
  EXPECT_EQ(latency_profile_from_json(latency_profile_to_json(profile), "<test>").measured_threads(), 1);
  profile.context["intra_op_threads"] = 16;
  EXPECT_EQ(profile.measured_threads(), 16);
  profile.context["intra_op_threads"] = "two";  // not a count: unknown, not an error
  EXPECT_EQ(profile.measured_threads(), 0);
}

TEST(LatencyProfile, JsonRoundTripKeepsSamplesAndRejectsBadFiles) {
  LatencyProfile profile = grid_profile();
  profile.kind = "measured";
  profile.layer_ms[0][0] = latency_stat_from_samples({3.0, 1.0, 2.0, 10.0});
  EXPECT_DOUBLE_EQ(profile.layer_ms[0][0].median, 2.5);
  EXPECT_DOUBLE_EQ(profile.layer_ms[0][0].spread, 4.75 - 1.75);  // Q3 - Q1 of 1 2 3 10, linear interpolation
  const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sb_profile_" + std::to_string(::getpid()) + ".json");
  save_latency_profile(profile, file);
  const LatencyProfile loaded = load_latency_profile(file);
  EXPECT_EQ(latency_profile_to_json(loaded), latency_profile_to_json(profile));
  std::filesystem::remove(file);

  nlohmann::json bad = latency_profile_to_json(profile);
  bad["budgets"] = {1, 1, 4, 8};
  EXPECT_THROW(latency_profile_from_json(bad, "<test>"), ConfigError);
  bad = latency_profile_to_json(profile);
  bad["layer_ms"]["median"][1] = {1.0};
  try {
    latency_profile_from_json(bad, "<test>");
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.json_path(), "$.layer_ms[1]");
  }
  bad = latency_profile_to_json(profile);
  bad["unexpected"] = 1;
  EXPECT_THROW(latency_profile_from_json(bad, "<test>"), ConfigError);
}

// The grid lookups (binary searches) against the rule they implement, written as the scan
// it describes: the first segment whose right end is not below the length (the last one
// beyond the grid), the last budget column whose successor is not below the budget.
// Compared bitwise: the planner's plans must not move by a rounding unit.
TEST(LatencyPredictor, GridLookupsAreTheLinearScansBitForBit) {
  const LatencyProfile profile = profile_with_model_ms({2.0, 2.5, 3.5, 5.5});
  const LatencyPredictor predictor(profile);
  const auto along = [&](const std::vector<double>& series, int64_t length) {
    const std::vector<int64_t>& grid = profile.seq_lens;
    size_t i = 0;
    while (i + 2 < grid.size() && length > grid[i + 1]) ++i;
    const double x0 = static_cast<double>(grid[i]), x1 = static_cast<double>(grid[i + 1]);
    const double t = (static_cast<double>(length) - x0) / (x1 - x0);
    return std::max(0.0, series[i] + t * (series[i + 1] - series[i]));
  };
  std::vector<std::vector<double>> column(profile.budgets.size());  // running max over budgets, as the predictor's
  std::vector<double> rest;
  for (size_t i = 0; i < profile.seq_lens.size(); ++i) {
    double running = 0;
    for (size_t j = 0; j < profile.budgets.size(); ++j) {
      running = std::max(running, profile.layer_ms[i][j].median);
      column[j].push_back(running);
    }
    rest.push_back(profile.rest_ms[i].median);
  }
  for (int64_t length : {1, 100, 255, 256, 257, 511, 512, 700, 1023, 1024, 1500, 2047, 2048, 2049, 5000}) {
    EXPECT_EQ(predictor.rest_ms(length), along(rest, length)) << length;
    for (int64_t budget = -1; budget <= 10; ++budget) {
      const std::vector<int64_t>& b = profile.budgets;
      const int64_t k = std::clamp(budget, b.front(), b.back());
      size_t j = 0;
      while (j + 1 < b.size() && k > b[j + 1]) ++j;
      double expected = along(column[j], length);
      if (j + 1 < b.size() && k != b[j]) {
        const double hi = along(column[j + 1], length);
        expected += static_cast<double>(k - b[j]) / static_cast<double>(b[j + 1] - b[j]) * (hi - expected);
      }
      EXPECT_EQ(predictor.layer_ms(length, budget), expected) << length << " " << budget;
    }
  }
}

// DST's curves give, for every budget, the predictor's own micro-batch latency to the bit:
// one and several packed sequences, on and off the grid, with the head, the measured
// overhead, the shared packed cost and a calibration scale.
TEST(MicrobatchLatencyCurves, EqualThePredictorsMicrobatchLatencyBitForBit) {
  LatencyProfile profile = profile_with_model_ms({2.0, 2.5, 3.5, 5.5});
  profile.packed_count = 4;
  profile.packed_ms = LatencyStat{analytic_rest_ms(1024) + 4 * analytic_attention_ms(256, 1, 64) + 1.0, 0, {}};
  for (bool include_head : {false, true}) {
    for (bool scaled : {false, true}) {
      LatencyPredictor predictor(profile, LatencyPredictorOptions{include_head});
      if (scaled) predictor.set_microbatch_scale([](int64_t tokens) { return 1.0 + 1e-4 * static_cast<double>(tokens % 97); });
      const std::vector<int64_t> sample_lengths{300, 256, 2048, 77, 5000, 1024, 1000};
      const std::vector<std::vector<int64_t>> microbatches{{0}, {1, 3}, {2}, {4}, {5, 6, 0, 3}};
      MicrobatchLatencyCurves curves(predictor, /*total_layers=*/3, /*lowest_budget=*/2, /*highest_budget=*/6);
      for (const auto& samples : microbatches) {
        const size_t m = curves.add(samples, sample_lengths);
        std::vector<int64_t> lengths;
        for (int64_t s : samples) lengths.push_back(sample_lengths[static_cast<size_t>(s)]);
        for (int64_t k = 0; k <= 10; ++k) {  // inside and outside the located range and the grid
          EXPECT_EQ(curves.at(m, k), predictor.microbatch_ms(lengths, k, 3))
              << "micro-batch " << m << " k " << k << " head " << include_head << " scaled " << scaled;
        }
      }
      EXPECT_EQ(curves.size(), microbatches.size());
    }
  }
}

}  // namespace
}  // namespace sb
