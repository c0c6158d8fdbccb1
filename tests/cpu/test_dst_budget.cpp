// DST (docs: sparsebalance.md 1.5) on the closed-form profile of analytic_test_profile.h
// (block 64, 1 layer): T(L, k) = 0.01 L + 1e-5 L min(64 k, L), exact at these grid lengths
// and linear in k between grid budgets, so expectations can be worked out by hand.
#include <gtest/gtest.h>

#include "harness/balance/batch_planner.h"
#include "harness/balance/dst_budget.h"
#include "harness/data/deterministic_rng.h"
#include "tests/support/analytic_test_profile.h"

namespace sb {
namespace {

LatencyPredictor analytic_predictor() {
  return LatencyPredictor(test::analytic_test_profile({256, 512, 1024, 2048, 4096}, {1, 2, 4, 8, 16, 32, 64}, 64));
}

// Micro-batches of one sequence each: 4096 | 1024, 1024 | 512 over two ranks.
GlobalBatchPlan four_microbatches(std::vector<int64_t>& lengths) {
  lengths = {4096, 1024, 1024, 512};
  GlobalBatchPlan plan;
  plan.ranks = {{PlannedMicroBatch{{0}, 4096}, PlannedMicroBatch{{1}, 1024}},
                {PlannedMicroBatch{{2}, 1024}, PlannedMicroBatch{{3}, 512}}};
  return plan;
}

std::vector<int64_t> budgets_of(const GlobalBatchPlan& plan) {
  std::vector<int64_t> out;
  for (const auto& rank : plan.ranks) {
    for (const auto& mb : rank) out.push_back(mb.budget);
  }
  return out;
}

BudgetOptions dst_options(DstAnchor anchor, double p) {
  BudgetOptions o;
  o.kind = BudgetKind::kDst;
  o.top_k = 8;
  o.block_size = 64;
  o.total_layers = 1;
  o.dst = DstOptions{anchor, p, 1, 64};
  return o;
}

// T(., 8): 4096 -> 40.96 + 20.97 = 61.93; 1024 -> 10.24 + 5.24 = 15.48; 512 -> 5.12 + 2.62 = 7.74.
TEST(DstBudget, MeanAnchorGolden) {
  // A = (61.93 + 15.48 + 15.48 + 7.74) / 4 = 25.16.
  // 4096 is the bottleneck; even k = 1 costs 40.96 + 2.62 > A: best effort k_min = 1.
  // 1024 is below A: K = 16 blocks; T(1024, 16) = 10.24 + 10.49 = 20.73 <= A -> 16.
  // 512 is below A but has only 8 blocks: stays at 8.
  const LatencyPredictor predictor = analytic_predictor();
  DstBudget dst(dst_options(DstAnchor::kMean, 0.1), predictor);
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  dst.assign(plan, lengths);
  EXPECT_NEAR(dst.last_anchor_ms(), (61.9315 + 15.4829 + 15.4829 + 7.7414) / 4, 1e-3);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{1, 16, 16, 8}));
  for (const auto& rank : plan.ranks) {
    for (const auto& mb : rank) {
      EXPECT_DOUBLE_EQ(mb.coverage_floor_ratio, 0.9);
      EXPECT_EQ(mb.coverage_reference_k, 8);
      EXPECT_NEAR(mb.predicted_ms, predictor.microbatch_ms({lengths[static_cast<size_t>(mb.samples[0])]}, mb.budget, 1), 1e-12);
    }
  }
}

TEST(DstBudget, RaiseRulesAnchorNoneAndDpSlack) {
  // The golden plan above: the anchor rule gives {1, 16, 16, 8}.
  // none: nothing above k0 = 8; the bottleneck is treated as before.
  // dp_slack: rank 0 (4096 at k 1 = 43.58, 1024 at 8 = 15.48) totals 59.06, rank 1 (1024
  // and 512 at 8) 23.22. Rank 0 is the slowest: even k = 9 for its 1024 (16.14, +0.66)
  // would lengthen it, so it stays at 8. Rank 1 may grow by 35.84: its 1024 takes the
  // anchor rule's 16 (20.73, +5.24); its 512 has 8 blocks and stays at 8.
  const LatencyPredictor predictor = analytic_predictor();
  for (const auto& [rule, expected] :
       {std::pair{DstRaiseRule::kAnchor, std::vector<int64_t>{1, 16, 16, 8}},
        std::pair{DstRaiseRule::kNone, std::vector<int64_t>{1, 8, 8, 8}},
        std::pair{DstRaiseRule::kDpSlack, std::vector<int64_t>{1, 8, 16, 8}}}) {
    BudgetOptions options = dst_options(DstAnchor::kMean, 0.1);
    options.dst.raise = rule;
    DstBudget dst(options, predictor);
    std::vector<int64_t> lengths;
    GlobalBatchPlan plan = four_microbatches(lengths);
    dst.assign(plan, lengths);
    EXPECT_EQ(budgets_of(plan), expected) << dst_raise_options().name_of(rule);
    double totals[2] = {0, 0};
    for (size_t r = 0; r < 2; ++r) {
      for (const auto& mb : plan.ranks[r]) {
        totals[r] += mb.predicted_ms;
        EXPECT_NEAR(mb.predicted_ms,
                    predictor.microbatch_ms({lengths[static_cast<size_t>(mb.samples[0])]}, mb.budget, 1), 1e-12);
      }
    }
    if (rule == DstRaiseRule::kDpSlack) EXPECT_LE(totals[1], totals[0]);
    if (rule == DstRaiseRule::kAnchor) EXPECT_GT(totals[0], 59.06) << "the docs' rule lengthens the slowest rank";
  }
  // With one DP rank there is no slack: dp_slack never raises.
  BudgetOptions options = dst_options(DstAnchor::kMean, 0.1);
  options.dst.raise = DstRaiseRule::kDpSlack;
  DstBudget dst(options, predictor);
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  plan.ranks = {{plan.ranks[0][0], plan.ranks[0][1], plan.ranks[1][0], plan.ranks[1][1]}};
  dst.assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{1, 8, 8, 8}));
  // A bottleneck on a rank with slack keeps its compression: rank 0 holds six 1024s (92.88,
  // the slowest), rank 1 a 2048 and a 256. A = (6 x 15.48 + 30.97 + 3.21) / 8 = 15.88; the
  // 2048 is the bottleneck (best effort k 1, 21.79), and rank 1's slack must not undo it.
  std::vector<int64_t> mixed{1024, 1024, 1024, 1024, 1024, 1024, 2048, 256};
  GlobalBatchPlan slack_plan;
  slack_plan.ranks.resize(2);
  for (int64_t i = 0; i < 6; ++i) slack_plan.ranks[0].push_back(PlannedMicroBatch{{i}, 1024});
  slack_plan.ranks[1] = {PlannedMicroBatch{{6}, 2048}, PlannedMicroBatch{{7}, 256}};
  DstBudget(options, predictor).assign(slack_plan, mixed);
  EXPECT_EQ(budgets_of(slack_plan), (std::vector<int64_t>{8, 8, 8, 8, 8, 8, 1, 8}));
  EXPECT_EQ(dst_raise_options().from_name("dp_slack"), DstRaiseRule::kDpSlack);
  EXPECT_THROW(dst_raise_options().from_name("always"), std::invalid_argument);
}

TEST(DstBudget, BottleneckRuleSmallestOrLargestFeasibleBudget) {
  // 1024 vs 512 tokens: A = (15.48 + 7.74) / 2 = 11.61; the 1024 one is the bottleneck and
  // T(1024, k) = 10.24 + 0.655 k <= 11.61 for k <= 2.09: feasible budgets {1, 2}.
  const LatencyPredictor predictor = analytic_predictor();
  const std::vector<int64_t> lengths{1024, 512};
  for (const auto& [rule, expected] : {std::pair{DstBottleneckRule::kSmallest, int64_t{1}},
                                      std::pair{DstBottleneckRule::kLargest, int64_t{2}}}) {
    BudgetOptions options = dst_options(DstAnchor::kMean, 0.2);
    options.dst.bottleneck = rule;
    DstBudget dst(options, predictor);
    GlobalBatchPlan plan;
    plan.ranks = {{PlannedMicroBatch{{0}, 1024}}, {PlannedMicroBatch{{1}, 512}}};
    dst.assign(plan, lengths);
    EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{expected, 8})) << dst_bottleneck_options().name_of(rule);
    EXPECT_DOUBLE_EQ(plan.ranks[0][0].coverage_floor_ratio, 0.8);
  }
  // With k_min 4 nothing in [4, 8] is feasible: both rules fall back to k_min.
  BudgetOptions options = dst_options(DstAnchor::kMean, 0.2);
  options.dst.k_min = 4;
  options.dst.bottleneck = DstBottleneckRule::kLargest;
  DstBudget dst(options, predictor);
  GlobalBatchPlan plan;
  plan.ranks = {{PlannedMicroBatch{{0}, 1024}}, {PlannedMicroBatch{{1}, 512}}};
  dst.assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{4, 8}));
}

TEST(DstBudget, MaxAnchorNeverLowersAndMinNeverRaises) {
  const LatencyPredictor predictor = analytic_predictor();
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  DstBudget max_dst(dst_options(DstAnchor::kMax, 0.1), predictor);
  max_dst.assign(plan, lengths);
  // A = 61.93 (the 4096 one keeps 8); 1024 rises to its 16 blocks; 512 has 8 blocks.
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{8, 16, 16, 8}));
  DstBudget min_dst(dst_options(DstAnchor::kMin, 0.1), predictor);
  min_dst.assign(plan, lengths);
  // A = 7.74: everything else is a bottleneck with no feasible k -> k_min.
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{1, 1, 1, 8}));

  DeterministicRng rng(5);
  for (int trial = 0; trial < 100; ++trial) {
    std::vector<int64_t> ls(static_cast<size_t>(rng.uniform_int(1, 12)));
    for (int64_t& l : ls) l = rng.uniform_int(16, 6000);
    BatchPlannerOptions options;
    options.batching = BatchingKind::kLbb;
    options.dp = rng.uniform_int(1, 3);
    options.max_tokens = 8192;
    options.budget = dst_options(DstAnchor::kMax, 0.1);
    options.budget.top_k = rng.uniform_int(2, 48);
    options.budget.dst.k_min = rng.uniform_int(1, options.budget.top_k);
    options.budget.dst.k_max = rng.uniform_int(options.budget.top_k, 64);
    auto predictor_ptr = std::make_shared<LatencyPredictor>(analytic_predictor());
    for (DstAnchor anchor : {DstAnchor::kMax, DstAnchor::kMin, DstAnchor::kMean}) {
      options.budget.dst.anchor = anchor;
      options.budget.dst.bottleneck = trial % 2 == 0 ? DstBottleneckRule::kSmallest : DstBottleneckRule::kLargest;
      BatchPlanner planner(options, predictor_ptr);
      for (const auto& rank : planner.plan(ls).ranks) {
        for (const auto& mb : rank) {
          EXPECT_GE(mb.budget, options.budget.dst.k_min);
          EXPECT_LE(mb.budget, options.budget.dst.k_max);
          if (anchor == DstAnchor::kMax) EXPECT_GE(mb.budget, options.budget.top_k);
          if (anchor == DstAnchor::kMin) EXPECT_LE(mb.budget, options.budget.top_k);
        }
      }
    }
  }
}

TEST(DstBudget, PZeroAsksForTheFullReferenceCoverage) {
  const LatencyPredictor predictor = analytic_predictor();
  DstBudget dst(dst_options(DstAnchor::kMean, 0.0), predictor);
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  dst.assign(plan, lengths);
  for (const auto& rank : plan.ranks) {
    for (const auto& mb : rank) {
      EXPECT_DOUBLE_EQ(mb.coverage_floor_ratio, 1.0);  // layers never go below C(k0)
      EXPECT_EQ(mb.coverage_reference_k, 8);
    }
  }
}

TEST(DstBudget, FloorPriorIsTheFloorsUpperBound) {
  // ceil((1 - p) k0): C(k) >= (k / k0) C(k0), so that k always keeps (1 - p) C(k0).
  EXPECT_EQ(DstBudget::floor_prior(8, 0.1), 8);    // 7.2 -> 8
  EXPECT_EQ(DstBudget::floor_prior(10, 0.1), 9);   // exactly 9, not 9.000...1 -> 10
  EXPECT_EQ(DstBudget::floor_prior(32, 0.2), 26);  // 25.6 -> 26
  EXPECT_EQ(DstBudget::floor_prior(8, 0.0), 8);
  EXPECT_EQ(DstBudget::floor_prior(8, 1.0), 1);
}

TEST(DstBudget, PredictsAtTheExpectedFloorWithoutChangingBudgets) {
  const LatencyPredictor predictor = analytic_predictor();
  const BudgetOptions o = dst_options(DstAnchor::kMean, 0.1);
  BudgetEstimator floors({1.0, DstBudget::floor_prior(8, 0.1)});  // alpha 1: the last observation
  DstBudget dst(o, predictor, BudgetEstimates{&floors});
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  const auto cost = [&](int64_t length, int64_t k) { return predictor.microbatch_ms({length}, k, 1); };

  // Nothing observed: the bottleneck (planned k = 1) is predicted at the prior, 8; the
  // raised micro-batches (16, 16) and the one at k0 are above the floor: unchanged.
  dst.assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{1, 16, 16, 8}));
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, cost(4096, 8), 1e-12);
  EXPECT_NEAR(plan.ranks[0][1].predicted_ms, cost(1024, 16), 1e-12);
  EXPECT_NEAR(plan.ranks[1][1].predicted_ms, cost(512, 8), 1e-12);

  // Layers of 4096-token micro-batches reported a mean floor of 2.5: halfway between the
  // predictions at 2 and 3 (the predictor is linear in k between them).
  floors.observe(4096, 2.5);
  plan = four_microbatches(lengths);
  dst.assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{1, 16, 16, 8}));
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, 0.5 * cost(4096, 2) + 0.5 * cost(4096, 3), 1e-12);

  // A floor at or below the planned budget changes nothing.
  floors.observe(4096, 1.0);
  plan = four_microbatches(lengths);
  dst.assign(plan, lengths);
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, cost(4096, 1), 1e-12);
}

TEST(DstBudget, RejectsInconsistentOptions) {
  const LatencyPredictor predictor = analytic_predictor();
  BudgetOptions o = dst_options(DstAnchor::kMean, 0.1);
  o.top_k = 80;  // above k_max 64
  EXPECT_THROW(DstBudget(o, predictor), std::invalid_argument);
  o = dst_options(DstAnchor::kMean, 1.5);
  EXPECT_THROW(DstBudget(o, predictor), std::invalid_argument);
  EXPECT_THROW(dst_anchor_options().from_name("median"), std::invalid_argument);
  EXPECT_EQ(dst_anchor_options().name_of(dst_anchor_options().from_name("min")), "min");
}

TEST(FixedBudget, GivesEveryMicroBatchK0AndNoFloor) {
  const LatencyPredictor predictor = analytic_predictor();
  BudgetOptions o;
  o.top_k = 4;
  auto fixed = make_budget_policy(o, &predictor);
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  fixed->assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{4, 4, 4, 4}));
  EXPECT_DOUBLE_EQ(plan.ranks[0][0].coverage_floor_ratio, 0.0);
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, 40.96 + 1e-5 * 4096 * 256, 1e-9);
  auto without_profile = make_budget_policy(o, nullptr);
  GlobalBatchPlan plain = four_microbatches(lengths);
  without_profile->assign(plain, lengths);
  EXPECT_LT(plain.ranks[0][0].predicted_ms, 0);  // unknown, not invented
}

// Vertical-slash's axis, kept keys per query (budget_policy.h, kKeptKeys), on the closed
// form with block 1: T(L, k) = 0.01 L + 1e-5 L min(k, L), linear in k between grid budgets
// (the lengths are grid budgets too, so the kink at k = L is a grid point).
LatencyPredictor kept_keys_predictor() {
  return LatencyPredictor(test::analytic_test_profile({256, 512, 1024, 2048, 4096}, {64, 128, 256, 512, 1024, 2048, 4096}, 1));
}

BudgetOptions kept_keys_options(BudgetKind kind) {
  BudgetOptions o;
  o.kind = kind;
  o.axis = BudgetAxis::kKeptKeys;
  o.top_k = 1024;  // the estimators' prior
  o.total_layers = 1;
  o.dst = DstOptions{DstAnchor::kMean, 0.1, 64, int64_t{1} << 20};
  return o;
}

TEST(DstBudget, KeptKeysAxisTakesEachMicroBatchsOwnReference) {
  // The pattern's own rule kept 2000 keys per query at 4096 tokens, 400 at 1024, 200 at 512:
  //   T(4096, 2000) = 40.96 + 81.92 = 122.88; T(1024, 400) = 10.24 + 4.096 = 14.336;
  //   T(512, 200) = 5.12 + 1.024 = 6.144; A = (122.88 + 2 x 14.336 + 6.144) / 4 = 39.424.
  // 4096: even k_min = 64 costs 40.96 + 2.62 > A: best effort 64.
  // 1024: below A; saturating budget (1024 + 2) / 2 = 513; T(1024, 513) = 15.49 <= A: 513.
  // 512: below A; saturating (512 + 2) / 2 = 257; T(512, 257) = 6.44 <= A: 257.
  const LatencyPredictor predictor = kept_keys_predictor();
  BudgetEstimator reference({1.0, 1024}), floors({1.0, DstBudget::floor_prior(1024, 0.1)});
  reference.observe(4096, 2000);
  reference.observe(1024, 400);
  reference.observe(512, 200);
  DstBudget dst(kept_keys_options(BudgetKind::kDst), predictor, BudgetEstimates{nullptr, &reference});
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  dst.assign(plan, lengths);
  EXPECT_NEAR(dst.last_anchor_ms(), 39.424, 1e-9);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{64, 513, 513, 257}));
  EXPECT_EQ(plan.ranks[0][0].coverage_reference_k, 2000);
  EXPECT_EQ(plan.ranks[1][1].coverage_reference_k, 200);
  EXPECT_NEAR(plan.ranks[0][1].predicted_ms, 10.24 + 1e-5 * 1024 * 513, 1e-9);

  // Before any report every k0 is the prior, 1024, at most the sequence's saturating
  // budget: 4096 -> 1024, 1024 -> 513, 512 -> 257;
  // A = (T(4096, 1024) + 2 T(1024, 513) + T(512, 257)) / 4 = (82.90 + 2 x 15.49 + 6.44) / 4 = 30.08.
  BudgetEstimator fresh({1.0, 1024});
  DstBudget prior_only(kept_keys_options(BudgetKind::kDst), predictor, BudgetEstimates{nullptr, &fresh});
  plan = four_microbatches(lengths);
  prior_only.assign(plan, lengths);
  EXPECT_NEAR(prior_only.last_anchor_ms(),
              (40.96 + 1e-5 * 4096 * 1024 + 2 * (10.24 + 1e-5 * 1024 * 513) + 5.12 + 1e-5 * 512 * 257) / 4, 1e-9);
  EXPECT_EQ(plan.ranks[0][0].coverage_reference_k, 1024);
  EXPECT_EQ(plan.ranks[0][1].coverage_reference_k, 513);
  EXPECT_EQ(plan.ranks[1][1].coverage_reference_k, 257);
  EXPECT_EQ(plan.ranks[0][0].budget, 64);
}

TEST(DstBudget, KeptKeysAxisNeedsTheReferenceEstimator) {
  const LatencyPredictor predictor = kept_keys_predictor();
  EXPECT_THROW(DstBudget(kept_keys_options(BudgetKind::kDst), predictor), std::invalid_argument);
  EXPECT_THROW(make_budget_policy(kept_keys_options(BudgetKind::kFixed), &predictor), std::invalid_argument);
}

TEST(FixedBudget, KeptKeysAxisSendsNoBudgetAndPredictsAtTheReference) {
  // The pattern's own rule runs (budget 0); the prediction is at what it kept before, and
  // before any report at the prior capped at the sequence's dense mean.
  const LatencyPredictor predictor = kept_keys_predictor();
  BudgetEstimator reference({1.0, 1024});
  reference.observe(4096, 2000);
  auto fixed = make_budget_policy(kept_keys_options(BudgetKind::kFixed), &predictor, BudgetEstimates{nullptr, &reference});
  std::vector<int64_t> lengths;
  GlobalBatchPlan plan = four_microbatches(lengths);
  fixed->assign(plan, lengths);
  EXPECT_EQ(budgets_of(plan), (std::vector<int64_t>{0, 0, 0, 0}));
  EXPECT_TRUE(plan.ranks[0][0].sequence_budgets.empty());
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, 40.96 + 1e-5 * 4096 * 2000, 1e-9);
  EXPECT_NEAR(plan.ranks[0][1].predicted_ms, 10.24 + 1e-5 * 1024 * 513, 1e-9);  // min(prior 1024, 513)
  EXPECT_EQ(saturating_budget(kept_keys_options(BudgetKind::kFixed), 1024), 513);
  EXPECT_EQ(saturating_budget(dst_options(DstAnchor::kMean, 0.1), 1000), 16);
}

TEST(DstBudget, KeptKeysAxisGivesPackedSequencesAtMostTheirOwnReference) {
  // Rank 0 packs 1024 + 512 tokens, rank 1 holds 4096; the rule kept 400, 200 and 2000.
  // A packed micro-batch's budget k is its longest sequence's; the 512 runs min(k, 200).
  //   T(1024 + 512 at k0 400) = 1e-5 (1024 x 400 + 512 x 200) + 0.01 x 1536 = 20.48;
  //   T(4096, 2000) = 122.88; A = 71.68.
  // 4096: T(4096, 64) = 43.58 <= A, the smallest rule: 64.
  // packed: raised to its saturating 513: 1e-5 (1024 x 513 + 512 x 200) + 15.36 = 21.64 <= A.
  const LatencyPredictor predictor = kept_keys_predictor();
  BudgetEstimator reference({1.0, 1024});
  reference.observe(4096, 2000);
  reference.observe(1024, 400);
  reference.observe(512, 200);
  const BudgetOptions options = kept_keys_options(BudgetKind::kDst);
  EXPECT_EQ(kept_keys_budgets(options, reference, {512, 1024}, 300), (std::vector<int64_t>{200, 300}));
  EXPECT_EQ(kept_keys_budgets(options, reference, {512, 1024}, 100), (std::vector<int64_t>{100, 100}));
  DstBudget dst(options, predictor, BudgetEstimates{nullptr, &reference});
  const std::vector<int64_t> lengths{1024, 512, 4096};
  GlobalBatchPlan plan;
  plan.ranks = {{PlannedMicroBatch{{0, 1}, 1536}}, {PlannedMicroBatch{{2}, 4096}}};
  dst.assign(plan, lengths);
  EXPECT_NEAR(dst.last_anchor_ms(), (20.48 + 122.88) / 2, 1e-9);
  EXPECT_EQ(plan.ranks[0][0].budget, 513);
  EXPECT_EQ(plan.ranks[0][0].sequence_budgets, (std::vector<int64_t>{513, 200}));
  EXPECT_NEAR(plan.ranks[0][0].predicted_ms, 1e-5 * (1024 * 513 + 512 * 200) + 15.36, 1e-9);
  EXPECT_EQ(plan.ranks[1][0].budget, 64);
  EXPECT_EQ(plan.ranks[1][0].sequence_budgets, (std::vector<int64_t>{64}));
}

}  // namespace
}  // namespace sb
