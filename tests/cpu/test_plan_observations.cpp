// The planner's observation exchange (harness/train/plan_observations.h) against the
// oracle it replaces: the iteration record rank 0 assembles from every rank's whole
// report. Summing the ranks' shares in any order must give the same bits, equal to the
// record's latencies, floors, per-sequence budgets and loss, and the mean budget up to
// rounding (a mean over layers and sequences of integers, the record's a mean of per-layer
// means).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "harness/train/iteration_report.h"
#include "harness/train/plan_observations.h"

namespace sb {
namespace {

PlannedMicroBatch planned(std::vector<int64_t> samples, int64_t budget) {
  PlannedMicroBatch mb;
  mb.samples = std::move(samples);
  mb.tokens = 10 * static_cast<int64_t>(mb.samples.size());
  mb.budget = budget;
  return mb;
}

// dp 2 x pp 2 x cp 2 x tp 2 (16 ranks), 4 layers (2 per stage), 7 samples, the
// kept-keys statistics (reference budgets) on, DST floors on some layers, awkward
// latencies (sums that round differently in another order).
struct Example {
  ParallelLayout layout{2, 2, 4, {}, 2, 2};
  GlobalBatchPlan plan;
  std::vector<RankIterationReport> reports;
  size_t samples = 7;

  Example() {
    plan.ranks = {{planned({3, 0}, 8), planned({5}, 4)}, {planned({1, 6, 2}, 6), planned({4}, 0)}};
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> ms(0.1, 9.9);
    std::uniform_int_distribution<int64_t> k(1, 40);
    reports.resize(static_cast<size_t>(layout.world_size()));
    for (int64_t r = 0; r < layout.world_size(); ++r) {
      RankIterationReport& report = reports[static_cast<size_t>(r)];
      const int64_t d = layout.dp_rank_of(r), s = layout.stage_of(r);
      const auto& mine = plan.ranks[static_cast<size_t>(d)];
      report.timeline.rank = r;
      report.timeline.dp_rank = d;
      report.timeline.stage = s;
      double t = 0;
      for (size_t j = 0; j < mine.size(); ++j) {
        for (EventKind kind : {EventKind::kForward, EventKind::kBackward}) {
          const double dur = ms(rng) / 3.0;
          report.timeline.events.push_back({kind, static_cast<int64_t>(j), t, t + dur});
          t += dur;
        }
      }
      report.timeline.end_ms = t;
      for (size_t j = 0; j < mine.size(); ++j) {
        report.layer_stats.emplace_back();
        for (int64_t l = layout.layers_of_stage(s).first; l < layout.layers_of_stage(s).end; ++l) {
          AttentionLayerStats stats;
          stats.layer = l;
          for (size_t i = 0; i < mine[j].samples.size(); ++i) {
            stats.top_k.push_back(k(rng));
            stats.reference_top_k.push_back(k(rng));
            stats.coverage.push_back(0.5);
          }
          stats.coverage_mean = 0.5;
          stats.k_floor = (l + static_cast<int64_t>(j)) % 3 == 0 ? k(rng) : 0;
          report.layer_stats.back().push_back(stats);
        }
      }
      report.loss_sum = layout.is_last_stage(r) ? ms(rng) * 100.0 : 0.0;
      report.grad_norm_squared = ms(rng);
    }
  }

  std::vector<double> share(const PlanObservationSlots& slots, int64_t r) const {
    const RankIterationReport& report = reports[static_cast<size_t>(r)];
    return slots.share(r, report.timeline.events, report.layer_stats, report.loss_sum, report.grad_norm_squared);
  }

  // Shares summed in the order given, as a collective might add them.
  std::vector<double> summed(const PlanObservationSlots& slots, const std::vector<int64_t>& order) const {
    std::vector<double> sum(slots.size(), 0.0);
    for (int64_t r : order) {
      const std::vector<double> mine = share(slots, r);
      for (size_t i = 0; i < sum.size(); ++i) sum[i] += mine[i];
    }
    return sum;
  }
};

std::vector<double> flat(const std::vector<std::vector<double>>& rows) {
  std::vector<double> out;
  for (const auto& row : rows) out.insert(out.end(), row.begin(), row.end());
  return out;
}

TEST(PlanObservations, EveryOrderOfTheSumGivesTheRecordsValuesBitForBit) {
  const Example ex;
  const PlanObservationSlots slots(ex.plan, ex.layout, ex.samples);
  std::vector<int64_t> order(static_cast<size_t>(ex.layout.world_size()));
  std::iota(order.begin(), order.end(), 0);
  const std::vector<double> forward = ex.summed(slots, order);
  std::reverse(order.begin(), order.end());
  EXPECT_EQ(ex.summed(slots, order), forward);
  std::shuffle(order.begin(), order.end(), std::mt19937_64(3));
  EXPECT_EQ(ex.summed(slots, order), forward);
  const PlanObservations seen = slots.read(forward, 4);

  IterationRecord record;
  record.loss_tokens = 1000;
  assemble_iteration_record(ex.reports, ex.plan, ex.layout, 4, record);
  EXPECT_EQ(flat(seen.latency_ms), record.microbatch_ms);
  EXPECT_EQ(seen.loss_sum() / 1000.0, record.loss);
  ASSERT_EQ(seen.floors.size(), 2u);
  size_t k = 0;
  for (size_t d = 0; d < ex.plan.ranks.size(); ++d) {
    for (size_t j = 0; j < ex.plan.ranks[d].size(); ++j, ++k) {
      const auto& floors = record.layer_floors.at(k);
      EXPECT_EQ(seen.floors[d][j], static_cast<double>(std::accumulate(floors.begin(), floors.end(), int64_t{0})) / 4.0);
      const auto& layers = record.layer_budgets.at(k);
      const double mean_of_means = std::accumulate(layers.begin(), layers.end(), 0.0) / 4.0;
      EXPECT_NEAR(seen.budgets[d][j], mean_of_means, 1e-12 * mean_of_means);
      // Per sequence, by plan position, exactly the record's.
      for (size_t i = 0; i < ex.plan.ranks[d][j].samples.size(); ++i) {
        const auto sample = static_cast<size_t>(ex.plan.ranks[d][j].samples[i]);
        EXPECT_EQ(seen.sample_budgets.at(sample), record.sequence_budgets.at(k).at(i));
        EXPECT_EQ(seen.sample_references.at(sample), record.sequence_reference_budgets.at(k).at(i));
      }
    }
  }
  for (size_t r = 0; r < ex.reports.size(); ++r) {
    const bool counted = ex.layout.is_last_stage(static_cast<int64_t>(r)) && ex.layout.tp_rank_of(static_cast<int64_t>(r)) == 0;
    EXPECT_EQ(seen.loss_shares[r], counted ? ex.reports[r].loss_sum : 0.0) << "rank " << r;
    EXPECT_EQ(seen.grad_norm_squared[r], ex.reports[r].grad_norm_squared) << "rank " << r;
  }
}

TEST(PlanObservations, OnlyTheLaneRanksWriteTheMicroBatchSlots) {
  const Example ex;
  const PlanObservationSlots slots(ex.plan, ex.layout, ex.samples);
  // 4 micro-batches x 2 stages x 2 + 4 x 3 + 7 x 2 + 1 + 16 x 2.
  EXPECT_EQ(slots.size(), 16u + 12u + 14u + 1u + 32u);
  EXPECT_EQ(slots.bytes(), 8.0 * static_cast<double>(slots.size()));
  for (int64_t r = 0; r < ex.layout.world_size(); ++r) {
    const std::vector<double> mine = ex.share(slots, r);
    const auto written = static_cast<size_t>(std::count_if(mine.begin(), mine.end(), [](double v) { return v != 0; }));
    const bool lane = ex.layout.cp_rank_of(r) == 0 && ex.layout.tp_rank_of(r) == 0;
    if (!lane) {
      // Its loss share (last stage, TP rank 0) and its norm share only.
      const bool loss = ex.layout.is_last_stage(r) && ex.layout.tp_rank_of(r) == 0;
      EXPECT_EQ(written, loss ? 2u : 1u) << "rank " << r;
    } else {
      EXPECT_GT(written, 10u) << "rank " << r;
    }
  }
}

TEST(PlanObservations, WithoutStatisticsTheBudgetIsThePlannedOne) {
  Example ex;
  for (RankIterationReport& r : ex.reports) {
    for (auto& mb : r.layer_stats) mb.clear();
  }
  const PlanObservationSlots slots(ex.plan, ex.layout, ex.samples);
  std::vector<int64_t> order(static_cast<size_t>(ex.layout.world_size()));
  std::iota(order.begin(), order.end(), 0);
  const PlanObservations seen = slots.read(ex.summed(slots, order), 4);
  EXPECT_EQ(seen.budgets, (std::vector<std::vector<double>>{{8, 4}, {6, 0}}));
  EXPECT_EQ(seen.floors, (std::vector<std::vector<double>>{{0, 0}, {0, 0}}));
  EXPECT_TRUE(seen.sample_budgets.empty());
  EXPECT_TRUE(seen.sample_references.empty());
}

TEST(PlanObservations, ContradictionsAreRejected) {
  Example ex;
  const PlanObservationSlots slots(ex.plan, ex.layout, ex.samples);
  EXPECT_THROW(slots.read(std::vector<double>(slots.size() + 1, 0.0), 4), std::invalid_argument);
  // Statistics for one stage's layers only: 2 of 4.
  std::vector<double> half(slots.size(), 0.0);
  const std::vector<double> stage0 = ex.share(slots, 0);
  for (size_t i = 0; i < half.size(); ++i) half[i] = stage0[i];
  EXPECT_THROW(slots.read(half, 4), std::invalid_argument);
  // A micro-batch index beyond the rank's plan, and budgets for the wrong sequence count.
  std::vector<TimelineEvent> events{{EventKind::kForward, 5, 0, 1}};
  EXPECT_THROW(slots.share(0, events, {}, 0, 0), std::invalid_argument);
  auto stats = ex.reports[0].layer_stats;
  stats[0][0].top_k.push_back(3);
  EXPECT_THROW(slots.share(0, {}, stats, 0, 0), std::invalid_argument);
  GlobalBatchPlan other;
  other.ranks.resize(3);
  EXPECT_THROW(PlanObservationSlots(other, ex.layout, 7), std::invalid_argument);
}

}  // namespace
}  // namespace sb
