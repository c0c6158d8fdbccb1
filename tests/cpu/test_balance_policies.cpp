// LPT, LBB and SAB: every sample planned exactly once, capacity respected, oversized
// samples rejected before planning, DP loads within Graham's LPT bound, golden plans
// worked out by hand (see the comments), and SAB balancing predicted latency where LBB
// only balances tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "harness/balance/batch_planner.h"
#include "harness/balance/lpt.h"
#include "harness/balance/sab_batching.h"
#include "harness/data/deterministic_rng.h"
#include "tests/support/analytic_test_profile.h"

namespace sb {
namespace {

using Layout = std::vector<std::vector<std::vector<int64_t>>>;  // [rank][micro-batch] -> samples

Layout samples_of(const GlobalBatchPlan& plan) {
  Layout out;
  for (const auto& rank : plan.ranks) {
    out.emplace_back();
    for (const auto& mb : rank) out.back().push_back(mb.samples);
  }
  return out;
}

std::shared_ptr<const LatencyPredictor> analytic_predictor() {
  return std::make_shared<LatencyPredictor>(
      test::analytic_test_profile({256, 512, 1024, 2048, 4096}, {1, 2, 4, 8, 16, 32, 64}, 64));
}

TEST(Lpt, AssignFollowsDescendingCostToLightestBin) {
  // costs 8 1 6 3 5 7 -> order 8(0) 7(5) 6(2) 5(4) 3(3) 1(1) onto 2 bins:
  // 0->b0 [8,0]; 5->b1 [8,7]; 2->b1 [8,13]; 4->b0 [13,13]; 3->b0 (tie) [16,13]; 1->b1 [16,14].
  EXPECT_EQ(lpt_assign({8, 1, 6, 3, 5, 7}, 2), (std::vector<int64_t>{0, 1, 1, 0, 0, 1}));
}

TEST(Lpt, GrahamBoundHoldsOnRandomInstances) {
  DeterministicRng rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int64_t bins = rng.uniform_int(1, 8);
    std::vector<double> costs(static_cast<size_t>(rng.uniform_int(1, 40)));
    for (double& c : costs) c = static_cast<double>(rng.uniform_int(1, 1000));
    const auto bin_of = lpt_assign(costs, bins);
    std::vector<double> load(static_cast<size_t>(bins), 0);
    for (size_t i = 0; i < costs.size(); ++i) load[static_cast<size_t>(bin_of[i])] += costs[i];
    const double total = std::accumulate(costs.begin(), costs.end(), 0.0);
    const double largest = *std::max_element(costs.begin(), costs.end());
    EXPECT_LE(*std::max_element(load.begin(), load.end()), total / static_cast<double>(bins) + largest);
  }
}

// The rule written out directly (descending cost, ties to the lower item; the least-loaded
// bin by a scan of every bin, ties to the lower bin) against lpt_assign's heap, on
// instances full of ties: the same bin for every item.
TEST(Lpt, AssignEqualsTheRuleScanningEveryBin) {
  DeterministicRng rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int64_t bins = rng.uniform_int(1, 64);
    std::vector<double> costs(static_cast<size_t>(rng.uniform_int(1, 300)));
    for (double& c : costs) c = static_cast<double>(rng.uniform_int(0, 6)) * 0.5;
    std::vector<size_t> order(costs.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return costs[a] > costs[b]; });
    std::vector<double> load(static_cast<size_t>(bins), 0.0);
    std::vector<int64_t> expected(costs.size());
    for (size_t item : order) {
      size_t lightest = 0;
      for (size_t b = 1; b < load.size(); ++b) {
        if (load[b] < load[lightest]) lightest = b;
      }
      expected[item] = static_cast<int64_t>(lightest);
      load[lightest] += costs[item];
    }
    ASSERT_EQ(lpt_assign(costs, bins), expected) << "trial " << trial;
  }
}

TEST(Lpt, PackOpensBinsOnlyWhenNothingFits) {
  // sizes = costs 8 5 3 with capacity 10 from 2 bins: 8->b0; 5->b1; 3: b0 would hold 11,
  // so b1 [5, 3]. A 4th item of 9 fits nowhere: a third bin.
  EXPECT_EQ(lpt_pack({8, 5, 3}, {8, 5, 3}, 10, 0, 2), (std::vector<std::vector<int64_t>>{{0}, {1, 2}}));
  EXPECT_EQ(lpt_pack({8, 5, 3, 9}, {8, 5, 3, 9}, 10, 0, 2),
            (std::vector<std::vector<int64_t>>{{3}, {0}, {1, 2}}));
  // max_items 1: one item per bin.
  EXPECT_EQ(lpt_pack({1, 2}, {1, 2}, 10, 1, 1), (std::vector<std::vector<int64_t>>{{1}, {0}}));
  EXPECT_THROW(lpt_pack({1}, {11}, 10, 0, 1), std::invalid_argument);
}

TEST(LbbBatching, GoldenPlan) {
  auto lbb = make_batching_policy(BatchingKind::kLbb);
  // Stage 1 as in Lpt.AssignFollowsDescendingCostToLightestBin: rank 0 {0, 3, 4}
  // (8+3+5 = 16 tokens), rank 1 {1, 2, 5} (1+6+7 = 14).
  // Capacity 16: one micro-batch each, samples heaviest first.
  EXPECT_EQ(samples_of(lbb->plan({{8, 1, 6, 3, 5, 7}, 2, 16})), (Layout{{{0, 4, 3}}, {{5, 2, 1}}}));
  // Capacity 10: rank 0 needs ceil(16/10) = 2 bins: 8->b0, 5->b1, 3: b0 full -> b1.
  // Rank 1: 7->b0, 6->b1, 1 -> the lighter b1 (6 < 7).
  EXPECT_EQ(samples_of(lbb->plan({{8, 1, 6, 3, 5, 7}, 2, 10})), (Layout{{{0}, {4, 3}}, {{5}, {2, 1}}}));
}

TEST(SabBatching, BalancesPredictedLatencyWhereTokenBalanceDoesNot) {
  // One 2048-token sequence and eight of 512 at budget 32 (2048 keys per query): the long
  // one costs 20.48 + 41.94 = 62.42 ms, a short one 5.12 + 2.62 = 7.74 ms (1 layer).
  // LBB gives rank 0 {2048, 512, 512} (3072 tokens) and rank 1 six 512s (3072 tokens):
  // predicted 77.9 vs 46.4 ms. SAB puts all eight short ones on rank 1: 62.4 vs 61.9 ms.
  const auto predictor = analytic_predictor();
  const std::vector<int64_t> lengths{2048, 512, 512, 512, 512, 512, 512, 512, 512};
  BatchPlannerOptions options;
  options.dp = 2;
  options.max_tokens = 8192;
  options.budget.top_k = 32;
  options.budget.block_size = 64;
  options.batching = BatchingKind::kLbb;
  BatchPlanner lbb(options, predictor);
  options.batching = BatchingKind::kSab;
  BatchPlanner sab(options, predictor);
  const GlobalBatchPlan lbb_plan = lbb.plan(lengths);
  const GlobalBatchPlan sab_plan = sab.plan(lengths);
  EXPECT_EQ(samples_of(sab_plan), (Layout{{{0}}, {{1, 2, 3, 4, 5, 6, 7, 8}}}));
  const auto rank_ms = [&](const GlobalBatchPlan& plan, size_t r) {
    double ms = 0;
    for (const auto& mb : plan.ranks[r]) ms += mb.predicted_ms;
    return ms;
  };
  EXPECT_NEAR(rank_ms(lbb_plan, 0), 62.42 + 2 * 7.74, 0.01);
  EXPECT_NEAR(rank_ms(lbb_plan, 1), 6 * 7.74, 0.01);
  EXPECT_NEAR(rank_ms(sab_plan, 0), 62.42, 0.01);
  EXPECT_NEAR(rank_ms(sab_plan, 1), 8 * 5.12 + 8 * 2.62, 0.02);  // packed: one rest term of 4096 tokens
}

TEST(BatchingPolicies, EverySamplePlannedOnceWithinCapacityOnRandomBatches) {
  const auto predictor = analytic_predictor();
  DeterministicRng rng(11);
  for (const std::string name : {"sequential", "lbb", "sab"}) {
    for (int trial = 0; trial < 50; ++trial) {
      BatchPlannerOptions options;
      options.batching = batching_kind_options().from_name(name);
      options.dp = rng.uniform_int(1, 4);
      options.max_tokens = rng.uniform_int(4096, 9000);
      options.max_samples = rng.uniform_int(0, 3);
      options.budget.block_size = 64;
      BatchPlanner planner(options, predictor);
      std::vector<int64_t> lengths(static_cast<size_t>(rng.uniform_int(1, 24)));
      for (int64_t& l : lengths) l = rng.uniform_int(1, 4096);
      const GlobalBatchPlan plan = planner.plan(lengths);
      ASSERT_EQ(plan.dp(), options.dp);
      EXPECT_NO_THROW(plan.validate(lengths, options.max_tokens)) << name;
      for (const auto& rank : plan.ranks) {
        for (const auto& mb : rank) {
          if (options.max_samples > 0) EXPECT_LE(static_cast<int64_t>(mb.samples.size()), options.max_samples);
          EXPECT_EQ(mb.budget, options.budget.top_k);
          EXPECT_GT(mb.predicted_ms, 0);
        }
      }
    }
  }
}

TEST(BatchingPolicies, OversizedSampleIsAnErrorBeforePlanning) {
  for (const std::string name : {"sequential", "lbb", "sab"}) {
    BatchPlannerOptions options;
    options.batching = batching_kind_options().from_name(name);
    options.max_tokens = 1000;
    BatchPlanner planner(options, analytic_predictor());
    EXPECT_THROW(planner.plan({10, 1001}), std::invalid_argument) << name;
  }
}

TEST(BatchingPolicies, DataParallelLoadsWithinLptBound) {
  const auto predictor = analytic_predictor();
  DeterministicRng rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<int64_t> lengths(static_cast<size_t>(rng.uniform_int(4, 32)));
    for (int64_t& l : lengths) l = rng.uniform_int(64, 4096);
    const int64_t dp = rng.uniform_int(2, 4);
    // LBB: token loads.
    const GlobalBatchPlan lbb = make_batching_policy(BatchingKind::kLbb)->plan({lengths, dp, 1 << 20});
    std::vector<double> tokens;
    for (const auto& rank : lbb.ranks) {
      double t = 0;
      for (const auto& mb : rank) t += static_cast<double>(mb.tokens);
      tokens.push_back(t);
    }
    const double total = std::accumulate(lengths.begin(), lengths.end(), 0.0);
    const double longest = static_cast<double>(*std::max_element(lengths.begin(), lengths.end()));
    EXPECT_LE(*std::max_element(tokens.begin(), tokens.end()), total / static_cast<double>(dp) + longest);
    // SAB: predicted-latency loads (sample costs as SAB sees them).
    BudgetEstimator estimator({0.2, 32});
    SabBatching sab(*predictor, estimator, 1);
    const GlobalBatchPlan plan = sab.plan({lengths, dp, 1 << 20});
    std::vector<double> costs;
    for (int64_t l : lengths) costs.push_back(sab.sample_cost_ms(l));
    std::vector<double> load;
    for (const auto& rank : plan.ranks) {
      double ms = 0;
      for (const auto& mb : rank) {
        for (int64_t s : mb.samples) ms += costs[static_cast<size_t>(s)];
      }
      load.push_back(ms);
    }
    const double cost_total = std::accumulate(costs.begin(), costs.end(), 0.0);
    EXPECT_LE(*std::max_element(load.begin(), load.end()),
              cost_total / static_cast<double>(dp) + *std::max_element(costs.begin(), costs.end()) + 1e-9);
  }
}

TEST(BudgetEstimator, EmaPerPowerOfTwoBucketStartingAtTheDefault) {
  BudgetEstimator estimator({0.5, 32});
  EXPECT_EQ(BudgetEstimator::bucket_of(1), 0);
  EXPECT_EQ(BudgetEstimator::bucket_of(1023), 9);
  EXPECT_EQ(BudgetEstimator::bucket_of(1024), 10);
  EXPECT_DOUBLE_EQ(estimator.expected_budget(1500), 32);
  estimator.observe(1500, 16);  // bucket 10: 0.5 * 32 + 0.5 * 16
  EXPECT_DOUBLE_EQ(estimator.expected_budget(1024), 24);
  estimator.observe(2047, 8);  // 0.5 * 24 + 0.5 * 8
  EXPECT_DOUBLE_EQ(estimator.expected_budget(1100), 16);
  EXPECT_DOUBLE_EQ(estimator.expected_budget(2048), 32);  // another bucket, untouched
  BudgetEstimator restored({0.5, 32});
  restored.load_json(estimator.to_json());
  EXPECT_DOUBLE_EQ(restored.expected_budget(1100), 16);
}

TEST(BudgetEstimator, AGuessedDefaultIsReplacedByTheFirstObservation) {
  BudgetEstimator estimator({0.5, 1024, true});
  EXPECT_DOUBLE_EQ(estimator.expected_budget(300), 1024);
  estimator.observe(300, 100);  // bucket 8's first observation: its estimate
  EXPECT_DOUBLE_EQ(estimator.expected_budget(256), 100);
  estimator.observe(511, 60);  // then the EMA: 0.5 * 100 + 0.5 * 60
  EXPECT_DOUBLE_EQ(estimator.expected_budget(400), 80);
  EXPECT_DOUBLE_EQ(estimator.expected_budget(600), 1024);  // another bucket, untouched
}

TEST(BatchPlanner, ObservationsSteerSabAndStateRoundTrips) {
  BatchPlannerOptions options;
  options.batching = BatchingKind::kSab;
  options.dp = 2;
  options.max_tokens = 1 << 20;
  options.sab_ema_alpha = 1.0;  // the estimate becomes the last observation
  options.budget.top_k = 32;
  options.budget.block_size = 64;
  BatchPlanner planner(options, analytic_predictor());
  const std::vector<int64_t> lengths{2048, 512, 512, 512, 512, 512, 512, 512, 512};
  const GlobalBatchPlan first = planner.plan(lengths);
  // Pretend the long sequence ran with budget 1: its expected cost collapses to
  // 20.48 + 0.0131 * 64 ms, so SAB now spreads the short ones over both ranks.
  std::vector<std::vector<double>> realized;
  for (const auto& rank : first.ranks) {
    realized.emplace_back();
    for (const auto& mb : rank) realized.back().push_back(mb.samples.front() == 0 ? 1.0 : 32.0);
  }
  planner.observe(first, lengths, realized);
  const GlobalBatchPlan second = planner.plan(lengths);
  EXPECT_NE(samples_of(second), samples_of(first));
  BatchPlanner restored(options, analytic_predictor());
  restored.load_state(planner.state());
  EXPECT_EQ(samples_of(restored.plan(lengths)), samples_of(second));
}

TEST(BatchPlanner, CalibrationScalesPredictionsByMeasuredOverPredictedAndRoundTrips) {
  BatchPlannerOptions options;
  options.dp = 1;
  options.max_tokens = 1 << 20;
  options.max_samples = 1;
  options.budget.top_k = 8;
  options.budget.block_size = 64;
  options.latency_calibration_alpha = 1.0;  // the factor becomes the last ratio
  const auto predictor = analytic_predictor();
  BatchPlanner planner(options, predictor);
  ASSERT_NE(planner.calibration(), nullptr);
  const std::vector<int64_t> lengths{2048, 100};
  const GlobalBatchPlan first = planner.plan(lengths);
  const double long_raw = predictor->microbatch_ms({2048}, 8, 1);
  const double short_raw = predictor->microbatch_ms({100}, 8, 1);
  ASSERT_NEAR(first.ranks[0][0].predicted_ms, long_raw, 1e-12);
  // The long micro-batch ran twice as slow as predicted, the short one as predicted.
  planner.observe_latencies(first, {{2 * long_raw, short_raw}});
  const GlobalBatchPlan second = planner.plan(lengths);
  EXPECT_NEAR(second.ranks[0][0].predicted_ms, 2 * long_raw, 1e-9);
  EXPECT_NEAR(second.ranks[0][1].predicted_ms, short_raw, 1e-9);
  // The planner predicts with its own copy: the shared predictor is left as it was.
  EXPECT_NEAR(predictor->microbatch_ms({2048}, 8, 1), long_raw, 1e-12);
  // Observing the calibrated plan undoes the factor it was planned with.
  planner.observe_latencies(second, {{2 * long_raw, short_raw}});
  EXPECT_NEAR(planner.plan(lengths).ranks[0][0].predicted_ms, 2 * long_raw, 1e-9);

  BatchPlanner restored(options, predictor);
  restored.load_state(planner.state());
  EXPECT_NEAR(restored.plan(lengths).ranks[0][0].predicted_ms, 2 * long_raw, 1e-9);
  // Off (the default): no calibration, observations change nothing.
  options.latency_calibration_alpha = 0;
  BatchPlanner plain(options, predictor);
  EXPECT_EQ(plain.calibration(), nullptr);
  plain.observe_latencies(first, {{2 * long_raw, short_raw}});
  EXPECT_NEAR(plain.plan(lengths).ranks[0][0].predicted_ms, long_raw, 1e-12);
  EXPECT_FALSE(plain.state().contains("latency_calibration"));
  EXPECT_THROW(planner.observe_latencies(first, {}), std::invalid_argument);
}

TEST(BatchPlanner, ReportedFloorsSteerDstPredictionsAndRoundTrip) {
  BatchPlannerOptions options;
  options.batching = BatchingKind::kSequential;
  options.dp = 2;
  options.max_tokens = 1 << 20;
  options.max_samples = 1;
  options.sab_ema_alpha = 1.0;
  options.budget.kind = BudgetKind::kDst;
  options.budget.top_k = 8;
  options.budget.block_size = 64;
  options.budget.dst = DstOptions{DstAnchor::kMean, 0.1, 1, 64};
  const auto predictor = analytic_predictor();
  BatchPlanner planner(options, predictor);
  const std::vector<int64_t> lengths{4096, 1024, 1024, 512};  // sequential: 4096 | 1024 on rank 0
  const GlobalBatchPlan first = planner.plan(lengths);
  ASSERT_EQ(first.ranks[0][0].samples, (std::vector<int64_t>{0}));
  ASSERT_EQ(first.ranks[0][0].budget, 1);
  EXPECT_NEAR(first.ranks[0][0].predicted_ms, predictor->microbatch_ms({4096}, 8, 1), 1e-12);  // the prior

  std::vector<std::vector<double>> realized, floors;
  for (const auto& rank : first.ranks) {
    realized.emplace_back();
    floors.emplace_back();
    for (const auto& mb : rank) {
      realized.back().push_back(mb.samples.front() == 0 ? 3.0 : static_cast<double>(mb.budget));
      floors.back().push_back(mb.samples.front() == 0 ? 3.0 : 0.0);  // 0: no floor reported
    }
  }
  planner.observe(first, lengths, realized, floors);
  const GlobalBatchPlan second = planner.plan(lengths);
  EXPECT_NEAR(second.ranks[0][0].predicted_ms, predictor->microbatch_ms({4096}, 3, 1), 1e-12);
  EXPECT_NEAR(second.ranks[0][1].predicted_ms, first.ranks[0][1].predicted_ms, 1e-12);  // no floor seen

  BatchPlanner restored(options, predictor);
  restored.load_state(planner.state());
  EXPECT_NEAR(restored.plan(lengths).ranks[0][0].predicted_ms, second.ranks[0][0].predicted_ms, 1e-12);
  // A checkpoint from before the floor estimator resumes from the prior.
  nlohmann::json old_state = planner.state();
  old_state.erase("floor_estimator");
  BatchPlanner from_old(options, predictor);
  from_old.load_state(old_state);
  EXPECT_NEAR(from_old.plan(lengths).ranks[0][0].predicted_ms, first.ranks[0][0].predicted_ms, 1e-12);
  EXPECT_THROW(planner.observe(first, lengths, realized, {{1.0}}), std::invalid_argument);
}

TEST(BatchPlanner, KeptKeysAxisLearnsEachSequenceAtItsOwnLengthAndRoundTrips) {
  // Vertical-slash's axis on the closed form with block 1 (T = 0.01 L + 1e-5 L min(k, L)):
  // one micro-batch packs 1024 + 512 tokens; the fixed budget predicts each sequence at
  // its reference, the prior 1024 capped at its dense mean before any report.
  BatchPlannerOptions options;
  options.batching = BatchingKind::kSequential;
  options.max_tokens = 1 << 20;
  options.max_samples = 2;
  options.sab_ema_alpha = 0.5;
  options.budget.axis = BudgetAxis::kKeptKeys;
  options.budget.top_k = 1024;
  const auto predictor = std::make_shared<LatencyPredictor>(
      test::analytic_test_profile({256, 512, 1024, 2048, 4096}, {64, 128, 256, 512, 1024, 2048, 4096}, 1));
  BatchPlanner planner(options, predictor);
  const std::vector<int64_t> lengths{1024, 512};
  const GlobalBatchPlan first = planner.plan(lengths);
  ASSERT_EQ(first.ranks[0][0].samples, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(first.ranks[0][0].budget, 0);
  EXPECT_NEAR(first.ranks[0][0].predicted_ms, 15.36 + 1e-5 * (1024 * 513 + 512 * 257), 1e-9);

  // The layers report per sequence (the micro-batch's mean, 300, would teach both lengths
  // the same): each is learned at its own length, the guessed prior replaced at once.
  planner.observe(first, lengths, {{300.0}}, {}, {400.0, 200.0}, {410.0, 190.0});
  const GlobalBatchPlan second = planner.plan(lengths);
  EXPECT_NEAR(second.ranks[0][0].predicted_ms, 15.36 + 1e-5 * (1024 * 410 + 512 * 190), 1e-9);
  const nlohmann::json state = planner.state();
  EXPECT_DOUBLE_EQ(state["budget_estimator"]["buckets"]["10"].get<double>(), 400.0);  // SAB's: what ran
  EXPECT_DOUBLE_EQ(state["budget_estimator"]["buckets"]["9"].get<double>(), 200.0);
  EXPECT_DOUBLE_EQ(state["reference_estimator"]["buckets"]["9"].get<double>(), 190.0);
  // Then the EMA (alpha 0.5): 0.5 x 410 + 0.5 x 430.
  planner.observe(first, lengths, {{300.0}}, {}, {}, {430.0, 0.0});
  EXPECT_NEAR(planner.plan(lengths).ranks[0][0].predicted_ms, 15.36 + 1e-5 * (1024 * 420 + 512 * 190), 1e-9);

  BatchPlanner restored(options, predictor);
  restored.load_state(planner.state());
  EXPECT_NEAR(restored.plan(lengths).ranks[0][0].predicted_ms, 15.36 + 1e-5 * (1024 * 420 + 512 * 190), 1e-9);
  EXPECT_THROW(planner.observe(first, lengths, {{300.0}}, {}, {}, {1.0}), std::invalid_argument);
}

TEST(BatchPlanner, PoliciesThatNeedAProfileSayWhichKey) {
  BatchPlannerOptions options;
  options.batching = BatchingKind::kSab;
  try {
    BatchPlanner planner(options, nullptr);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("profile"), std::string::npos);
  }
  options.batching = BatchingKind::kSequential;
  options.budget.kind = BudgetKind::kDst;
  EXPECT_THROW(BatchPlanner(options, nullptr), std::invalid_argument);
}

}  // namespace
}  // namespace sb
