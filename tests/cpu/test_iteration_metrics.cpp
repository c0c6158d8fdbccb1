// The timing metrics on synthetic timelines whose answers are worked out by hand, the
// record assembled from several ranks' reports (statistics from two stages), and the
// Chrome trace: one row per (DP rank, stage), times starting at 0, both parts of a
// resumed run on one axis.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "harness/parallel/parallel_layout.h"
#include "harness/trace/chrome_trace.h"
#include "harness/trace/iteration_metrics.h"
#include "harness/train/iteration_report.h"

namespace sb {
namespace {

RankTimeline rank(int64_t r, int64_t pp, double start, double end, std::vector<TimelineEvent> events) {
  return RankTimeline{r, r / pp, r % pp, start, end, std::move(events)};
}

TimelineEvent F(int64_t mb, double s, double e) { return {EventKind::kForward, mb, s, e}; }
TimelineEvent B(int64_t mb, double s, double e) { return {EventKind::kBackward, mb, s, e}; }
TimelineEvent W(EventKind kind, double s, double e) { return {kind, -1, s, e}; }

// Two stages, two micro-batches, F = 1 ms and B = 2 ms everywhere, laid out as 1F1B
// runs them:
//   stage 0: F0 [0,1]  F1 [1,2]  (wait)  B0 [5,7]  (wait)  B1 [8,10]  optimizer [10,11]
//   stage 1: (wait) F0 [1,2]  B0 [2,4]  F1 [4,5]  B1 [5,7]   optimizer [7,8]
// Stage 1 starts its iteration at 0.5 and ends at 8: span 7.5; stage 0 spans 11.
std::vector<RankTimeline> two_stage_example() {
  return {rank(0, 2, 0, 11, {F(0, 0, 1), F(1, 1, 2), W(EventKind::kRecvWait, 2, 5), B(0, 5, 7),
                             W(EventKind::kRecvWait, 7, 8), B(1, 8, 10), W(EventKind::kOptimizer, 10, 11)}),
          rank(1, 2, 0.5, 8, {W(EventKind::kRecvWait, 0.5, 1), F(0, 1, 2), B(0, 2, 4), F(1, 4, 5), B(1, 5, 7),
                              W(EventKind::kOptimizer, 7, 8)})};
}

TEST(IterationMetrics, TwoStagePipelineByHand) {
  const PipelineMetrics m = compute_pipeline_metrics(two_stage_example(), 1, 2, {2});
  EXPECT_DOUBLE_EQ(m.iter_ms, 11.0);                                   // max(11, 7.5)
  EXPECT_EQ(m.busy_ms, (std::vector<double>{6.0, 6.0}));               // 1+1+2+2 on each
  EXPECT_EQ(m.idle_ms, (std::vector<double>{5.0, 5.0}));               // 11 - 6
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 5.0 / 11.0);
  EXPECT_DOUBLE_EQ(m.bubble_fraction_max, 5.0 / 11.0);
  EXPECT_EQ(m.microbatch_ms, (std::vector<double>{6.0, 6.0}));         // (1+2) on two stages
  EXPECT_EQ(m.microbatch_dp_rank, (std::vector<int64_t>{0, 0}));
  EXPECT_DOUBLE_EQ(m.imbalance, 1.0);
}

TEST(IterationMetrics, TwoDataParallelRanksWithDifferentCounts) {
  // dp 2 x pp 1: DP rank 0 trains micro-batches of 3 and 1 ms (forward + backward),
  // DP rank 1 one of 4 ms; rank 0's iteration takes 6 ms, rank 1's 5 ms.
  const std::vector<RankTimeline> ranks = {
      rank(0, 1, 0, 6, {F(0, 0, 1), B(0, 1, 3), F(1, 3, 3.5), B(1, 3.5, 4), W(EventKind::kAllReduce, 4, 6)}),
      rank(1, 1, 1, 6, {F(0, 1, 2), B(0, 2, 5), W(EventKind::kAllReduce, 5, 6)})};
  const PipelineMetrics m = compute_pipeline_metrics(ranks, 2, 1, {2, 1});
  EXPECT_DOUBLE_EQ(m.iter_ms, 6.0);
  EXPECT_EQ(m.busy_ms, (std::vector<double>{4.0, 4.0}));
  EXPECT_EQ(m.idle_ms, (std::vector<double>{2.0, 2.0}));
  EXPECT_DOUBLE_EQ(m.bubble_fraction, 2.0 / 6.0);
  EXPECT_EQ(m.microbatch_ms, (std::vector<double>{3.0, 1.0, 4.0}));
  EXPECT_EQ(m.microbatch_dp_rank, (std::vector<int64_t>{0, 0, 1}));
  EXPECT_DOUBLE_EQ(m.imbalance, 4.0 / (8.0 / 3.0));  // max / mean = 4 / 2.667 = 1.5
  // Between DP ranks: sums 4 and 4 -> 1; slots: only slot 0 is run by both (3 and 4):
  // 4 / 3.5.
  EXPECT_DOUBLE_EQ(m.dp_imbalance, 1.0);
  EXPECT_DOUBLE_EQ(m.slot_imbalance, 4.0 / 3.5);
}

TEST(IterationMetrics, RankImbalanceByHand) {
  // DP rank 0: 5, 1, 2 ms; DP rank 1: 1, 3 ms; DP rank 2: 3 ms (plan order interleaved to
  // show that each rank's own order counts). Sums 8, 4, 3: 8 / 5 = 1.6. Slot 0 only (rank
  // 2 has one micro-batch): 5, 1, 3 -> 5 / 3.
  const RankImbalance r = rank_imbalance({5, 1, 1, 2, 3, 3}, {0, 1, 0, 0, 1, 2});
  EXPECT_DOUBLE_EQ(r.dp, 8.0 / 5.0);
  EXPECT_DOUBLE_EQ(r.slot, 5.0 / 3.0);
  // Two ranks, two slots each: (6, 2) and (2, 2) -> slots 6 / 4 and 1, mean 1.25; sums 8 and
  // 4 -> 8 / 6.
  const RankImbalance two = rank_imbalance({6, 2, 2, 2}, {0, 0, 1, 1});
  EXPECT_DOUBLE_EQ(two.slot, (1.5 + 1.0) / 2);
  EXPECT_DOUBLE_EQ(two.dp, 8.0 / 6.0);
  // One DP rank, or none: 1; a DP rank without micro-batches: slot 1, sums count it as 0.
  EXPECT_DOUBLE_EQ(rank_imbalance({3, 1}, {0, 0}).dp, 1.0);
  EXPECT_DOUBLE_EQ(rank_imbalance({}, {}).slot, 1.0);
  const RankImbalance empty_rank = rank_imbalance({2, 2}, {0, 2});
  EXPECT_DOUBLE_EQ(empty_rank.dp, 2.0 / (4.0 / 3.0));
  EXPECT_DOUBLE_EQ(empty_rank.slot, 1.0);
  EXPECT_THROW(rank_imbalance({1}, {}), std::invalid_argument);
}

TEST(IterationMetrics, UnevenStagesGiveMeanAndMaxBubbles) {
  // One micro-batch through two stages: stage 0 computes 2 ms, stage 1 computes 6 ms,
  // both iterations last 10 ms: idle 8 and 4 -> fractions 0.8 and 0.4.
  const std::vector<RankTimeline> ranks = {
      rank(0, 2, 0, 10, {F(0, 0, 1), B(0, 8, 9)}),
      rank(1, 2, 0, 10, {F(0, 1, 4), B(0, 4, 7)})};
  const PipelineMetrics m = compute_pipeline_metrics(ranks, 1, 2, {1});
  EXPECT_DOUBLE_EQ(m.bubble_fraction, (0.8 + 0.4) / 2);
  EXPECT_DOUBLE_EQ(m.bubble_fraction_max, 0.8);
  EXPECT_EQ(m.microbatch_ms, (std::vector<double>{8.0}));
}

TEST(IterationMetrics, MalformedTimelinesAreRejected) {
  auto ranks = two_stage_example();
  ranks[1].events.pop_back();
  ranks[1].events.pop_back();  // stage 1 lost B1 (and the optimizer)
  EXPECT_THROW(compute_pipeline_metrics(ranks, 1, 2, {2}), std::invalid_argument);
  EXPECT_THROW(compute_pipeline_metrics(two_stage_example(), 2, 1, {1, 1}), std::invalid_argument);
  EXPECT_THROW(compute_pipeline_metrics(two_stage_example(), 1, 2, {3}), std::invalid_argument);
}

TEST(IterationMetrics, MaxOverMean) {
  EXPECT_DOUBLE_EQ(max_over_mean({}), 1.0);
  EXPECT_DOUBLE_EQ(max_over_mean({2.0, 4.0, 6.0}), 1.5);
  EXPECT_DOUBLE_EQ(max_over_mean({0.0, 0.0}), 1.0);
}

AttentionLayerStats layer(int64_t index, int64_t k, double coverage, int64_t k_floor = 0) {
  return AttentionLayerStats{index, {k, k}, {coverage, coverage}, coverage, k_floor};
}

PlannedMicroBatch planned(std::vector<int64_t> samples, int64_t tokens, int64_t budget, double predicted_ms) {
  PlannedMicroBatch mb;
  mb.samples = std::move(samples);
  mb.tokens = tokens;
  mb.budget = budget;
  mb.predicted_ms = predicted_ms;
  return mb;
}

TEST(IterationReport, RecordFromTwoStagesWithStatistics) {
  const ParallelLayout layout(1, 2, 4);
  GlobalBatchPlan plan;
  plan.ranks = {{planned({0, 1}, 30, 8, 12.5), planned({2}, 20, 4, 7.5)}};
  std::vector<RankIterationReport> reports(2);
  const auto timelines = two_stage_example();
  for (int r = 0; r < 2; ++r) reports[static_cast<size_t>(r)].timeline = timelines[static_cast<size_t>(r)];
  reports[0].balance_ms = 0.25;
  reports[1].balance_ms = 0.5;
  reports[0].allreduce_ms = 3;
  // The exchange as the last rank to arrive saw it (it waited for no one).
  reports[0].plan_exchange_ms = 2.0;
  reports[1].plan_exchange_ms = 0.75;
  reports[1].loss_sum = 42.0;  // only the last stage's loss counts
  reports[0].loss_sum = 1000.0;
  reports[0].layer_stats = {{layer(0, 8, 0.9), layer(1, 8, 0.8)}, {layer(0, 4, 0.7), layer(1, 5, 0.6)}};
  reports[1].layer_stats = {{layer(2, 8, 0.5), layer(3, 8, 0.4)}, {layer(2, 4, 0.3), layer(3, 4, 0.2)}};
  IterationRecord record;
  record.loss_tokens = 21;
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_DOUBLE_EQ(record.loss, 2.0);
  EXPECT_DOUBLE_EQ(record.plan_exchange_ms, 0.75);
  EXPECT_DOUBLE_EQ(record.balance_overhead_ms, 0.5 + 0.75);
  EXPECT_DOUBLE_EQ(record.allreduce_ms, 3.0);
  EXPECT_DOUBLE_EQ(record.iter_ms, 11.0);
  EXPECT_EQ(iteration_record_from_json(iteration_record_to_json(record)).plan_exchange_ms, 0.75);
  EXPECT_EQ(record.microbatch_tokens, (std::vector<int64_t>{30, 20}));
  EXPECT_EQ(record.microbatch_pred_ms, (std::vector<double>{12.5, 7.5}));
  EXPECT_EQ(record.budgets, (std::vector<int64_t>{8, 4}));
  EXPECT_EQ(record.layer_budgets, (std::vector<std::vector<double>>{{8, 8, 8, 8}, {4, 5, 4, 4}}));
  EXPECT_EQ(record.layer_coverage, (std::vector<std::vector<double>>{{0.9, 0.8, 0.5, 0.4}, {0.7, 0.6, 0.3, 0.2}}));
  EXPECT_DOUBLE_EQ(record.coverage[0], (0.9 + 0.8 + 0.5 + 0.4) / 4);
  EXPECT_DOUBLE_EQ(record.coverage[1], (0.7 + 0.6 + 0.3 + 0.2) / 4);
  EXPECT_TRUE(record.layer_floors.empty()) << "no layer applied a floor";

  // DST's floors, per (micro-batch, layer) over both stages; a layer without one reads 0.
  reports[0].layer_stats = {{layer(0, 8, 0.9, 6), layer(1, 8, 0.8, 7)}, {layer(0, 4, 0.7, 3), layer(1, 5, 0.6, 5)}};
  reports[1].layer_stats = {{layer(2, 8, 0.5, 8), layer(3, 8, 0.4)}, {layer(2, 4, 0.3, 2), layer(3, 4, 0.2, 4)}};
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_EQ(record.layer_floors, (std::vector<std::vector<int64_t>>{{6, 7, 8, 0}, {3, 5, 2, 4}}));
  record.microbatch_lengths = plan_microbatch_lengths(plan, {10, 20, 20});
  EXPECT_EQ(record.microbatch_lengths, (std::vector<std::vector<int64_t>>{{10, 20}, {20}}));
  const IterationRecord back = iteration_record_from_json(iteration_record_to_json(record));
  EXPECT_EQ(back.layer_floors, record.layer_floors);
  EXPECT_EQ(back.microbatch_lengths, record.microbatch_lengths);

  // Without statistics and predictions the fields stay empty (absent from the JSON).
  for (auto& r : reports) r.layer_stats = {{}, {}};
  plan.ranks[0][1].predicted_ms = -1;
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_TRUE(record.budgets.empty());
  EXPECT_TRUE(record.microbatch_pred_ms.empty());
  const nlohmann::json j = iteration_record_to_json(record);
  for (const char* key : {"budgets", "coverage", "layer_budgets", "layer_coverage", "microbatch_pred_ms"}) {
    EXPECT_FALSE(j.contains(key)) << key;
  }
  // Run-queue waits, per world rank, only when every rank could read its own.
  reports[0].runqueue_wait_ms = 1.5;
  reports[1].runqueue_wait_ms = 0.0;
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_EQ(record.runqueue_wait_ms, (std::vector<double>{1.5, 0.0}));
  EXPECT_EQ(iteration_record_from_json(iteration_record_to_json(record)).runqueue_wait_ms, record.runqueue_wait_ms);
  reports[1].runqueue_wait_ms = -1;
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_TRUE(record.runqueue_wait_ms.empty());
  EXPECT_FALSE(iteration_record_to_json(record).contains("runqueue_wait_ms"));
  // A stage that reports statistics for some layers only is a contradiction.
  reports[0].layer_stats = {{layer(0, 8, 0.9)}, {layer(0, 4, 0.7)}};
  EXPECT_THROW(assemble_iteration_record(reports, plan, layout, 4, record), std::invalid_argument);
}

TEST(IterationReport, ContextParallelRanksGiveWorkerImbalance) {
  // pp 2 x cp 2: world ranks (stage, cp) = 0 (0, 0), 1 (0, 1), 2 (1, 0), 3 (1, 1). Each
  // CP rank's ring work is summed over its stages; the pipeline metrics read CP rank 0.
  const ParallelLayout layout(1, 2, 4, {}, 2);
  GlobalBatchPlan plan;
  plan.ranks = {{planned({0, 1}, 30, 8, 12.5), planned({2}, 20, 4, 7.5)}};
  std::vector<RankIterationReport> reports(4);
  const auto timelines = two_stage_example();
  for (int r = 0; r < 4; ++r) {
    reports[static_cast<size_t>(r)].timeline = timelines[static_cast<size_t>(r / 2)];
    reports[static_cast<size_t>(r)].timeline.rank = r;  // the world rank under CP
  }
  reports[2].loss_sum = 30.0;  // the last stage's two CP ranks each hold part of the loss
  reports[3].loss_sum = 12.0;
  reports[0].cp_attention_ms = {3.0, 1.0};
  reports[1].cp_attention_ms = {1.0, 1.0};
  reports[2].cp_attention_ms = {3.0, 1.0};
  reports[3].cp_attention_ms = {1.0, 1.0};
  reports[0].cp_kept_pairs = {10, 5};
  reports[1].cp_kept_pairs = {30, 5};
  reports[2].cp_kept_pairs = {10, 5};
  reports[3].cp_kept_pairs = {30, 5};
  IterationRecord record;
  record.loss_tokens = 21;
  assemble_iteration_record(reports, plan, layout, 4, record);
  EXPECT_DOUBLE_EQ(record.loss, 2.0);
  EXPECT_DOUBLE_EQ(record.iter_ms, 11.0);
  EXPECT_EQ(record.cp_attention_ms, (std::vector<std::vector<double>>{{6.0, 2.0}, {2.0, 2.0}}));
  EXPECT_EQ(record.cp_kept_pairs, (std::vector<std::vector<int64_t>>{{20, 60}, {10, 10}}));
  EXPECT_EQ(record.cp_worker_imbalance, (std::vector<double>{1.5, 1.0}));  // 6 / mean(6, 2)
  EXPECT_EQ(record.cp_work_imbalance, (std::vector<double>{1.5, 1.0}));    // 60 / mean(20, 60)
  const IterationRecord back = iteration_record_from_json(iteration_record_to_json(record));
  EXPECT_EQ(back.cp_kept_pairs, record.cp_kept_pairs);
  EXPECT_EQ(back.cp_worker_imbalance, record.cp_worker_imbalance);
}

TEST(IterationReport, ContextTimesTensorParallelRanksByHand) {
  // cp 2 x tp 2, one stage: world ranks (cp, tp) = 0 (0, 0), 1 (0, 1), 2 (1, 0), 3 (1, 1).
  // A CP rank's ring compute is its slowest TP rank's, its kept pairs the sum over its TP
  // ranks; TP rank t's communication the mean over the CP ranks; the loss TP rank 0's of
  // each CP rank; a layer's coverage the mean over CP rank 0's TP ranks.
  const ParallelLayout layout(1, 1, 2, {}, 2, 2);
  GlobalBatchPlan plan;
  plan.ranks = {{planned({0, 1}, 30, 8, 12.5)}};
  std::vector<RankIterationReport> reports(4);
  for (int r = 0; r < 4; ++r) {
    reports[static_cast<size_t>(r)].timeline = RankTimeline{r, 0, 0, 0, 6, {F(0, 0, 2), B(0, 2, 6)}};
  }
  reports[0].loss_sum = 30.0;
  reports[1].loss_sum = 30.0;  // TP rank 1 holds the same loss as TP rank 0: not counted
  reports[2].loss_sum = 12.0;
  reports[3].loss_sum = 12.0;
  reports[0].cp_attention_ms = {3.0};
  reports[1].cp_attention_ms = {5.0};
  reports[2].cp_attention_ms = {2.0};
  reports[3].cp_attention_ms = {1.0};
  reports[0].cp_kept_pairs = {10};
  reports[1].cp_kept_pairs = {12};
  reports[2].cp_kept_pairs = {40};
  reports[3].cp_kept_pairs = {48};
  reports[0].tp_comm_ms = {1.0};
  reports[1].tp_comm_ms = {2.0};
  reports[2].tp_comm_ms = {3.0};
  reports[3].tp_comm_ms = {6.0};
  reports[0].layer_stats = {{layer(0, 8, 0.9), layer(1, 8, 0.5)}};
  reports[1].layer_stats = {{layer(0, 8, 0.7), layer(1, 8, 0.3)}};
  reports[2].layer_stats = {{layer(0, 8, 0.1), layer(1, 8, 0.1)}};  // CP ranks route alike: read CP rank 0
  reports[3].layer_stats = {{layer(0, 8, 0.1), layer(1, 8, 0.1)}};
  IterationRecord record;
  record.loss_tokens = 21;
  assemble_iteration_record(reports, plan, layout, 2, record);
  EXPECT_DOUBLE_EQ(record.loss, 2.0);  // (30 + 12) / 21
  EXPECT_EQ(record.cp_attention_ms, (std::vector<std::vector<double>>{{5.0, 2.0}}));
  EXPECT_EQ(record.cp_kept_pairs, (std::vector<std::vector<int64_t>>{{22, 88}}));
  EXPECT_DOUBLE_EQ(record.cp_worker_imbalance[0], 5.0 / 3.5);
  EXPECT_DOUBLE_EQ(record.cp_work_imbalance[0], 88.0 / 55.0);
  EXPECT_EQ(record.tp_comm_ms, (std::vector<std::vector<double>>{{2.0, 4.0}}));
  ASSERT_EQ(record.layer_coverage.size(), 1u);
  EXPECT_DOUBLE_EQ(record.layer_coverage[0][0], 0.8);
  EXPECT_DOUBLE_EQ(record.layer_coverage[0][1], 0.4);
}

TEST(IterationReport, JsonRoundTrip) {
  RankIterationReport r;
  r.timeline = two_stage_example()[1];
  r.loss_sum = 3.25;
  r.runqueue_wait_ms = 0.75;
  r.layer_stats = {{layer(2, 8, 0.5, 3)}, {}};
  const RankIterationReport back = rank_iteration_report_from_json(rank_iteration_report_to_json(r));
  EXPECT_EQ(rank_iteration_report_to_json(back), rank_iteration_report_to_json(r));
  EXPECT_EQ(back.timeline.events.size(), r.timeline.events.size());
  EXPECT_EQ(back.layer_stats[0][0].k_floor, 3);
  EXPECT_DOUBLE_EQ(back.runqueue_wait_ms, 0.75);
}

TEST(ChromeTrace, OneRowPerDataParallelRankAndStageOnOneTimeAxis) {
  TimelineIteration first{0, 1000.0, two_stage_example()};
  TimelineIteration resumed{1, 1100.0, two_stage_example()};  // a later process set, 100 ms on
  const nlohmann::json trace = chrome_trace({first, resumed});
  std::set<std::pair<int64_t, int64_t>> rows;
  std::map<std::string, double> first_ts;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") continue;
    rows.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
    const std::string key = e["name"].get<std::string>() + "@" + std::to_string(e["tid"].get<int64_t>());
    if (!first_ts.count(key)) first_ts[key] = e["ts"].get<double>();
  }
  EXPECT_EQ(rows, (std::set<std::pair<int64_t, int64_t>>{{0, 0}, {0, 1}}));
  EXPECT_DOUBLE_EQ(first_ts["iteration 0@0"], 0.0);       // the trace starts at 0
  EXPECT_DOUBLE_EQ(first_ts["iteration 1@0"], 100000.0);  // 100 ms later, in microseconds
  EXPECT_DOUBLE_EQ(first_ts["B 0@1"], 2000.0);
  int names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") {
      ++names;
      EXPECT_EQ(e["args"]["name"].get<std::string>().rfind("stage ", 0), 0u);
    }
  }
  EXPECT_EQ(names, 2);
  EXPECT_EQ(trace["otherData"]["rows"], "every DP rank");
}

// A run of 200 DP ranks x 2 stages: 64 rows spread over the range, plus each iteration's
// last to finish; the events of a kept rank are all there.
TEST(ChromeTrace, ManyDataParallelRanksKeepSixtyFourSpreadAndTheLastToFinish) {
  const auto iteration = [](int64_t number, int64_t straggler) {
    TimelineIteration it{number, 1000.0 * static_cast<double>(number), {}};
    for (int64_t d = 0; d < 200; ++d) {
      for (int64_t stage = 0; stage < 2; ++stage) {
        const double end = d == straggler ? 90.0 : 50.0;
        it.ranks.push_back({d * 2 + stage, d, stage, 1.0, end, {{EventKind::kForward, 0, 1.0, 5.0}}});
      }
    }
    return it;
  };
  const nlohmann::json trace = chrome_trace({iteration(0, 7), iteration(1, 133)});
  std::map<int64_t, std::set<int64_t>> pids_of_iteration;
  size_t forwards = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M") continue;
    pids_of_iteration[e["args"]["iteration"].get<int64_t>()].insert(e["pid"].get<int64_t>());
    forwards += e["name"] == "F 0";
  }
  std::set<int64_t> spread;
  for (int64_t i = 0; i < 64; ++i) spread.insert(i * 200 / 64);  // 0, 3, 6, 9, ..., 196
  EXPECT_EQ(spread.count(7), 0u);
  std::set<int64_t> first = spread, second = spread;
  first.insert(7);
  second.insert(133);
  EXPECT_EQ(pids_of_iteration[0], first);
  EXPECT_EQ(pids_of_iteration[1], second);
  EXPECT_EQ(forwards, (first.size() + second.size()) * 2);  // both stages of every kept rank
  EXPECT_EQ(trace["otherData"]["rows"],
            "64 of 200 DP ranks (DP rank i x 200 / 64) and each iteration's last to finish; timeline_events.jsonl "
            "holds every rank");
  // The same iterations with room for every rank keep them all.
  const nlohmann::json whole = chrome_trace({iteration(0, 7)}, /*max_dp_ranks=*/200);
  std::set<int64_t> pids;
  for (const auto& e : whole["traceEvents"]) pids.insert(e["pid"].get<int64_t>());
  EXPECT_EQ(pids.size(), 200u);
}

}  // namespace
}  // namespace sb
